//! Compiled kernels kept on disk between processes. NVRTC takes seconds for the larger sources
//! (the scatter's, with every dtype), which every process that runs a scatter would pay again;
//! the PTX of a source is stored under a key of everything that shapes it (the source text, the
//! architecture, NVRTC's version and the options), so that an edited source, another GPU or
//! another NVRTC compiles afresh. The driver keeps its own cache of the machine code it makes
//! from PTX.

use std::path::{Path, PathBuf};

use cudarc::nvrtc::Ptx;

use crate::device::Source;
use crate::error::Result;

/// The folder: `GATHER_CUDA_CACHE` (`off` keeps nothing), else `$XDG_CACHE_HOME/gather-cuda`,
/// else `$HOME/.cache/gather-cuda`; none when none of them is set.
fn dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = var("GATHER_CUDA_CACHE") {
        return (d != "off").then(|| PathBuf::from(d));
    }
    var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache")))
        .map(|d| d.join("gather-cuda"))
}

/// FNV-1a over the parts, each followed by its length, so that no two lists of parts give the
/// same bytes: a key that does not change with the Rust version that built the crate.
fn key(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.iter().chain(&(p.len() as u64).to_le_bytes()) {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// What shapes a source's PTX: the cache's key.
pub(crate) struct Compile<'a> {
    pub source: Source,
    pub text: &'a str,
    pub arch: &'a str,
    /// NVRTC's (major, minor).
    pub version: (i32, i32),
    pub options: &'a [String],
}

impl Compile<'_> {
    /// The file of this PTX in `dir`.
    fn file(&self, dir: &Path) -> PathBuf {
        let (major, minor) = (self.version.0.to_le_bytes(), self.version.1.to_le_bytes());
        let mut parts: Vec<&[u8]> =
            vec![self.text.as_bytes(), self.arch.as_bytes(), &major, &minor];
        parts.extend(self.options.iter().map(|o| o.as_bytes()));
        let mut name = format!("{:?}-{}-{:016x}.ptx", self.source, self.arch, key(&parts));
        name.make_ascii_lowercase();
        dir.join(name)
    }

    /// The PTX: from the cache when an earlier process stored it, else from `compile`, then
    /// stored (a cache that cannot be written is no error). The path comes back with a PTX
    /// read from the cache, so that the caller can replace a file the driver rejects.
    pub(crate) fn load_or(
        &self,
        compile: impl FnOnce() -> Result<Ptx>,
    ) -> Result<(Ptx, Option<PathBuf>)> {
        self.load_in(dir().as_deref(), compile)
    }

    fn load_in(
        &self,
        dir: Option<&Path>,
        compile: impl FnOnce() -> Result<Ptx>,
    ) -> Result<(Ptx, Option<PathBuf>)> {
        let Some(dir) = dir else {
            return Ok((compile()?, None));
        };
        let path = self.file(dir);
        if let Ok(ptx) = std::fs::read_to_string(&path) {
            if ptx.contains(".entry") {
                return Ok((Ptx::from_src(ptx), Some(path)));
            }
        }
        let ptx = compile()?;
        store(dir, &path, &ptx.to_src());
        Ok((ptx, None))
    }
}

/// Writes through a file of this process's own and a rename, so that a process reading the
/// cache never sees half a file, whichever of several writers wins.
fn store(dir: &Path, path: &Path, ptx: &str) {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, ptx))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Writes a fresh compile over a cached file that the driver would not load.
pub(crate) fn replace(path: &Path, ptx: &str) {
    if let Some(dir) = path.parent() {
        store(dir, path, ptx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key is FNV-1a as published (the empty input gives the offset basis), and parts are
    /// delimited: moving a byte from one part to the next changes it.
    #[test]
    fn keys_are_stable_and_delimit_their_parts() {
        assert_eq!(key(&[]), 0xcbf2_9ce4_8422_2325);
        assert_ne!(key(&[b"ab", b"c"]), key(&[b"a", b"bc"]));
        assert_eq!(key(&[b"ab", b"c"]), key(&[b"ab", b"c"]));
    }

    fn gather_90(text: &str) -> Compile<'_> {
        const O: &[String] = &[];
        Compile {
            source: Source::Gather,
            text,
            arch: "compute_90",
            version: (13, 0),
            options: O,
        }
    }

    /// Another text, architecture, NVRTC or option names another file.
    #[test]
    fn every_input_of_the_compile_is_in_the_file_name() {
        let d = Path::new("/c");
        let o = vec!["-std=c++17".to_string()];
        let base = gather_90("k").file(d);
        assert!(base.to_str().unwrap().starts_with("/c/gather-compute_90-"));
        for other in [
            Compile {
                text: "k2",
                ..gather_90("k")
            },
            Compile {
                arch: "compute_80",
                ..gather_90("k")
            },
            Compile {
                version: (13, 1),
                ..gather_90("k")
            },
            Compile {
                options: &o,
                ..gather_90("k")
            },
            Compile {
                source: Source::Scatter,
                ..gather_90("k")
            },
        ] {
            assert_ne!(other.file(d), base);
        }
    }

    /// A first process compiles and stores; the next reads the stored PTX without compiling;
    /// a file without an entry is compiled over; no folder, no cache.
    #[test]
    fn a_second_process_reads_what_the_first_compiled() {
        let dir = std::env::temp_dir().join(format!("gather-ptx-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ptx = ".visible .entry k()\n{\n}\n";
        let c = gather_90("text");
        let run = |compile: &dyn Fn() -> Result<Ptx>| c.load_in(Some(&dir), compile).unwrap();
        let fresh = || Ok(Ptx::from_src(ptx));
        let (first, cached) = run(&fresh);
        assert_eq!((first.to_src(), cached), (ptx.to_string(), None));
        let (second, cached) = run(&|| panic!("compiled although cached"));
        assert_eq!(second.to_src(), ptx);
        let path = cached.expect("read from the cache");
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(files.len(), 1, "no temporary file is left behind");
        std::fs::write(&path, "not ptx").unwrap();
        assert_eq!(run(&fresh).1, None);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), ptx);
        replace(&path, ".visible .entry k2()\n{\n}\n");
        assert!(run(&fresh).0.to_src().contains("k2"));
        assert_eq!(c.load_in(None, fresh).unwrap().1, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

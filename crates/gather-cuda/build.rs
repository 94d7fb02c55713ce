//! Embeds the CUDA kernel sources (`src/kernels`) without their comments, indentation and blank
//! lines: the library carries them as text for NVRTC, and those are nearly half of their bytes.

use std::path::Path;

fn main() {
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    println!("cargo:rerun-if-changed=src/kernels");
    for entry in std::fs::read_dir("src/kernels").expect("src/kernels") {
        let path = entry.expect("a kernel source").path();
        let text = std::fs::read_to_string(&path).expect("a UTF-8 kernel source");
        let name = path.file_name().expect("a file name");
        std::fs::write(Path::new(&out).join(name), strip(&text)).expect("OUT_DIR is writable");
    }
}

/// Each line without its `//` comment (none of the sources has `//` in a string) and its
/// surrounding blanks; a macro line keeps its continuation, and empty lines go.
fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let code = line.find("//").map_or(line, |i| &line[..i]).trim();
        let cont = line.trim_end().ends_with('\\');
        let code = code.strip_suffix('\\').unwrap_or(code).trim_end();
        if code.is_empty() && !cont {
            continue;
        }
        out.push_str(code);
        out.push_str(if cont { " \\\n" } else { "\n" });
    }
    out
}

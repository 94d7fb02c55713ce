//! `gather run` on every op of the library and every dtype, on `.npy` and `.safetensors` files.
//!
//! The cases come from the shared conformance suite: for every op and every dtype, the first
//! success case (compared exactly or within its tolerance). Its tensors are passed to the binary
//! as `.npy` files, and again as tensors of one `.safetensors` file; its arguments become the
//! command's options; the files written must equal the case's expected outputs.
//!
//! Cases that the library itself fails (`tests/known_failing.txt`, kept by the conformance
//! test; empty today) are left out, but every op must have cases.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use gather::DType;
use gather::dynamic::{Arg, Tensor};
use gather_cli::case::Case;
use gather_cli::compare::{check_exact, check_tolerance};
use gather_cli::npy::load_npy;
use gather_cli::tensor_io::{LoadOptions, Role, load, safetensors_bytes};

/// Ops of the library that PyTorch does not have, so the suite has no cases of them.
/// (`tests/run_beyond.rs` runs the group, segment and broadcast ops through `gather run`.)
const BEYOND_PYTORCH: &[&str] = &[
    "select_batched",
    "scatter_groups",
    "scatter_any",
    "scatter_all",
    "scatter_softmax",
    "scatter_log_softmax",
    "scatter_reduce_arg",
    "segment_reduce",
    "segment_arg_reduce",
    "segment_any",
    "segment_all",
    "segment_softmax",
    "segment_log_softmax",
    "bincount",
    "gather_broadcast",
    "scatter_broadcast",
    "scatter_add_broadcast",
    "scatter_reduce_broadcast",
];

fn suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/cases")
}

fn known_failing() -> BTreeSet<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/known_failing.txt");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// The first plain success case of every (op, dtype) the library passes.
fn sample_cases() -> Vec<(String, Case)> {
    let failing = known_failing();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(suite_dir())
        .expect("the conformance suite beside the checkout")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    dirs.sort();
    let mut picked: BTreeMap<(String, String), (String, Case)> = BTreeMap::new();
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        if failing.contains(&name) || name.starts_with("opinfo__") {
            continue;
        }
        let case = Case::parse(&std::fs::read_to_string(d.join("case.json")).unwrap()).unwrap();
        if case.error.is_some() || case.any_of_duplicates || case.unordered || case.ties_any_index {
            continue;
        }
        let dtype = case
            .inputs
            .iter()
            .find(|(n, _)| n == "input" || n == "repeats")
            .map(|(_, f)| case.dtype_of(f).unwrap().name().to_string())
            .unwrap_or_default();
        picked
            .entry((case.op.clone(), dtype))
            .or_insert((name, case));
    }
    picked.into_values().collect()
}

/// The command-line options of a case's arguments.
fn arg_flags(case: &Case) -> Vec<String> {
    let mut flags = Vec::new();
    for name in [
        "dim",
        "reduce",
        "include_self",
        "value",
        "alpha",
        "accumulate",
        "k",
        "largest",
        "sorted",
        "descending",
        "stable",
        "repeats",
        "output_size",
    ] {
        let text = match case.args.get(name) {
            None => continue,
            Some(Arg::None) => "none".to_string(),
            Some(Arg::Bool(b)) => b.to_string(),
            Some(Arg::Int(i)) => i.to_string(),
            Some(Arg::Float(x)) => format!("{x:?}"),
            Some(Arg::Str(s)) => s.clone(),
        };
        flags.push(format!("--{}={text}", name.replace('_', "-")));
    }
    flags
}

fn is_data(name: &str) -> bool {
    matches!(name, "input" | "src" | "source")
}

/// Runs the case through the binary with its tensors in `form` ("npy" or "safetensors") and
/// compares the files written with the expected outputs.
fn run_case(dir: &Path, case: &Case, form: &str, work: &Path) -> Result<(), String> {
    let mut cmd = Command::cargo_bin("gather").unwrap();
    cmd.arg("run").arg(&case.op).arg("--no-progress");
    let bf16 = case.file_dtypes.values().any(|d| *d == DType::BF16);
    if bf16 && form == "npy" {
        cmd.arg("--bf16-npy");
    }
    let mut named = Vec::new();
    for (name, file) in &case.inputs {
        let t = load_npy(&dir.join(file), case.dtype_of(file)?)?;
        if form == "npy" {
            cmd.arg(format!("--{name}")).arg(dir.join(file));
        } else {
            cmd.arg(format!("--{name}"))
                .arg(format!("{}:{name}", work.join("in.safetensors").display()));
            named.push((name.clone(), t));
        }
    }
    if form == "safetensors" {
        std::fs::write(
            work.join("in.safetensors"),
            safetensors_bytes(&named).map_err(|e| e.message)?,
        )
        .unwrap();
    }
    cmd.args(arg_flags(case));
    let expected = case.expected.as_ref().ok_or("no expected outputs")?;
    let mut outs = Vec::new();
    for (i, (name, _)) in expected.iter().enumerate() {
        let path = match form {
            "npy" => work.join(format!("out{i}.npy")).display().to_string(),
            _ => format!(
                "{}:{name}",
                work.join(format!("out{i}.safetensors")).display()
            ),
        };
        outs.push((name.clone(), path));
    }
    // outputs in the op's order: values before indices
    outs.sort_by_key(|(n, _)| if n == "indices" { 1 } else { 0 });
    for (_, p) in &outs {
        cmd.arg("-o").arg(p);
    }
    let o = cmd.output().unwrap();
    if !o.status.success() {
        return Err(format!(
            "exit {:?}: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    for (name, path) in &outs {
        let file = &expected.iter().find(|(n, _)| n == name).unwrap().1;
        let want = load_npy(&dir.join(file), case.dtype_of(file)?)?;
        let got: Tensor = load(
            path,
            if is_data(name) || name == "values" || name == "output" {
                Role::Data
            } else {
                Role::Index
            },
            &LoadOptions {
                bf16_npy: want.dtype() == DType::BF16,
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())?;
        let (rtol, atol) = case.tolerance;
        if rtol == 0.0 && atol == 0.0 {
            check_exact(&got, &want)
        } else {
            check_tolerance(&got, &want, rtol, atol)
        }
        .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

#[test]
fn every_op_and_dtype_runs_on_npy_and_safetensors_files() {
    let cases = sample_cases();
    let ops: BTreeSet<&str> = cases.iter().map(|(_, c)| c.op.as_str()).collect();
    // Every op of the library is covered (the library fails none of the suite's cases today),
    // except those PyTorch does not have (tested in tests/beyond.rs).
    for (must, _) in gather::dynamic::OPS
        .iter()
        .filter(|(n, _)| !BEYOND_PYTORCH.contains(n))
    {
        assert!(ops.contains(must), "no case of {must}");
    }
    let mut failures = Vec::new();
    let mut dtypes: BTreeSet<String> = BTreeSet::new();
    for (name, case) in &cases {
        for form in ["npy", "safetensors"] {
            let work = tempfile::tempdir().unwrap();
            if let Err(e) = run_case(&suite_dir().join(name), case, form, work.path()) {
                failures.push(format!("{name} ({form}): {e}"));
            }
        }
        dtypes.insert(format!("{}", case.file_dtypes.values().next().unwrap()));
    }
    let missing: Vec<&str> = gather::dynamic::OPS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !ops.contains(n) && !BEYOND_PYTORCH.contains(n))
        .collect();
    println!(
        "{} cases of {} ops run on .npy and .safetensors; ops the library does not pass yet: {}",
        cases.len(),
        ops.len(),
        if missing.is_empty() {
            "none".to_string()
        } else {
            missing.join(", ")
        }
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(cases.len() >= 150, "only {} cases", cases.len());
}

#[test]
fn every_dtype_survives_a_round_trip_through_run() {
    // gather with an identity index on a tensor of each of the 13 dtypes, via both formats.
    for dtype in DType::ALL {
        let work = tempfile::tempdir().unwrap();
        let input =
            gather_cli::tensor_io::parse_inline("[[1, 0], [0, 1]]", Role::Data, Some(dtype))
                .unwrap();
        let npy = work.path().join("x.npy");
        std::fs::write(&npy, gather_cli::tensor_io::npy_bytes(&input)).unwrap();
        let st = work.path().join("x.safetensors");
        std::fs::write(
            &st,
            safetensors_bytes(&[("x".into(), input.clone())]).unwrap(),
        )
        .unwrap();
        for (src, out) in [
            (
                npy.display().to_string(),
                work.path().join("o.npy").display().to_string(),
            ),
            (
                format!("{}:x", st.display()),
                format!("{}:y", work.path().join("o.safetensors").display()),
            ),
        ] {
            let mut cmd = Command::cargo_bin("gather").unwrap();
            cmd.args([
                "run",
                "gather",
                "--input",
                &src,
                "--index",
                "[[1, 0], [0, 1]]",
                "--dim",
                "1",
                "-o",
                &out,
            ]);
            if dtype == DType::BF16 {
                cmd.arg("--bf16-npy");
            }
            cmd.assert().success();
            let got = load(
                &out,
                Role::Data,
                &LoadOptions {
                    bf16_npy: dtype == DType::BF16,
                    ..Default::default()
                },
            )
            .unwrap();
            let want =
                gather_cli::tensor_io::parse_inline("[[0, 1], [0, 1]]", Role::Data, Some(dtype))
                    .unwrap();
            assert_eq!(got, want, "{dtype} via {src}");
        }
    }
}

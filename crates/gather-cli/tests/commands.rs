//! The `explain`, `check`, `infer` and `run` subcommands, end to end through the binary: their
//! exact output on the tutorials' examples, and clear errors (exit code 2, no panic) for
//! malformed files, wrong dtypes, missing arguments and out-of-range indices.

use std::path::Path;

use assert_cmd::Command;
use gather::DType;
use gather_cli::tensor_io::{LoadOptions, Role, load, npy_bytes, parse_inline, safetensors_bytes};

fn gather() -> Command {
    let mut c = Command::cargo_bin("gather").unwrap();
    c.arg("--no-progress");
    c
}

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Out {
    let o = gather().args(args).output().unwrap();
    Out {
        code: o.status.code(),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

/// Exit code 2, a message starting with `error: ` that contains `needle`, and no panic.
fn assert_input_error(args: &[&str], needle: &str) {
    let o = run(args);
    assert_eq!(o.code, Some(2), "{args:?}: {}", o.stderr);
    assert!(o.stderr.starts_with("error: "), "{args:?}: {}", o.stderr);
    assert!(
        o.stderr.contains(needle),
        "{args:?}: expected `{needle}` in: {}",
        o.stderr
    );
    assert!(
        !o.stderr.contains("panicked") && !o.stderr.contains("internal error"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("RUST_BACKTRACE"), "{}", o.stderr);
    assert!(o.stdout.is_empty(), "{args:?}: {}", o.stdout);
}

fn write_npy(dir: &Path, name: &str, literal: &str, role: Role, dtype: Option<DType>) -> String {
    let t = parse_inline(literal, role, dtype).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, npy_bytes(&t)).unwrap();
    path.display().to_string()
}

// ---------------------------------------------------------------------------------------------
// explain

#[test]
fn explain_prints_the_tutorial_mapping_lines_of_the_seed_example() {
    let o = run(&[
        "explain",
        "gather",
        "--input",
        "[[10,20,30],[40,50,60]]",
        "--index",
        "[[0,2],[1,0]]",
        "--dim",
        "1",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "\
gather(input, dim=1, index): out[i][j] = input[i][index[i][j]]
input [2, 3] int64 = [[10, 20, 30], [40, 50, 60]]
index [2, 2] int64 = [[0, 2], [1, 0]]
out[0][0] = input[0][index[0][0]] = input[0][0] = 10
out[0][1] = input[0][index[0][1]] = input[0][2] = 30
out[1][0] = input[1][index[1][0]] = input[1][1] = 50
out[1][1] = input[1][index[1][1]] = input[1][0] = 40
out [2, 2] int64 = [[10, 30], [50, 40]]
"
    );
}

#[test]
fn explain_of_a_negative_dim_and_of_files_gives_the_same_lines() {
    let dir = tempfile::tempdir().unwrap();
    let x = write_npy(
        dir.path(),
        "x.npy",
        "[[10,20,30],[40,50,60]]",
        Role::Data,
        Some(DType::F32),
    );
    let st = dir.path().join("i.safetensors");
    let index = parse_inline("[[0,2],[1,0]]", Role::Index, Some(DType::I32)).unwrap();
    std::fs::write(&st, safetensors_bytes(&[("labels".into(), index)]).unwrap()).unwrap();
    let o = run(&[
        "explain",
        "gather",
        "--input",
        &x,
        "--index",
        &format!("{}:labels", st.display()),
        "--dim",
        "-1",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout
            .contains("out[0][1] = input[0][index[0][1]] = input[0][2] = 30\n"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("index [2, 2] int32 = [[0, 2], [1, 0]]\n"),
        "{}",
        o.stdout
    );
}

#[test]
fn explain_of_scatter_ops_shows_where_sources_land_and_how_duplicates_reduce() {
    let o = run(&[
        "explain",
        "scatter_add",
        "--input",
        "[[0,0,0],[0,0,0]]",
        "--index",
        "[[0,2],[2,2]]",
        "--src",
        "[[1,2],[3,4]]",
        "--dim",
        "1",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    for line in [
        "src[1][0] = 3 → out[1][index[1][0]] = out[1][2]",
        "src[1][1] = 4 → out[1][index[1][1]] = out[1][2]",
        "out[1][2] = input[1][2] + src[1][0] + src[1][1] = 0 + 3 + 4 = 7",
        "out[0][1] = input[0][1] = 0",
    ] {
        assert!(
            o.stdout.lines().any(|l| l == line),
            "missing `{line}` in:\n{}",
            o.stdout
        );
    }
    let o = run(&[
        "explain",
        "scatter_reduce",
        "--input",
        "[5,5,5]",
        "--index",
        "[0,0,2]",
        "--src",
        "[1,9,3]",
        "--dim",
        "0",
        "--reduce",
        "amax",
        "--include-self",
        "false",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.contains("out[0] = max(src[0], src[1]) = max(1, 9) = 9  (include_self=false: input[0] = 5 is left out)"),
        "{}",
        o.stdout
    );
    let o = run(&[
        "explain", "scatter", "--input", "[0,0,0]", "--index", "[2,0,2]", "--src", "[7,8,9]",
        "--dim", "0",
    ]);
    assert!(
        o.stdout.contains("out[2] = src[2] = 9  (2 writes: src[0] = 7, src[2] = 9; the last in index order is kept)"),
        "{}",
        o.stdout
    );
    let o = run(&[
        "explain",
        "scatter",
        "--input",
        "[[1,2],[3,4]]",
        "--index",
        "[[1],[0]]",
        "--value",
        "-1",
        "--dim",
        "1",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout
            .contains("value -1 → out[0][index[0][0]] = out[0][1]"),
        "{}",
        o.stdout
    );
}

#[test]
fn explain_summarises_large_tensors_instead_of_flooding() {
    let row: Vec<String> = (0..300).map(|v| v.to_string()).collect();
    let input = format!("[{}]", row.join(","));
    let idx: Vec<String> = (0..300).rev().map(|v| v.to_string()).collect();
    let index = format!("[{}]", idx.join(","));
    let o = run(&[
        "explain", "gather", "--input", &input, "--index", &index, "--dim", "0",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.lines().count() < 80,
        "{} lines",
        o.stdout.lines().count()
    );
    assert!(
        o.stdout
            .contains("... 252 more lines (--all prints every line)"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("input [300] int64 = [0, 1, 2, ..., 297, 298, 299]"),
        "{}",
        o.stdout
    );
    let all = run(&[
        "explain", "gather", "--input", &input, "--index", &index, "--dim", "0", "--all",
    ]);
    assert!(
        all.stdout
            .contains("out[299] = input[index[299]] = input[0] = 0\n"),
        "{}",
        all.stdout
    );
}

#[test]
fn explain_errors_carry_the_librarys_hint() {
    assert_input_error(
        &[
            "explain",
            "gather",
            "--input",
            "[[10,20,30],[40,50,60]]",
            "--index",
            "[[0,3]]",
            "--dim",
            "1",
        ],
        "index 3 is out of bounds for dimension 1 with size 3",
    );
    let o = run(&[
        "explain",
        "gather",
        "--input",
        "[[1,2,3]]",
        "--index",
        "[0]",
        "--dim",
        "1",
    ]);
    assert!(o.stderr.contains("\nhint: "), "{}", o.stderr);
    assert_input_error(
        &[
            "explain",
            "gather",
            "--input",
            "[[1,2],[3]]",
            "--index",
            "[[0]]",
            "--dim",
            "0",
        ],
        "ragged",
    );
}

// ---------------------------------------------------------------------------------------------
// check

#[test]
fn check_proposes_the_exact_fix_for_the_roi_labels() {
    let o = run(&[
        "check",
        "gather",
        "--input-shape",
        "128,21,4",
        "--index-shape",
        "128",
        "--dim",
        "1",
    ]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    for want in [
        "gather(input [128, 21, 4], dim=1, index [128]): invalid (float32 data, int64 index)",
        "fix 1: give the index the shape [128, 1, 4]: one of the 21 entries along dim 1 for each position of the index, repeated over axis 2 by broadcasting (no copy)",
        "    let index = index.view().insert_axis(Axis(1)).insert_axis(Axis(2)).broadcast((128, 1, 4)).unwrap();  // [128, 1, 4], no copy",
        "    let out = input.gather(1, &index)?;  // [128, 1, 4]",
        "    let out = out.index_axis_move(Axis(1), 0);  // [128, 4], PyTorch's .squeeze(1)",
        "  PyTorch: input.gather(1, index.unsqueeze(1).unsqueeze(2).expand(128, 1, 4)).squeeze(1)",
        "  check:   gather check gather --input-shape 128,21,4 --index-shape 128,1,4 --dim 1  → valid, output [128, 1, 4]",
        "fix 2: a batched select takes the index [128] as it is and returns [128, 4] directly, without the size-1 axis",
        "    let out = gather::select_batched(&input, 1, &index, 1)?;  // [128, 4]",
        "  TensorFlow: tf.gather(input, index, axis=1, batch_dims=1)",
    ] {
        assert!(lines.contains(&want), "missing `{want}` in:\n{}", o.stdout);
    }
    assert!(
        o.stdout
            .contains("error: gather: Index tensor must have the same number of dimensions"),
        "{}",
        o.stdout
    );

    // The proposed call is valid, with the shape announced.
    let o = run(&[
        "check",
        "gather",
        "--input-shape",
        "128,21,4",
        "--index-shape",
        "128,1,4",
        "--dim",
        "1",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout
            .starts_with("gather(input [128, 21, 4], dim=1, index [128, 1, 4]): valid"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("\noutput: [128, 1, 4]\n"), "{}", o.stdout);
    assert!(
        o.stdout.contains(
            "rule: gather(input, dim=1, index): out[i][j][k] = input[i][index[i][j][k]][k]"
        ),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains(
            "dim=2 (= -1) is valid: output [128, 1, 4], out[i][j][k] = input[i][j][index[i][j][k]]"
        ),
        "{}",
        o.stdout
    );
}

#[test]
fn check_proposes_the_topk_broadcast_and_other_dims() {
    let o = run(&[
        "check",
        "gather",
        "--input-shape",
        "2,5,3",
        "--index-shape",
        "2,2",
        "--dim",
        "1",
    ]);
    assert_eq!(o.code, Some(1));
    assert!(
        o.stdout.contains("    let index = index.view().insert_axis(Axis(2)).broadcast((2, 2, 3)).unwrap();  // [2, 2, 3], no copy"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("  PyTorch: input.gather(1, index.unsqueeze(2).expand(2, 2, 3))"),
        "{}",
        o.stdout
    );
    // An index too wide for dim 0 fits along dim 1.
    let o = run(&[
        "check",
        "gather",
        "--input-shape",
        "4,3",
        "--index-shape",
        "2,5",
        "--dim",
        "0",
    ]);
    assert_eq!(o.code, Some(1));
    assert!(
        o.stdout
            .contains("fix 1: dim=1 (= -1) is valid: output [2, 5]"),
        "{}",
        o.stdout
    );
    // scatter: the same fix, with src checked too
    let o = run(&[
        "check",
        "scatter_add",
        "--input-shape",
        "4,3",
        "--index-shape",
        "2,3",
        "--src-shape",
        "2,3",
        "--dim",
        "0",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stdout);
}

#[test]
fn check_handles_a_large_input_with_a_small_index() {
    // token log-probs: logits [64, 4096, 50000] (13e9 elements), labels [64, 4096]
    let o = run(&[
        "check",
        "gather",
        "--input-shape",
        "64,4096,50000",
        "--index-shape",
        "64,4096",
        "--dim",
        "-1",
    ]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stdout
            .contains("    let index = index.view().insert_axis(Axis(2));  // [64, 4096, 1]"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("  PyTorch: input.gather(-1, index.unsqueeze(2)).squeeze(2)"),
        "{}",
        o.stdout
    );
    let o = run(&[
        "check",
        "gather",
        "--input-shape",
        "64,4096,50000",
        "--index-shape",
        "64,4096,1",
        "--dim",
        "-1",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.contains("\noutput: [64, 4096, 1]\n"),
        "{}",
        o.stdout
    );
    // other ops copy their input: too large for the dry run, said plainly
    assert_input_error(
        &[
            "check",
            "scatter_add",
            "--input-shape",
            "64,4096,50000",
            "--index-shape",
            "64,4096,1",
            "--src-shape",
            "64,4096,1",
            "--dim",
            "-1",
        ],
        "too many for check's dry run",
    );
}

#[test]
fn check_rejects_bad_shapes_and_options_with_exit_2() {
    assert_input_error(
        &[
            "check",
            "gather",
            "--input-shape",
            "2,x",
            "--index-shape",
            "2",
            "--dim",
            "0",
        ],
        "bad shape",
    );
    assert_input_error(
        &[
            "check",
            "gather",
            "--input-shape",
            "2,3",
            "--index-shape",
            "2,3",
        ],
        "gather needs --dim",
    );
    assert_input_error(
        &["check", "gather", "--index-shape", "2,3", "--dim", "0"],
        "gather needs --input",
    );
    assert_input_error(
        &[
            "check",
            "gather",
            "--input-shape",
            "2,3",
            "--index-shape",
            "2,3",
            "--dim",
            "0",
            "--dtype",
            "complex",
        ],
        "unknown dtype",
    );
}

// ---------------------------------------------------------------------------------------------
// infer

const ARANGE: &str =
    "[[[0,1,2,3],[4,5,6,7],[8,9,10,11]],[[12,13,14,15],[16,17,18,19],[20,21,22,23]]]";

#[test]
fn infer_finds_dim_1_and_the_index_of_the_arange_example() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_npy(dir.path(), "a.npy", ARANGE, Role::Data, None);
    let b = write_npy(
        dir.path(),
        "b.npy",
        "[[[0,1,2,3],[8,9,10,11]],[[12,13,14,15],[20,21,22,23]]]",
        Role::Data,
        None,
    );
    let saved = dir.path().join("index.npy").display().to_string();
    let o = run(&["infer", "--input", &a, "--output", &b, "-o", &saved]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(
        o.stdout,
        format!(
            "\
input [2, 3, 4] int64, output [2, 2, 4] int64
dim 0 (= -3): no: out[0][1][0] = 8 is not in input[:][1][0] = [4, 16]
dim 1 (= -2): yes (unique): gather(input, 1, index) == output with
  index [2, 2, 4] int64 = [[[0, 0, 0, 0], [2, 2, 2, 2]], [[0, 0, 0, 0], [2, 2, 2, 2]]]
dim 2 (= -1): no: out[0][1][0] = 8 is not in input[0][1][:] = [4, 5, 6, 7]
answer: dim 1
saved the index of dim 1 to {saved}
"
        )
    );
    let index = load(&saved, Role::Index, &LoadOptions::default()).unwrap();
    let want = parse_inline(
        "[[[0,0,0,0],[2,2,2,2]],[[0,0,0,0],[2,2,2,2]]]",
        Role::Index,
        None,
    )
    .unwrap();
    assert_eq!(index, want);
    // and the saved index reproduces the output
    let out = dir.path().join("check.npy").display().to_string();
    gather()
        .args([
            "run", "gather", "--input", &a, "--index", &saved, "--dim", "1", "-o", &out,
        ])
        .assert()
        .success();
    assert_eq!(
        load(&out, Role::Data, &LoadOptions::default()).unwrap(),
        load(&b, Role::Data, &LoadOptions::default()).unwrap()
    );
}

#[test]
fn infer_says_when_the_answer_is_ambiguous_or_impossible() {
    let o = run(&[
        "infer",
        "--input",
        "[[1.0, 1.0, 2.0]]",
        "--output",
        "[[1.0, 2.0]]",
    ]);
    assert_eq!(o.code, Some(0));
    assert!(
        o.stdout.contains("dim 1 (= -1): yes (not unique)"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains(
            "because of repeated values (e.g. out[0][0] = 1 is input[0][0] and input[0][1])"
        ),
        "{}",
        o.stdout
    );

    let o = run(&[
        "infer",
        "--input",
        "[[1, 2], [2, 1]]",
        "--output",
        "[[1, 1]]",
    ]);
    assert!(o.stdout.contains("dim 0 (= -2): yes"), "{}", o.stdout);
    assert!(o.stdout.contains("dim 1 (= -1): yes"), "{}", o.stdout);
    assert!(
        o.stdout.contains("ambiguous: dims 0, 1 all work"),
        "{}",
        o.stdout
    );

    let o = run(&["infer", "--input", "[[1, 2], [3, 4]]", "--output", "[[7]]"]);
    assert_eq!(o.code, Some(1));
    assert!(o.stdout.ends_with("no dim works\n"), "{}", o.stdout);

    let o = run(&[
        "infer",
        "--input",
        "[[1, 2], [3, 4]]",
        "--output",
        "[[1.0]]",
    ]);
    assert_eq!(o.code, Some(1));
    assert_eq!(
        o.stdout.lines().last(),
        Some("no dim works: the input is int64 but the output is float32; gather keeps the dtype")
    );
}

// ---------------------------------------------------------------------------------------------
// run: errors, atomic writes

#[test]
fn run_rejects_malformed_files_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let index = write_npy(d, "i.npy", "[[0]]", Role::Index, None);
    let out = d.join("o.npy").display().to_string();
    let garbage = d.join("garbage.npy");
    std::fs::write(&garbage, b"definitely not numpy").unwrap();
    let good = std::fs::read(write_npy(d, "x.npy", "[[1.5, 2.5]]", Role::Data, None)).unwrap();
    let truncated = d.join("truncated.npy");
    std::fs::write(&truncated, &good[..good.len() - 3]).unwrap();
    let header_only = d.join("header.npy");
    std::fs::write(&header_only, &good[..40]).unwrap();
    let bad_st = d.join("bad.safetensors");
    std::fs::write(&bad_st, b"\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":1}").unwrap();
    let complex = d.join("complex.npy");
    let mut c = good.clone();
    let pos = c.windows(3).position(|w| w == b"<f4").unwrap();
    c[pos..pos + 3].copy_from_slice(b"<c8");
    std::fs::write(&complex, &c).unwrap();
    for (file, needle) in [
        (garbage.display().to_string(), "not a .npy file"),
        (
            truncated.display().to_string(),
            "the file is truncated: shape [1, 2] of float32 needs 8 bytes of data, found 5",
        ),
        (
            header_only.display().to_string(),
            "the .npy header is truncated",
        ),
        (
            bad_st.display().to_string(),
            "not a valid .safetensors file",
        ),
        (complex.display().to_string(), "unsupported dtype `<c8`"),
        (d.join("missing.npy").display().to_string(), "cannot read"),
        (
            "data.csv".to_string(),
            "is neither a .npy or .safetensors file",
        ),
    ] {
        assert_input_error(
            &[
                "run", "gather", "--input", &file, "--index", &index, "--dim", "0", "-o", &out,
            ],
            needle,
        );
    }
    assert!(!Path::new(&out).exists());
}

#[test]
fn run_rejects_wrong_dtypes_missing_arguments_and_out_of_range_indices() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let x = write_npy(
        d,
        "x.npy",
        "[[10, 20, 30], [40, 50, 60]]",
        Role::Data,
        Some(DType::F32),
    );
    let i = write_npy(d, "i.npy", "[[0, 2], [1, 0]]", Role::Index, None);
    let fi = write_npy(d, "fi.npy", "[[0.0, 2.0]]", Role::Data, None);
    let src = write_npy(d, "s.npy", "[[1, 2]]", Role::Data, Some(DType::I32));
    let out = d.join("o.npy").display().to_string();
    // wrong dtypes
    assert_input_error(
        &[
            "run", "gather", "--input", &x, "--index", &fi, "--dim", "1", "-o", &out,
        ],
        "gather: expected an integer dtype for index, but got float32",
    );
    assert_input_error(
        &[
            "run",
            "scatter_add",
            "--input",
            &x,
            "--index",
            &i,
            "--src",
            &src,
            "--dim",
            "1",
            "-o",
            &out,
        ],
        "expected self and src to have the same dtype, but got float32 and int32",
    );
    // missing arguments
    assert_input_error(
        &["run", "gather", "--input", &x, "--index", &i, "-o", &out],
        "gather needs --dim",
    );
    assert_input_error(
        &["run", "gather", "--input", &x, "--dim", "1", "-o", &out],
        "gather needs --index",
    );
    assert_input_error(
        &["run", "gather", "--input", &x, "--index", &i, "--dim", "1"],
        "give -o FILE",
    );
    assert_input_error(
        &[
            "run",
            "scatter_reduce",
            "--input",
            &x,
            "--index",
            &i,
            "--src",
            &x,
            "--dim",
            "1",
            "-o",
            &out,
        ],
        "scatter_reduce needs --reduce",
    );
    assert_input_error(
        &[
            "run", "scatter", "--input", &x, "--index", &i, "--dim", "1", "-o", &out,
        ],
        "scatter needs --src",
    );
    // clap's own usage errors exit with 2 too
    let o = run(&["run"]);
    assert_eq!(o.code, Some(2));
    assert!(
        o.stderr.contains("error:") && !o.stderr.contains("panicked"),
        "{}",
        o.stderr
    );
    // out of range: the value and its position
    let far = write_npy(d, "far.npy", "[[0, 2], [3, 0]]", Role::Index, None);
    assert_input_error(
        &[
            "run", "gather", "--input", &x, "--index", &far, "--dim", "1", "-o", &out,
        ],
        "gather: index 3 is out of bounds for dimension 1 with size 3 (at index position [1, 0])",
    );
    let neg = write_npy(d, "neg.npy", "[[0, -1]]", Role::Index, None);
    assert_input_error(
        &[
            "run", "gather", "--input", &x, "--index", &neg, "--dim", "1", "-o", &out,
        ],
        "out of bounds",
    );
    assert_input_error(
        &[
            "run", "gather", "--input", &x, "--index", &i, "--dim", "2", "-o", &out,
        ],
        "Dimension out of range",
    );
    // unknown op and options the op does not take
    assert_input_error(
        &["run", "gahter", "--input", &x, "-o", &out],
        "unknown op `gahter`",
    );
    assert_input_error(
        &[
            "run", "gather", "--input", &x, "--index", &i, "--dim", "1", "-k", "2", "-o", &out,
        ],
        "gather takes no --k",
    );
    assert_input_error(
        &[
            "run",
            "index_add",
            "--input",
            &x,
            "--index",
            "[0]",
            "--src",
            &x,
            "--dim",
            "0",
            "-o",
            &out,
        ],
        "index_add takes no --src tensor",
    );
    assert!(!Path::new(&out).exists(), "a failed run left a file");
}

#[test]
fn run_writes_atomically_and_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let x = write_npy(d, "x.npy", "[[10, 20, 30], [40, 50, 60]]", Role::Data, None);
    let out = d.join("out.npy");
    std::fs::write(&out, b"previous contents").unwrap();
    // A failing call leaves the existing file as it was, and no temporary file behind.
    assert_input_error(
        &[
            "run",
            "gather",
            "--input",
            &x,
            "--index",
            "[[5]]",
            "--dim",
            "1",
            "-o",
            out.to_str().unwrap(),
        ],
        "out of bounds",
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"previous contents");
    let names = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(), vec!["out.npy", "x.npy"]);
    // A folder that does not exist: an error before anything runs.
    assert_input_error(
        &[
            "run",
            "gather",
            "--input",
            &x,
            "--index",
            "[[0]]",
            "--dim",
            "1",
            "-o",
            d.join("no/such/o.npy").to_str().unwrap(),
        ],
        "does not exist",
    );
    // A success replaces it whole.
    let o = run(&[
        "run",
        "gather",
        "--input",
        &x,
        "--index",
        "[[2, 0]]",
        "--dim",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(
        o.stdout,
        format!("wrote {}: output [1, 2] int64\n", out.display())
    );
    assert_eq!(
        load(out.to_str().unwrap(), Role::Data, &LoadOptions::default()).unwrap(),
        parse_inline("[[30, 10]]", Role::Data, None).unwrap()
    );
    assert_eq!(names(), vec!["out.npy", "x.npy"]);
}

#[test]
fn run_writes_two_outputs_to_two_files_or_one_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_input_error(
        &[
            "run",
            "sort",
            "--input",
            "[[3, 1, 2]]",
            "-o",
            d.join("v.npy").to_str().unwrap(),
        ],
        "returns 2 tensors",
    );
    let st = d.join("both.safetensors");
    let o = run(&[
        "run",
        "sort",
        "--input",
        "[[3, 1, 2]]",
        "-o",
        st.to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let values = load(
        &format!("{}:values", st.display()),
        Role::Data,
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(
        values,
        parse_inline("[[1, 2, 3]]", Role::Data, None).unwrap()
    );
    let indices = load(
        &format!("{}:indices", st.display()),
        Role::Index,
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(
        indices,
        parse_inline("[[1, 2, 0]]", Role::Index, None).unwrap()
    );
    // two .npy files, values first
    let (v, i) = (d.join("v.npy"), d.join("i.npy"));
    let o = run(&[
        "run",
        "topk",
        "--input",
        "[[3, 1, 2]]",
        "-k",
        "2",
        "-o",
        v.to_str().unwrap(),
        "-o",
        i.to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(
        o.stdout,
        format!(
            "wrote {}: values [1, 2] int64\nwrote {}: indices [1, 2] int64\n",
            v.display(),
            i.display()
        )
    );
    let read = |p: &Path| load(p.to_str().unwrap(), Role::Index, &LoadOptions::default()).unwrap();
    assert_eq!(
        read(&v),
        parse_inline("[[3, 2]]", Role::Data, None).unwrap()
    );
    assert_eq!(
        read(&i),
        parse_inline("[[0, 2]]", Role::Index, None).unwrap()
    );
}

#[test]
fn every_new_subcommand_has_help_with_examples() {
    for sub in ["explain", "check", "infer", "run"] {
        let o = gather().args([sub, "--help"]).output().unwrap();
        assert!(o.status.success(), "{sub}");
        let text = String::from_utf8(o.stdout).unwrap();
        assert!(text.contains("Examples:"), "{sub}: {text}");
        assert!(text.contains(&format!("gather {sub} ")), "{sub}: {text}");
    }
}

//! The ops beyond PyTorch through the binary: `select_batched` in `gather run` and
//! `gather explain`, and the ONNX ops of the conformance format in `gather conformance`.

use assert_cmd::Command;
use gather::DType;
use gather_cli::tensor_io::{LoadOptions, Role, load, npy_bytes, parse_inline};

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

#[test]
fn run_select_batched_picks_each_rois_labelled_box() {
    let dir = tempfile::tempdir().unwrap();
    let x = parse_inline(
        "[[[0, 1], [10, 11], [20, 21]], [[100, 101], [110, 111], [120, 121]]]",
        Role::Data,
        Some(DType::F32),
    )
    .unwrap();
    let xp = dir.path().join("x.npy");
    std::fs::write(&xp, npy_bytes(&x)).unwrap();
    let out = dir.path().join("o.npy").display().to_string();
    let o = run(&[
        "run",
        "select_batched",
        "--input",
        &xp.display().to_string(),
        "--index",
        "[2, 0]",
        "--dim",
        "1",
        "--batch-dims",
        "1",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.contains("wrote"), "{}", o.stdout);
    let got = load(&out, Role::Data, &LoadOptions::default()).unwrap();
    let want = parse_inline("[[20, 21], [100, 101]]", Role::Data, Some(DType::F32)).unwrap();
    assert_eq!(got, want);
    // batch_dims defaults to 0: numpy's take along dim 1, index shape [2] kept.
    let o = run(&[
        "run",
        "select_batched",
        "--input",
        &xp.display().to_string(),
        "--index",
        "[2, 0]",
        "--dim",
        "1",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let got = load(&out, Role::Data, &LoadOptions::default()).unwrap();
    assert_eq!(got.shape(), &[2, 2, 2]);
}

#[test]
fn run_select_batched_errors_teach_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.npy").display().to_string();
    let o = run(&[
        "run",
        "select_batched",
        "--input",
        "[[1, 2, 3], [4, 5, 6]]",
        "--index",
        "[0, 3]",
        "--dim",
        "1",
        "--batch-dims",
        "1",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("select_batched: index 3 is out of bounds for dimension 1 with size 3"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("hint"), "{}", o.stderr);
    let o = run(&[
        "run",
        "select_batched",
        "--input",
        "[[1, 2, 3], [4, 5, 6]]",
        "--index",
        "[0, 1, 2]",
        "--dim",
        "1",
        "--batch-dims",
        "1",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("batch axis 0 has size 3"), "{}", o.stderr);
    let o = run(&[
        "run",
        "select_batched",
        "--input",
        "[[1, 2, 3]]",
        "--index",
        "[0]",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains("select_batched needs --dim"),
        "{}",
        o.stderr
    );
    assert!(!std::path::Path::new(&out).exists());
}

#[test]
fn explain_select_batched_prints_where_each_element_comes_from() {
    let o = run(&[
        "explain",
        "select_batched",
        "--input",
        "[[10, 20, 30], [40, 50, 60]]",
        "--index",
        "[[2, 0], [1, 1]]",
        "--dim",
        "1",
        "--batch-dims",
        "1",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "\
select_batched(input, dim=1, index, batch_dims=1): out[i][j] = input[i][index[i][j]]
input [2, 3] int64 = [[10, 20, 30], [40, 50, 60]]
index [2, 2] int64 = [[2, 0], [1, 1]]
out[0][0] = input[0][index[0][0]] = input[0][2] = 30
out[0][1] = input[0][index[0][1]] = input[0][0] = 10
out[1][0] = input[1][index[1][0]] = input[1][1] = 50
out[1][1] = input[1][index[1][1]] = input[1][1] = 50
out [2, 2] int64 = [[30, 10], [50, 50]]
"
    );
    // The ROI idiom: the selected axis disappears, the trailing axis is copied whole.
    let o = run(&[
        "explain",
        "select_batched",
        "--input",
        "[[[0, 1], [10, 11]], [[100, 101], [110, 111]]]",
        "--index",
        "[1, 0]",
        "--dim",
        "1",
        "--batch-dims",
        "1",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.starts_with(
            "select_batched(input, dim=1, index, batch_dims=1): out[i][j] = input[i][index[i]][j]\n"
        ),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("out[1][1] = input[1][index[1]][1] = input[1][0][1] = 101\n"),
        "{}",
        o.stdout
    );
}

fn onnx_fixtures() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/onnx")
}

#[test]
fn conformance_passes_every_onnx_case_of_the_spec_examples() {
    let dir = onnx_fixtures();
    let o = run(&["conformance", &dir.display().to_string()]);
    assert_eq!(o.code, Some(0), "{}\n{}", o.stdout, o.stderr);
    let n = std::fs::read_dir(&dir).unwrap().count();
    assert!(n >= 38, "only {n} fixture cases");
    assert!(
        o.stdout.contains(&format!("{n} passed, 0 failed")),
        "{}",
        o.stdout
    );
    // Every ONNX op has success and error cases there.
    for op in gather::dynamic::ONNX_OPS {
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("{op}__")))
            .collect();
        assert!(names.iter().any(|n| n.contains("negative")), "{op}");
        assert!(names.iter().any(|n| n.contains("out_of_range")), "{op}");
    }
}

#[test]
fn conformance_fails_an_onnx_case_whose_expected_output_is_wrong() {
    // The runner really compares: a copy of a case with a corrupted expectation fails.
    let work = tempfile::tempdir().unwrap();
    let src = onnx_fixtures().join("onnx_gather__negative_indices__0");
    let dst = work.path().join("onnx_gather__negative_indices__0");
    std::fs::create_dir(&dst).unwrap();
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), dst.join(f.file_name())).unwrap();
    }
    // Point `expected` at the data file (a different shape and values).
    let json = std::fs::read_to_string(dst.join("case.json")).unwrap();
    std::fs::write(
        dst.join("case.json"),
        json.replace("\"output\": \"expected.npy\"", "\"output\": \"data.npy\""),
    )
    .unwrap();
    let o = run(&["conformance", &work.path().display().to_string()]);
    assert!(o.stdout.contains("0 passed, 1 failed"), "{}", o.stdout);
}

#[test]
fn run_takes_a_bounds_policy_for_reads_and_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.npy").display().to_string();
    let go = |extra: &[&str]| {
        let mut args = vec!["run"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", &out]);
        run(&args)
    };
    let o = go(&[
        "gather",
        "--input",
        "[10, 20, 30]",
        "--index",
        "[-1, 1, 5]",
        "--dim",
        "0",
        "--bounds",
        "fill",
        "--fill-value",
        "0",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let got = load(&out, Role::Data, &LoadOptions::default()).unwrap();
    assert_eq!(got, parse_inline("[0, 20, 0]", Role::Data, None).unwrap());
    let o = go(&[
        "scatter_add",
        "--input",
        "[0, 0, 0]",
        "--index",
        "[-1, 1, 5]",
        "--src",
        "[1, 2, 4]",
        "--dim",
        "0",
        "--bounds",
        "drop",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let got = load(&out, Role::Data, &LoadOptions::default()).unwrap();
    assert_eq!(got, parse_inline("[0, 2, 0]", Role::Data, None).unwrap());
    // The policy that does not fit the op, and an unknown one, teach with exit 2.
    let o = go(&[
        "gather",
        "--input",
        "[10, 20, 30]",
        "--index",
        "[5]",
        "--dim",
        "0",
        "--bounds",
        "drop",
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains("Drop policy is for writes"),
        "{}",
        o.stderr
    );
    let o = go(&[
        "gather",
        "--input",
        "[10, 20, 30]",
        "--index",
        "[5]",
        "--dim",
        "0",
        "--bounds",
        "clamp",
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains("unknown bounds policy `clamp`"),
        "{}",
        o.stderr
    );
    let o = run(&[
        "explain",
        "gather",
        "--input",
        "[10, 20, 30]",
        "--index",
        "[5]",
        "--dim",
        "0",
        "--bounds",
        "clip",
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
}

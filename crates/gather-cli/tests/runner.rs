//! The conformance runner end to end, on small case folders written by the tests: which cases pass,
//! which fail and with what reason, and how the report is ordered and summed up.

use std::path::{Path, PathBuf};

use gather::dynamic::Tensor;
use gather_cli::conformance::{GradCheck, Options, run_case, run_suite};
use gather_cli::npy::save_npy;
use half::bf16;
use ndarray::{ArrayD, arr1, arr2};

fn t<T>(a: ndarray::Array<T, impl ndarray::Dimension>) -> Tensor
where
    Tensor: From<ArrayD<T>>,
{
    Tensor::from(a.into_dyn())
}

/// A fresh, empty folder for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gather_cli_runner_{}_{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a case folder: `files` are saved as `<name>.npy` and listed in `file_dtypes`.
fn write_case(root: &Path, name: &str, json_fields: &str, files: &[(&str, Tensor)]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut dtypes = Vec::new();
    for (file, tensor) in files {
        save_npy(&dir.join(format!("{file}.npy")), tensor).unwrap();
        dtypes.push(format!("\"{file}.npy\": \"{}\"", tensor.dtype()));
    }
    let json = format!(
        "{{ {json_fields}, \"file_dtypes\": {{ {} }} }}",
        dtypes.join(", ")
    );
    std::fs::write(dir.join("case.json"), json).unwrap();
    dir
}

const GATHER_OK: &str = r#""op": "gather", "args": {"dim": 1, "sparse_grad": false},
    "inputs": {"input": "input.npy", "index": "index.npy"},
    "expected": {"output": "expected.npy"}, "error": null, "torch_error": null, "grad": null,
    "tolerance": {"rtol": 0.0, "atol": 0.0}, "any_of_duplicates": false, "unordered": false,
    "ties_any_index": false, "notes": "seed""#;

fn seed_files(expected: Tensor) -> Vec<(&'static str, Tensor)> {
    vec![
        ("input", t(arr2(&[[10i64, 20, 30], [40, 50, 60]]))),
        ("index", t(arr2(&[[0i64, 2], [1, 0]]))),
        ("expected", expected),
    ]
}

#[test]
fn a_correct_exact_case_passes_and_a_wrong_value_fails_with_its_position() {
    let root = scratch("exact");
    let ok = write_case(
        &root,
        "gather__ok__0",
        GATHER_OK,
        &seed_files(t(arr2(&[[10i64, 30], [50, 40]]))),
    );
    assert_eq!(run_case(&ok).outcome, Ok(()));
    let bad = write_case(
        &root,
        "gather__bad__0",
        GATHER_OK,
        &seed_files(t(arr2(&[[10i64, 30], [50, 41]]))),
    );
    let e = run_case(&bad).outcome.unwrap_err();
    assert_eq!(
        e,
        "output: at [1, 1]: got 40, expected 41 (1 of 4 elements differ)"
    );
}

#[test]
fn a_wrong_expected_dtype_fails_under_r1() {
    let root = scratch("dtype");
    let dir = write_case(
        &root,
        "c",
        GATHER_OK,
        &seed_files(t(arr2(&[[10i32, 30], [50, 40]]))),
    );
    assert!(
        run_case(&dir)
            .outcome
            .unwrap_err()
            .contains("dtype int64 but expected int32")
    );
}

#[test]
fn bfloat16_files_are_read_as_bit_patterns() {
    let root = scratch("bf16");
    let x = arr2(&[[1.5f32, -2.0, 3.25], [0.5, 7.0, -0.0]]).mapv(bf16::from_f32);
    let want = arr2(&[[1.5f32, 3.25], [7.0, 0.5]]).mapv(bf16::from_f32);
    let files = vec![
        ("input", t(x)),
        ("index", t(arr2(&[[0i64, 2], [1, 0]]))),
        ("expected", t(want)),
    ];
    let dir = write_case(&root, "c", GATHER_OK, &files);
    assert_eq!(run_case(&dir).outcome, Ok(()));
    // The file on disk is `<u2`, as the suite stores bfloat16.
    let bytes = std::fs::read(dir.join("input.npy")).unwrap();
    assert!(String::from_utf8_lossy(&bytes[..64]).contains("'<u2'"));
}

fn error_case(category: &str) -> String {
    format!(
        r#""op": "gather", "args": {{"dim": 1, "sparse_grad": false}},
        "inputs": {{"input": "input.npy", "index": "index.npy"}}, "expected": null,
        "error": "{category}", "torch_error": "Index tensor must have the same number of dimensions",
        "grad": null, "tolerance": {{"rtol": 0.0, "atol": 0.0}}, "any_of_duplicates": false,
        "unordered": false, "ties_any_index": false, "notes": """#
    )
}

#[test]
fn an_error_case_needs_a_failure_of_that_category() {
    let root = scratch("error");
    let files = vec![
        ("input", t(arr2(&[[1.0f32, 2.0]]))),
        ("index", t(arr1(&[0i64]))),
    ];
    let good = write_case(&root, "good", &error_case("rank_mismatch"), &files);
    assert_eq!(run_case(&good).outcome, Ok(()));
    let wrong = write_case(&root, "wrong", &error_case("shape_mismatch"), &files);
    let e = run_case(&wrong).outcome.unwrap_err();
    assert!(
        e.starts_with("expected error shape_mismatch, got rank_mismatch: gather:"),
        "{e}"
    );
    // A call that succeeds fails the case.
    let files = vec![
        ("input", t(arr2(&[[1.0f32, 2.0]]))),
        ("index", t(arr2(&[[0i64]]))),
    ];
    let ok = write_case(&root, "succeeds", &error_case("rank_mismatch"), &files);
    assert!(
        run_case(&ok)
            .outcome
            .unwrap_err()
            .contains("but the op succeeded")
    );
}

#[test]
fn an_error_case_of_an_op_with_an_in_place_form_also_runs_the_in_place_form() {
    // scatter with an out-of-bounds index at the end: the in-place form must fail before writing.
    let root = scratch("inplace");
    let json = r#""op": "scatter", "args": {"dim": 0}, "expected": null,
        "inputs": {"input": "input.npy", "index": "index.npy", "src": "src.npy"},
        "error": "index_out_of_bounds", "torch_error": null, "grad": null,
        "tolerance": {"rtol": 0.0, "atol": 0.0}, "any_of_duplicates": false, "unordered": false,
        "ties_any_index": false, "notes": """#;
    let files = vec![
        ("input", t(arr1(&[1.0f64, 2.0, 3.0]))),
        ("index", t(arr1(&[0i64, 1, 5]))),
        ("src", t(arr1(&[7.0f64, 8.0, 9.0]))),
    ];
    let dir = write_case(&root, "c", json, &files);
    assert_eq!(run_case(&dir).outcome, Ok(()));
}

#[test]
fn r4a_a_divergent_index_dtype_may_be_accepted_with_the_right_output() {
    let root = scratch("r4a");
    let json = |_: ()| {
        error_case("invalid_argument")
            + r#", "index_dtype_divergence": {"output": "expected_if_accepted.npy"}"#
    };
    let files = |last: i64| {
        vec![
            ("input", t(arr2(&[[10i64, 20, 30], [40, 50, 60]]))),
            ("index", t(arr2(&[[0i16, 2], [1, 0]]))),
            ("expected_if_accepted", t(arr2(&[[10i64, 30], [50, last]]))),
        ]
    };
    let good = write_case(&root, "good", &json(()), &files(40));
    assert_eq!(run_case(&good).outcome, Ok(()));
    let bad = write_case(&root, "bad", &json(()), &files(41));
    let e = run_case(&bad).outcome.unwrap_err();
    assert!(
        e.starts_with("accepted the index dtype (R4a), but output: at [1, 1]"),
        "{e}"
    );
}

#[test]
fn tolerance_cases_use_r3() {
    let root = scratch("r3");
    let json = r#""op": "scatter_add", "args": {"dim": 0},
        "inputs": {"input": "input.npy", "index": "index.npy", "src": "src.npy"},
        "expected": {"output": "expected.npy"}, "error": null, "torch_error": null, "grad": null,
        "tolerance": {"rtol": 1e-6, "atol": 1e-6}, "any_of_duplicates": false, "unordered": false,
        "ties_any_index": false, "notes": """#;
    let files = |e: f32| {
        vec![
            ("input", t(arr1(&[1.0f32, 2.0]))),
            ("index", t(arr1(&[1i64, 1]))),
            ("src", t(arr1(&[0.5f32, 0.25]))),
            ("expected", t(arr1(&[1.0f32, e]))),
        ]
    };
    assert_eq!(
        run_case(&write_case(&root, "near", json, &files(2.750_001))).outcome,
        Ok(())
    );
    let e = run_case(&write_case(&root, "far", json, &files(2.76)))
        .outcome
        .unwrap_err();
    assert!(e.contains("beyond rtol"), "{e}");
}

#[test]
fn unknown_ops_and_broken_cases_fail_with_a_reason() {
    let root = scratch("broken");
    // (The onnx_* ops of the suite's README are known: see tests/beyond.rs.)
    let onnx = GATHER_OK.replace("\"op\": \"gather\"", "\"op\": \"onnx_frobnicate\"");
    let dir = write_case(
        &root,
        "onnx",
        &onnx,
        &seed_files(t(arr2(&[[10i64, 30], [50, 40]]))),
    );
    assert!(
        run_case(&dir)
            .outcome
            .unwrap_err()
            .contains("unknown op `onnx_frobnicate`")
    );

    let dir = root.join("badjson");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("case.json"), "{not json").unwrap();
    assert!(
        run_case(&dir)
            .outcome
            .unwrap_err()
            .starts_with("bad case.json: invalid JSON")
    );

    let dir = write_case(
        &root,
        "missing",
        GATHER_OK,
        &seed_files(t(arr2(&[[10i64, 30], [50, 40]]))),
    );
    std::fs::remove_file(dir.join("index.npy")).unwrap();
    assert!(run_case(&dir).outcome.unwrap_err().contains("cannot read"));
}

fn gather_grad_case(root: &Path, name: &str, expected_grad: Tensor) -> PathBuf {
    let json = GATHER_OK.replace(
        "\"grad\": null",
        r#""grad": {"grad_output": "grad_output.npy", "expected_grad_input": "expected_grad_input.npy",
            "tolerance": {"rtol": 1e-10, "atol": 1e-10}}"#,
    );
    let files = vec![
        (
            "input",
            t(arr2(&[[10.0f64, 20.0, 30.0], [40.0, 50.0, 60.0]])),
        ),
        ("index", t(arr2(&[[0i64, 0], [1, 0]]))),
        ("expected", t(arr2(&[[10.0f64, 10.0], [50.0, 40.0]]))),
        ("grad_output", t(arr2(&[[1.0f64, 2.0], [3.0, 4.0]]))),
        ("expected_grad_input", expected_grad),
    ];
    write_case(root, name, &json, &files)
}

#[test]
fn gradient_checks_run_and_compare_under_the_grad_tolerance() {
    let root = scratch("grad");
    // gather's gradient: duplicates add up (1 + 2 at [0][0]), unread elements get 0.
    let dir = gather_grad_case(
        &root,
        "g_ok",
        t(arr2(&[[3.0f64, 0.0, 0.0], [4.0, 3.0, 0.0]])),
    );
    let r = run_case(&dir);
    assert_eq!(r.outcome, Ok(()));
    assert_eq!(r.grad, GradCheck::Passed);
    // Within 1e-10 relative: passes; beyond: fails with the position.
    let dir = gather_grad_case(
        &root,
        "g_close",
        t(arr2(&[[3.0f64 * (1.0 + 1e-12), 0.0, 0.0], [4.0, 3.0, 0.0]])),
    );
    assert_eq!(run_case(&dir).outcome, Ok(()));
    let dir = gather_grad_case(
        &root,
        "g_wrong",
        t(arr2(&[[3.0f64, 0.0, 0.0], [4.0, 3.5, 0.0]])),
    );
    let e = run_case(&dir).outcome.unwrap_err();
    assert!(e.starts_with("grad_input: at [1, 1]: got 3"), "{e}");
    let report = run_suite(&root, &Options::default()).unwrap();
    let mut out = Vec::new();
    report.print(&mut out, false).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.ends_with("gradient checks: 2 passed\n2 passed, 1 failed\n"),
        "{text}"
    );
    assert!(!text.contains("not run"), "{text}");
}

/// scatter_reduce amax, include_self = false, where the excluded input equals the result: the
/// case holds PyTorch's numbers (src.grad [0.5, 0]); the library's default is the corrected [1, 0].
fn tie_case(root: &Path, name: &str, expected_src_grad: Tensor) -> PathBuf {
    let json = r#""op": "scatter_reduce", "args": {"dim": 0, "reduce": "amax", "include_self": false},
        "inputs": {"input": "input.npy", "index": "index.npy", "src": "src.npy"},
        "expected": {"output": "expected.npy"}, "error": null, "torch_error": null,
        "grad": {"grad_output": "grad_output.npy", "expected_grad_input": "expected_grad_input.npy",
            "expected_grad_src": "expected_grad_src.npy", "tolerance": {"rtol": 1e-10, "atol": 1e-10}},
        "tolerance": {"rtol": 0.0, "atol": 0.0}, "any_of_duplicates": false, "unordered": false,
        "ties_any_index": false, "notes": "tie with an excluded self""#;
    let files = vec![
        ("input", t(arr1(&[3.0f64, 5.0]))),
        ("index", t(arr1(&[0i64, 0]))),
        ("src", t(arr1(&[3.0f64, 1.0]))),
        ("expected", t(arr1(&[3.0f64, 5.0]))),
        ("grad_output", t(arr1(&[1.0f64, 1.0]))),
        ("expected_grad_input", t(arr1(&[0.0f64, 1.0]))),
        ("expected_grad_src", expected_src_grad),
    ];
    write_case(root, name, json, &files)
}

#[test]
fn pytorch_tie_bug_cases_pass_through_the_documented_divergence_only() {
    let root = scratch("ties");
    // PyTorch's numbers: Parity::PyTorch reproduces them, the default is their correction.
    let r = run_case(&tie_case(&root, "torch", t(arr1(&[0.5f64, 0.0]))));
    assert_eq!(r.outcome, Ok(()));
    assert_eq!(r.grad, GradCheck::PassedWithCorrection);
    // The correct numbers match the default directly.
    let r = run_case(&tie_case(&root, "correct", t(arr1(&[1.0f64, 0.0]))));
    assert_eq!(r.grad, GradCheck::Passed);
    // Anything else fails, naming both attempts.
    let e = run_case(&tie_case(&root, "wrong", t(arr1(&[0.25f64, 0.0]))))
        .outcome
        .unwrap_err();
    assert!(e.contains("with Parity::PyTorch"), "{e}");
    let report = run_suite(&root, &Options::default()).unwrap();
    assert_eq!((report.grad_passed(), report.grad_corrected()), (2, 1));
    assert!(
        report
            .grad_line()
            .unwrap()
            .contains("1 through a documented divergence")
    );
}

#[test]
fn a_non_finite_unreferenced_input_passes_the_gradient_through_unlike_pytorch() {
    // prod, input [inf, 2], index [1], src [3]: PyTorch's g * x / x is NaN at the unreferenced
    // position 0; the library's default passes g through (1), and Parity::PyTorch gives NaN.
    let root = scratch("nonfinite");
    let json = r#""op": "scatter_reduce", "args": {"dim": 0, "reduce": "prod", "include_self": true},
        "inputs": {"input": "input.npy", "index": "index.npy", "src": "src.npy"},
        "expected": {"output": "expected.npy"}, "error": null, "torch_error": null,
        "grad": {"grad_output": "grad_output.npy", "expected_grad_input": "expected_grad_input.npy",
            "expected_grad_src": "expected_grad_src.npy", "tolerance": {"rtol": 1e-10, "atol": 1e-10}},
        "tolerance": {"rtol": 1e-10, "atol": 1e-10}, "any_of_duplicates": false, "unordered": false,
        "ties_any_index": false, "notes": "non-finite unreferenced input""#;
    let files = |grad_input: [f64; 2]| {
        vec![
            ("input", t(arr1(&[f64::INFINITY, 2.0]))),
            ("index", t(arr1(&[1i64]))),
            ("src", t(arr1(&[3.0f64]))),
            ("expected", t(arr1(&[f64::INFINITY, 6.0]))),
            ("grad_output", t(arr1(&[1.0f64, 1.0]))),
            ("expected_grad_input", t(arr1(&grad_input))),
            ("expected_grad_src", t(arr1(&[2.0f64]))),
        ]
    };
    let r = run_case(&write_case(&root, "torch", json, &files([f64::NAN, 3.0])));
    assert_eq!(r.outcome, Ok(()));
    assert_eq!(r.grad, GradCheck::PassedWithCorrection);
    let r = run_case(&write_case(&root, "ours", json, &files([1.0, 3.0])));
    assert_eq!(r.grad, GradCheck::Passed);
    let e = run_case(&write_case(&root, "wrong", json, &files([5.0, 3.0])))
        .outcome
        .unwrap_err();
    assert!(e.contains("grad_input"), "{e}");
}

#[test]
fn a_gradient_of_an_integer_input_is_an_error_not_a_pass() {
    let root = scratch("grad_int");
    let json = GATHER_OK.replace(
        "\"grad\": null",
        r#""grad": {"grad_output": "grad_output.npy", "expected_grad_input": "expected_grad_input.npy",
            "tolerance": {"rtol": 1e-10, "atol": 1e-10}}"#,
    );
    let mut files = seed_files(t(arr2(&[[10i64, 30], [50, 40]])));
    files.push(("grad_output", t(arr2(&[[1i64, 1], [1, 1]]))));
    files.push(("expected_grad_input", t(arr2(&[[1i64, 0, 1], [1, 1, 0]]))));
    let dir = write_case(&root, "g", &json, &files);
    let e = run_case(&dir).outcome.unwrap_err();
    assert!(e.contains("gradient failed with invalid_argument"), "{e}");
}

#[test]
fn the_report_is_in_name_order_filters_by_substring_and_ends_with_the_summary() {
    let root = scratch("report");
    let good = seed_files(t(arr2(&[[10i64, 30], [50, 40]])));
    let bad = seed_files(t(arr2(&[[0i64, 30], [50, 40]])));
    for (name, files) in [
        ("c_ok", &good),
        ("a_bad", &bad),
        ("b_ok", &good),
        ("d_bad", &bad),
    ] {
        write_case(&root, name, GATHER_OK, files);
    }
    std::fs::write(root.join("README.md"), "not a case").unwrap();
    let report = run_suite(&root, &Options::default()).unwrap();
    let names: Vec<&str> = report.results.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a_bad", "b_ok", "c_ok", "d_bad"]);
    let mut out = Vec::new();
    report.print(&mut out, false).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("FAIL a_bad: output: at [0, 0]: got 10, expected 0"));
    assert!(lines[1].starts_with("FAIL d_bad: "));
    assert_eq!(lines[2], "2 passed, 2 failed");

    let mut verbose = Vec::new();
    report.print(&mut verbose, true).unwrap();
    let verbose = String::from_utf8(verbose).unwrap();
    assert!(verbose.contains("ok   b_ok\n") && verbose.contains("     notes: seed\n"));

    let only = run_suite(
        &root,
        &Options {
            filter: Some("_ok".into()),
            verbose: false,
            progress: false,
            gpu: None,
        },
    )
    .unwrap();
    assert_eq!(only.summary_line(), "2 passed, 0 failed");
    // A suite root with a `cases` folder is accepted too.
    let suite = scratch("suite_root");
    write_case(&suite.join("cases"), "x", GATHER_OK, &good);
    assert_eq!(
        run_suite(&suite, &Options::default())
            .unwrap()
            .summary_line(),
        "1 passed, 0 failed"
    );
}

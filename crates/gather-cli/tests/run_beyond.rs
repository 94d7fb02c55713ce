//! The group, segment, bincount and broadcast ops (beyond PyTorch, so not in the conformance
//! suite) through the binary: `gather run` on `.npy` files must write what the typed library
//! functions return; `gather check` dry-runs them; `gather explain` refuses them clearly.

use std::path::Path;

use assert_cmd::Command;
use gather::dynamic::Tensor;
use gather::ops::reduce::{ArgReduce, EmptyFill, GroupOptions, GroupReduce};
use gather::ops::segment::Segments;
use gather_cli::tensor_io::{LoadOptions, Role, load, npy_bytes};
use ndarray::{Array3, array};

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Out {
    let o = Command::cargo_bin("gather")
        .unwrap()
        .arg("--no-progress")
        .args(args)
        .output()
        .unwrap();
    Out {
        code: o.status.code(),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

/// Writes `t` to `dir/name` as `.npy` and returns the path.
fn npy(dir: &Path, name: &str, t: Tensor) -> String {
    let p = dir.join(name);
    std::fs::write(&p, npy_bytes(&t)).unwrap();
    p.display().to_string()
}

fn read(path: &str) -> Tensor {
    load(path, Role::Data, &LoadOptions::default()).unwrap()
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_f64_vec().iter().map(|v| v.to_bits()).collect()
}

#[test]
fn run_scatter_groups_logsumexp_writes_the_libraries_result() {
    let dir = tempfile::tempdir().unwrap();
    // Edge messages [E=4, F=2] into V=3 nodes by a 1-D destination index; node 2 gets none.
    let msgs = array![[1.0f64, -2.0], [0.5, 3.0], [4.0, 0.0], [-1.0, 1.0]];
    let dst = array![1i64, 0, 1, 1];
    let src = npy(
        dir.path(),
        "msgs.npy",
        Tensor::from(msgs.clone().into_dyn()),
    );
    let index = npy(dir.path(), "dst.npy", Tensor::from(dst.clone().into_dyn()));
    let out = dir.path().join("nodes.npy").display().to_string();
    let o = run(&[
        "run",
        "scatter_groups",
        "--src",
        &src,
        "--index",
        &index,
        "--dim",
        "0",
        "--reduce",
        "logsumexp",
        "--dim-size",
        "3",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.contains("wrote"), "{}", o.stdout);
    let want = gather::ops::reduce::scatter_groups(
        &msgs,
        0,
        &dst,
        GroupReduce::LogSumExp,
        GroupOptions::default().dim_size(3),
    )
    .unwrap();
    let got = read(&out);
    assert_eq!(got.shape(), &[3, 2]);
    assert_eq!(bits(&got), bits(&Tensor::from(want.into_dyn())));
    // Row 0 is the one message 0.5, 3.0; row 2 (no message) is logsumexp's identity, -inf.
    assert_eq!(got.to_f64_vec()[..2], [0.5, 3.0]);
    assert_eq!(got.to_f64_vec()[4..], [f64::NEG_INFINITY; 2]);

    // With --fill and std --correction 0 the options reach the library.
    let o = run(&[
        "run",
        "scatter_groups",
        "--src",
        &src,
        "--index",
        &index,
        "--dim",
        "0",
        "--reduce",
        "std",
        "--correction",
        "0",
        "--dim-size",
        "3",
        "--fill",
        "zero",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let want = gather::ops::reduce::scatter_groups(
        &msgs,
        0,
        &dst,
        GroupReduce::Std { correction: 0 },
        GroupOptions::default().dim_size(3).fill(EmptyFill::Zero),
    )
    .unwrap();
    assert_eq!(bits(&read(&out)), bits(&Tensor::from(want.into_dyn())));

    // A float-only reduction on integers is a typed error (exit 2) with a hint, no file.
    let ints = npy(
        dir.path(),
        "ints.npy",
        Tensor::from(array![[1i32, 2], [3, 4], [5, 6], [7, 8]].into_dyn()),
    );
    let bad = dir.path().join("bad.npy");
    let o = run(&[
        "run",
        "scatter_groups",
        "--src",
        &ints,
        "--index",
        &index,
        "--dim",
        "0",
        "--reduce",
        "logsumexp",
        "-o",
        &bad.display().to_string(),
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stdout);
    assert!(
        o.stderr
            .contains("scatter_groups: reduce=\"logsumexp\" needs a float dtype, got int32"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("hint:"), "{}", o.stderr);
    assert!(!bad.exists());
}

#[test]
fn run_gather_broadcast_writes_the_libraries_result() {
    let dir = tempfile::tempdir().unwrap();
    let patches = Array3::from_shape_fn((2, 4, 3), |(b, n, d)| (100 * b + 10 * n + d) as f32);
    let keep = array![[[3i32], [1]], [[0], [2]]];
    let input = npy(
        dir.path(),
        "patches.npy",
        Tensor::from(patches.clone().into_dyn()),
    );
    let index = npy(
        dir.path(),
        "keep.npy",
        Tensor::from(keep.clone().into_dyn()),
    );
    let out = dir.path().join("picked.npy").display().to_string();
    let o = run(&[
        "run",
        "gather_broadcast",
        "--input",
        &input,
        "--index",
        &index,
        "--dim",
        "1",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let want = gather::Options::new()
        .broadcast(true)
        .gather(&patches, 1, &keep)
        .unwrap();
    let got = read(&out);
    assert_eq!(got, Tensor::from(want.into_dyn()));
    assert_eq!(got.shape(), &[2, 2, 3]);
    assert_eq!(got.to_f64_vec()[..3], [30.0, 31.0, 32.0]);
}

#[test]
fn run_segment_arg_reduce_bincount_and_a_broadcast_scatter() {
    let dir = tempfile::tempdir().unwrap();
    let x = array![[3.0f32, 9.0, 9.0, 1.0, 4.0], [0.0, -1.0, 2.0, 2.0, 5.0]];
    let src = npy(dir.path(), "x.npy", Tensor::from(x.clone().into_dyn()));
    let values = dir.path().join("v.npy").display().to_string();
    let indices = dir.path().join("i.npy").display().to_string();
    let o = run(&[
        "run",
        "segment_arg_reduce",
        "--src",
        &src,
        "--offsets",
        "[0, 3, 3, 5]",
        "--dim",
        "1",
        "--reduce",
        "amax",
        "--fill",
        "-1",
        "-o",
        &values,
        "-o",
        &indices,
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let off = array![0i64, 3, 3, 5];
    let (v, i) = gather::ops::segment::segment_arg_reduce(
        &x,
        1,
        Segments::offsets(&off),
        ArgReduce::Amax,
        EmptyFill::Value(-1.0),
    )
    .unwrap();
    assert_eq!(read(&values), Tensor::from(v.into_dyn()));
    assert_eq!(read(&indices), Tensor::from(i.into_dyn()));

    // bincount with weights along an axis: the integer input is not converted by --dtype.
    let out = dir.path().join("counts.npy").display().to_string();
    let o = run(&[
        "run",
        "bincount",
        "--input",
        "[[0, 1, 1], [2, 2, 2]]",
        "--weights",
        "[[1.5, 2.0, 0.5], [3.0, 4.0, 1.0]]",
        "--dim",
        "1",
        "--minlength",
        "4",
        "--dtype",
        "float64",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let want = gather::ops::segment::bincount_weighted_axis(
        &array![[0i64, 1, 1], [2, 2, 2]],
        1,
        &array![[1.5f64, 2.0, 0.5], [3.0, 4.0, 1.0]],
        4,
    )
    .unwrap();
    assert_eq!(read(&out), Tensor::from(want.into_dyn()));

    // scatter_add_broadcast: whole rows by [N, 1] row ids.
    let out = dir.path().join("nodes.npy").display().to_string();
    let o = run(&[
        "run",
        "scatter_add_broadcast",
        "--input",
        "[[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]",
        "--index",
        "[[2], [0], [2]]",
        "--src",
        "[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]",
        "--dim",
        "0",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(read(&out).to_f64_vec(), vec![3.0, 4.0, 0.0, 0.0, 6.0, 8.0]);
}

#[test]
fn check_dry_runs_the_new_ops_and_explain_refuses_them_clearly() {
    let o = run(&[
        "check",
        "scatter_groups",
        "--src-shape",
        "6,4",
        "--index-shape",
        "6",
        "--dim",
        "0",
        "--reduce",
        "mean",
        "--dim-size",
        "5",
    ]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("[5, 4]"), "{}", o.stdout);
    let o = run(&[
        "check",
        "segment_reduce",
        "--src-shape",
        "6,4",
        "--ids-shape",
        "6",
        "--reduce",
        "sum",
        "--num-segments",
        "3",
    ]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("[3, 4]"), "{}", o.stdout);
    let o = run(&[
        "explain",
        "scatter_groups",
        "--src",
        "[1.0, 2.0]",
        "--index",
        "[0, 0]",
        "--dim",
        "0",
        "--reduce",
        "sum",
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stdout);
    assert!(
        o.stderr.contains("explain does not cover scatter_groups"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("gather run scatter_groups"),
        "{}",
        o.stderr
    );
}

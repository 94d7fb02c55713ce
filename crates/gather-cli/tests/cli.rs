//! The `gather` binary: `demo` output, help texts, exit codes and error reporting.

use std::process::{Command, Output};

fn gather(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gather"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn demo_prints_each_scenario_with_its_exact_result() {
    let o = gather(&["demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    let has = |l: &str| lines.contains(&l);
    // 1. the seed example
    assert!(has("x [2, 3] = [[10, 20, 30], [40, 50, 60]]"));
    assert!(has("    let out = x.gather(1, &index)?;"));
    assert!(has("output [2, 2] = [[10, 30], [50, 40]]"));
    // 3. MAE masking: the kept tokens of each sample are 0 in the restored mask
    assert!(has(
        "mask [2, 6] = [[1, 0, 1, 0, 1, 0], [0, 1, 1, 0, 1, 0]]"
    ));
    // 4. token scores: logits[b][l][labels[b][l]]
    assert!(has("output [2, 3] = [[2, 1.5, 3.1], [1.2, 2.5, 1.3]]"));
    // 5. ROI boxes of classes 7, 0 and 20
    assert!(has(
        "output [3, 4] = [[70, 71, 72, 73], [1000, 1001, 1002, 1003], [2200, 2201, 2202, 2203]]"
    ));
    // 7. scatter_add as the gradient of gather: x[0][0] was read twice (1 + 2)
    assert!(has("output [2, 3] = [[3, 0, 0], [0, 4, 3]]"));
    // 8. the error with its hint
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("error: gather: ") && l.contains("[3, 21, 4]"))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("hint: ") && l.contains("[3, 1, 4]"))
    );
    for n in 1..=8 {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("== {n}. "))),
            "scenario {n}"
        );
    }
}

#[test]
fn every_subcommand_has_help_with_examples() {
    for args in [
        &["--help"][..],
        &["demo", "--help"],
        &["conformance", "--help"],
    ] {
        let o = gather(args);
        assert!(o.status.success(), "{args:?}");
        let text = stdout(&o);
        assert!(text.contains("Example"), "{args:?}: {text}");
        assert!(text.contains("gather "), "{args:?}: {text}");
    }
}

#[test]
fn usage_and_input_errors_exit_with_2_without_a_panic() {
    for args in [
        &["frobnicate"][..],
        &["conformance"],
        &["conformance", "/nonexistent/cases"],
    ] {
        let o = gather(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains("error"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let o = gather(&["conformance", "/nonexistent/cases"]);
    assert!(stderr(&o).starts_with("error: cannot read /nonexistent/cases"));
}

#[test]
fn conformance_ends_with_the_summary_line_and_exits_1_on_failures() {
    let suite = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/cases");
    let o = gather(&[
        "conformance",
        suite.to_str().unwrap(),
        "--filter",
        "gather__seed",
    ]);
    let text = stdout(&o);
    let last = text.lines().last().unwrap_or_default();
    let nums: Vec<&str> = last.split(' ').collect();
    assert_eq!(nums.len(), 4, "{last}");
    assert_eq!((nums[1], nums[3]), ("passed,", "failed"), "{last}");
    let failed: usize = nums[2].parse().unwrap();
    assert!(nums[0].parse::<usize>().unwrap() > 0, "{last}");
    assert_eq!(o.status.code(), Some(if failed > 0 { 1 } else { 0 }));

    // A case that fails makes the exit code 1, with one FAIL line naming it.
    let dir = std::env::temp_dir().join(format!("gather_cli_exit_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("broken__case__0")).unwrap();
    std::fs::write(dir.join("broken__case__0/case.json"), "{}").unwrap();
    let o = gather(&["conformance", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stdout(&o),
        "FAIL broken__case__0: bad case.json: missing field `op`\n0 passed, 1 failed\n"
    );
}

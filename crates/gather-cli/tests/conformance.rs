//! The shared conformance suite (`<workspace>/../shared/conformance/cases`), run through the
//! runner as a library call. The set of failing cases must equal `tests/known_failing.txt`:
//!
//! - a failing case that is not listed fails this test (a regression, or a new case that fails);
//! - a listed case that now passes fails it too: the list may only shrink, so remove the line
//!   (`GATHER_BLESS=1 cargo test -p gather-cli --test conformance` removes every listed case
//!   that now passes; it never adds one).

use std::collections::BTreeSet;
use std::path::PathBuf;

use gather_cli::conformance::{Options, run_suite};

fn suite_dir() -> PathBuf {
    // crates/gather-cli -> workspace root -> its parent, where `shared/` lives beside the checkout.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/cases")
}

fn known_failing_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/known_failing.txt")
}

/// The listed case names (blank lines and `#` comments ignored).
fn known_failing(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_known_failing_list_ignores_comments_and_blank_lines() {
    let list = known_failing("# header\n\ntake__a__0\n  put__b__1  \n");
    assert_eq!(
        list,
        BTreeSet::from(["take__a__0".to_string(), "put__b__1".to_string()])
    );
}

#[test]
fn shared_suite_fails_exactly_the_known_failing_cases() {
    let dir = suite_dir();
    assert!(
        dir.is_dir(),
        "the conformance suite is missing: expected it at {} (shared/ beside the checkout)",
        dir.display()
    );
    let report = run_suite(&dir, &Options::default()).expect("the suite folder is readable");
    assert!(
        report.results.len() > 1000,
        "only {} cases found in {}",
        report.results.len(),
        dir.display()
    );
    let failing = report.failing();
    let path = known_failing_path();
    let text = std::fs::read_to_string(&path).expect("tests/known_failing.txt is readable");
    let listed = known_failing(&text);

    let unexpected: Vec<String> = report
        .results
        .iter()
        .filter(|r| !r.passed() && !listed.contains(&r.name))
        .map(|r| format!("  {}: {}", r.name, r.outcome.as_ref().unwrap_err()))
        .collect();
    let fixed: Vec<&String> = listed.difference(&failing).collect();

    let mut problems = Vec::new();
    if std::env::var_os("GATHER_BLESS").is_some() && !fixed.is_empty() {
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| !fixed.iter().any(|f| f.as_str() == l.trim()))
            .collect();
        std::fs::write(&path, kept.join("\n") + "\n").expect("tests/known_failing.txt is writable");
        eprintln!(
            "removed {} cases that now pass from {}",
            fixed.len(),
            path.display()
        );
    } else if !fixed.is_empty() {
        let names: Vec<&str> = fixed.iter().map(|s| s.as_str()).collect();
        problems.push(format!(
            "{} listed cases now pass (or no longer exist): remove them from {} \
             (or run with GATHER_BLESS=1):\n  {}",
            fixed.len(),
            path.display(),
            names.join("\n  ")
        ));
    }
    if !unexpected.is_empty() {
        problems.push(format!(
            "{} cases fail that are not in tests/known_failing.txt:\n{}",
            unexpected.len(),
            unexpected.join("\n")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    println!(
        "{}; {}",
        report.summary_line(),
        report
            .grad_line()
            .unwrap_or_else(|| "no gradient checks".into())
    );
}

//! The conformance runner: runs every case folder of a suite in the format of
//! `shared/conformance/README.md` and applies its rules R1–R7.
//!
//! Cases run in parallel (rayon); the report lists them in folder-name order, so the output is
//! the same on every run. A panic inside an op is caught and reported as that case's failure.
//!
//! ```no_run
//! use gather_cli::conformance::{run_suite, Options};
//! let report = run_suite("shared/conformance/cases".as_ref(), &Options::default()).unwrap();
//! println!("{}", report.summary_line());
//! ```

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Once;

use gather::dynamic::{self, Tensor, Tensors};
use rayon::prelude::*;

use crate::case::Case;
use crate::compare;
use crate::npy::load_npy;

/// What to run and how much to print.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Run only the case folders whose name contains this string.
    pub filter: Option<String>,
    /// Print passing cases too, and the notes of failing ones.
    pub verbose: bool,
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    /// The case folder's name.
    pub name: String,
    /// `Ok(())` when the case passed, else what differed.
    pub outcome: Result<(), String>,
    /// The case has a gradient check, which was not run (the library has no gradients yet).
    pub grad_not_run: bool,
    /// The case's notes (printed with `--verbose`).
    pub notes: String,
}

impl CaseResult {
    /// True when the case passed.
    ///
    /// ```
    /// let r = gather_cli::conformance::CaseResult {
    ///     name: "x".into(), outcome: Ok(()), grad_not_run: false, notes: String::new() };
    /// assert!(r.passed());
    /// ```
    pub fn passed(&self) -> bool {
        self.outcome.is_ok()
    }
}

/// The results of a suite, in case-name order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// One entry per case folder.
    pub results: Vec<CaseResult>,
}

impl Report {
    /// Number of cases that passed.
    ///
    /// ```
    /// assert_eq!(gather_cli::conformance::Report::default().passed(), 0);
    /// ```
    pub fn passed(&self) -> usize {
        self.results.iter().filter(|r| r.passed()).count()
    }

    /// Number of cases that failed.
    ///
    /// ```
    /// assert_eq!(gather_cli::conformance::Report::default().failed(), 0);
    /// ```
    pub fn failed(&self) -> usize {
        self.results.len() - self.passed()
    }

    /// Number of gradient checks that were not run.
    ///
    /// ```
    /// assert_eq!(gather_cli::conformance::Report::default().grad_not_run(), 0);
    /// ```
    pub fn grad_not_run(&self) -> usize {
        self.results.iter().filter(|r| r.grad_not_run).count()
    }

    /// The names of the failing cases.
    ///
    /// ```
    /// assert!(gather_cli::conformance::Report::default().failing().is_empty());
    /// ```
    pub fn failing(&self) -> BTreeSet<String> {
        self.results
            .iter()
            .filter(|r| !r.passed())
            .map(|r| r.name.clone())
            .collect()
    }

    /// The closing line: `N passed, N failed`.
    ///
    /// ```
    /// assert_eq!(gather_cli::conformance::Report::default().summary_line(), "0 passed, 0 failed");
    /// ```
    pub fn summary_line(&self) -> String {
        format!("{} passed, {} failed", self.passed(), self.failed())
    }

    /// Prints one line per failure (all cases with `verbose`), the number of gradient checks not
    /// run, and the summary line.
    ///
    /// ```
    /// let mut out = Vec::new();
    /// gather_cli::conformance::Report::default().print(&mut out, false).unwrap();
    /// assert_eq!(String::from_utf8(out).unwrap(), "0 passed, 0 failed\n");
    /// ```
    pub fn print(&self, out: &mut impl Write, verbose: bool) -> io::Result<()> {
        for r in &self.results {
            match &r.outcome {
                Ok(()) if verbose => writeln!(out, "ok   {}", r.name)?,
                Ok(()) => {}
                Err(why) => {
                    writeln!(out, "FAIL {}: {}", r.name, one_line(why))?;
                    if verbose && !r.notes.is_empty() {
                        writeln!(out, "     notes: {}", r.notes)?;
                    }
                }
            }
        }
        let g = self.grad_not_run();
        if g > 0 {
            writeln!(out, "gradient checks not run: {g}")?;
        }
        writeln!(out, "{}", self.summary_line())
    }
}

/// Runs every case folder in `dir` (or in `dir/cases` when `dir` is a suite's root), in parallel.
/// Fails only when the folder cannot be read; a broken case is a failing case.
///
/// ```
/// let err = gather_cli::conformance::run_suite(
///     "/nonexistent".as_ref(), &Default::default()).unwrap_err();
/// assert!(err.contains("/nonexistent"));
/// ```
pub fn run_suite(dir: &Path, options: &Options) -> Result<Report, String> {
    let dirs = case_dirs(dir)?;
    let dirs: Vec<PathBuf> = dirs
        .into_iter()
        .filter(|d| match &options.filter {
            Some(f) => d
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains(f.as_str())),
            None => true,
        })
        .collect();
    install_panic_hook();
    let results = dirs.par_iter().map(|d| run_case(d)).collect();
    Ok(Report { results })
}

/// The case folders (those holding a `case.json`) of `dir`, sorted by name.
fn case_dirs(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let list = |dir: &Path| -> Result<Vec<PathBuf>, String> {
        let entries =
            std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let mut dirs = Vec::new();
        for entry in entries {
            let path = entry
                .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
                .path();
            if path.join("case.json").is_file() {
                dirs.push(path);
            }
        }
        dirs.sort();
        Ok(dirs)
    };
    let dirs = list(dir)?;
    if dirs.is_empty() && dir.join("cases").is_dir() {
        return list(&dir.join("cases"));
    }
    if dirs.is_empty() && dir.join("case.json").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    Ok(dirs)
}

/// Runs one case folder.
///
/// ```no_run
/// let r = gather_cli::conformance::run_case(
///     "shared/conformance/cases/gather__seed_tutorial_2d_example__0".as_ref());
/// assert!(r.passed(), "{:?}", r.outcome);
/// ```
pub fn run_case(dir: &Path) -> CaseResult {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(dir.join("case.json"));
    let case = match text
        .map_err(|e| e.to_string())
        .and_then(|t| Case::parse(&t))
    {
        Ok(c) => c,
        Err(e) => {
            return CaseResult {
                name,
                outcome: Err(format!("bad case.json: {e}")),
                grad_not_run: false,
                notes: String::new(),
            };
        }
    };
    let outcome = check_case(dir, &case);
    CaseResult {
        name,
        outcome,
        grad_not_run: case.grad.is_some(),
        notes: case.notes,
    }
}

fn load_all(dir: &Path, case: &Case, files: &[(String, String)]) -> Result<Tensors, String> {
    files
        .iter()
        .map(|(name, file)| {
            Ok((
                name.clone(),
                load_npy(&dir.join(file), case.dtype_of(file)?)?,
            ))
        })
        .collect()
}

type Outputs = Vec<(String, Tensor)>;

/// Applies every rule to one decoded case.
fn check_case(dir: &Path, case: &Case) -> Result<(), String> {
    let inputs = load_all(dir, case, &case.inputs)?;
    let expected = match &case.expected {
        Some(files) => Some(load_all(dir, case, files)?),
        None => None,
    };
    let divergence = match &case.index_dtype_divergence {
        Some(files) => Some(load_all(dir, case, files)?),
        None => None,
    };
    if let Some(g) = &case.grad {
        // Not run yet, but the files must at least be readable.
        let mut files = vec![("grad_output".to_string(), g.grad_output.clone())];
        files.extend(g.expected.iter().cloned());
        load_all(dir, case, &files)?;
    }
    if !dynamic::OPS.iter().any(|(n, _)| *n == case.op) {
        return Err(format!(
            "unknown op `{}`: the library does not implement it",
            case.op
        ));
    }
    let result = catch_panic(|| dynamic::call(&case.op, &case.args, &inputs))?;
    match &case.error {
        Some(category) => {
            check_error_case(case, category, result, divergence.as_ref())?;
            if dynamic::has_inplace(&case.op) && inputs.contains_key("input") {
                check_inplace_atomic(case, category, &inputs, divergence.as_ref())?;
            }
            Ok(())
        }
        None => {
            let outputs = result.map_err(|e| {
                format!(
                    "failed with {}: {}",
                    e.kind().category(),
                    one_line(&e.to_string())
                )
            })?;
            let expected = expected.ok_or("success case without `expected`")?;
            check_outputs(case, &inputs, &outputs, &expected)
        }
    }
}

/// Joins the lines of a message with ` | ` and squeezes runs of blanks (messages of the npy
/// parser draw carets over several lines).
fn one_line(s: &str) -> String {
    let lines: Vec<String> = s
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect();
    lines.join(" | ")
}

/// R4 and R4a for the out-of-place call.
fn check_error_case(
    case: &Case,
    category: &str,
    result: gather::Result<Outputs>,
    divergence: Option<&Tensors>,
) -> Result<(), String> {
    match (result, divergence) {
        (Err(e), _) if e.kind().category() == category => Ok(()),
        (Err(e), _) => Err(format!(
            "expected error {category}, got {}: {}",
            e.kind().category(),
            one_line(&e.to_string())
        )),
        (Ok(outputs), Some(accepted)) => check_exact_outputs(&outputs, accepted)
            .map_err(|e| format!("accepted the index dtype (R4a), but {e}")),
        (Ok(_), None) => Err(format!(
            "expected error {category}, but the op succeeded (PyTorch: {})",
            case.torch_error
                .as_deref()
                .map(one_line)
                .unwrap_or_default()
        )),
    }
}

/// R4b: the in-place form fails the same way and leaves its target untouched (or, when the
/// out-of-place form accepted an index dtype under R4a, produces the accepted result).
fn check_inplace_atomic(
    case: &Case,
    category: &str,
    inputs: &Tensors,
    divergence: Option<&Tensors>,
) -> Result<(), String> {
    let original = &inputs["input"];
    let mut target = original.clone();
    let result = catch_panic(|| dynamic::call_inplace(&case.op, &case.args, &mut target, inputs))
        .map_err(|e| format!("in-place form: {e}"))?;
    match result {
        Err(e) if e.kind().category() == category => compare::check_identical(&target, original)
            .map_err(|d| format!("in-place form failed but changed its target (R4b): {d}")),
        Err(e) => Err(format!(
            "in-place form: expected error {category}, got {}: {}",
            e.kind().category(),
            one_line(&e.to_string())
        )),
        Ok(()) => match divergence.and_then(|d| d.get("output")) {
            Some(accepted) => compare::check_exact(&target, accepted)
                .map_err(|d| format!("in-place form accepted the index dtype (R4a), but {d}")),
            None => Err(format!(
                "in-place form: expected error {category}, but it succeeded"
            )),
        },
    }
}

/// The same output names, each equal under R1 + R2.
fn check_exact_outputs(outputs: &Outputs, expected: &Tensors) -> Result<(), String> {
    check_names(outputs, expected)?;
    for (name, t) in outputs {
        compare::check_exact(t, &expected[name]).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

fn check_names(outputs: &Outputs, expected: &Tensors) -> Result<(), String> {
    let got: BTreeSet<&str> = outputs.iter().map(|(n, _)| n.as_str()).collect();
    let want: BTreeSet<&str> = expected.keys().map(|n| n.as_str()).collect();
    if got != want {
        return Err(format!("outputs {got:?}, expected {want:?}"));
    }
    Ok(())
}

/// R1 then R5, R6/R7, or R2/R3 for a successful call.
fn check_outputs(
    case: &Case,
    inputs: &Tensors,
    outputs: &Outputs,
    expected: &Tensors,
) -> Result<(), String> {
    check_names(outputs, expected)?;
    let get = |name: &str| outputs.iter().find(|(n, _)| n == name).map(|(_, t)| t);
    if case.any_of_duplicates {
        let (out, exp) = (
            get("output").ok_or("no output `output`")?,
            &expected["output"],
        );
        compare::check_r1(out, exp).map_err(|e| format!("output: {e}"))?;
        return compare::check_any_of_duplicates(&case.op, &case.args, inputs, out)
            .map_err(|e| format!("output (R5 any_of_duplicates): {e}"));
    }
    if case.unordered || case.ties_any_index {
        let input = inputs.get("input").ok_or("no input `input`")?;
        let dim = compare::sort_dim(&case.args, input.shape())?;
        if case.op == "argsort" {
            let (out, exp) = (
                get("output").ok_or("no output `output`")?,
                &expected["output"],
            );
            return compare::check_argsort_ties(input, dim, out, exp)
                .map_err(|e| format!("output (R7 ties_any_index): {e}"));
        }
        let actual = (
            get("values").ok_or("no output `values`")?,
            get("indices").ok_or("no output `indices`")?,
        );
        let want = (
            expected.get("values").ok_or("no expected `values`")?,
            expected.get("indices").ok_or("no expected `indices`")?,
        );
        return if case.ties_any_index {
            compare::check_ties(input, dim, case.unordered, actual, want)
                .map_err(|e| format!("R7 ties_any_index: {e}"))
        } else {
            compare::check_unordered(actual, want, dim).map_err(|e| format!("R6 unordered: {e}"))
        };
    }
    let (rtol, atol) = case.tolerance;
    for (name, t) in outputs {
        let exp = &expected[name];
        if rtol == 0.0 && atol == 0.0 {
            compare::check_exact(t, exp)
        } else {
            compare::check_tolerance(t, exp, rtol, atol)
        }
        .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

static HOOK: Once = Once::new();

thread_local! {
    /// This thread is inside [`catch_panic`] (the hook stays quiet for it).
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// The message and location of the last panic caught on this thread.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once) a panic hook that, on a thread inside [`catch_panic`], records the message and
/// location instead of printing them; on every other thread it defers to the previous hook (a
/// panic on a thread the op itself started is printed, and still reported through its payload).
fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(one_line(&info.to_string())));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic into an error that says where it happened.
fn catch_panic<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    install_panic_hook();
    let outer = CATCHING.with(|c| c.replace(true));
    LAST_PANIC.with(|p| p.borrow_mut().take());
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(outer));
    result.map_err(|payload| {
        let recorded = LAST_PANIC.with(|p| p.borrow_mut().take());
        let message = recorded.unwrap_or_else(|| {
            payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into())
        });
        format!("the op panicked: {message}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_with_its_message_and_location() {
        let r: Result<(), String> = catch_panic(|| panic!("boom {}", 7));
        let e = r.unwrap_err();
        assert!(e.starts_with("the op panicked: "), "{e}");
        assert!(e.contains("boom 7"), "{e}");
        assert!(e.contains("conformance.rs"), "{e}");
        assert_eq!(catch_panic(|| 5), Ok(5));
    }

    #[test]
    fn one_line_joins_lines_and_squeezes_blanks() {
        assert_eq!(one_line("a   b\n\n  c\n"), "a b | c");
    }
}

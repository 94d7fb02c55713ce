//! The conformance runner: runs every case folder of a suite in the format of
//! `shared/conformance/README.md` and applies its rules R1–R7.
//!
//! Cases run in parallel (rayon); the report lists them in folder-name order, so the output is
//! the same on every run. A panic inside an op is caught and reported as that case's failure.
//!
//! Gradient checks (the README's "Gradients" section) back-propagate `grad_output` through
//! [`gather::dynamic::call_grad`] and compare every `expected_grad_<name>` under R3 with the case's
//! gradient tolerance. The library's documented divergences from PyTorch's `scatter_reduce`
//! gradients are recognised: with `amax`/`amin` and `include_self = false`, PyTorch's numbers
//! count an excluded `input` equal to the result as a tied contributor (a known PyTorch bug); and
//! a non-finite `input` element no index refers to gets NaN from PyTorch's formulas instead of the
//! upstream gradient. There the runner requires both that
//! [`Parity::PyTorch`] reproduces PyTorch's gradients and that the
//! library's default gradient equals PyTorch's corrected by those rules, derived here from the
//! case's own files.
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

use gather::dims;
use gather::dynamic::{self, Arg, Tensor, Tensors};
use gather::grad::Parity;
use rayon::prelude::*;

use crate::case::{Case, GradSpec};
use crate::compare;
use crate::npy::load_npy;
use crate::progress::{Kind, Progress};

/// What to run and how much to print.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Run only the case folders whose name contains this string.
    pub filter: Option<String>,
    /// Print passing cases too, and the notes of failing ones.
    pub verbose: bool,
    /// Show a progress bar (on stderr, when the run takes more than a second).
    pub progress: bool,
    /// Run the ops on this GPU (`--device cuda`): forward results, errors, the in-place forms'
    /// atomicity and the gradients, all computed by `gather-cuda`.
    pub gpu: Option<gather_cuda::Cuda>,
}

/// The gradient check of a passing case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GradCheck {
    /// The case has no gradient check (or did not pass).
    #[default]
    None,
    /// The gradients matched PyTorch's.
    Passed,
    /// A documented divergence: `Parity::PyTorch` matched PyTorch's gradients, and the default
    /// gradient matched PyTorch's corrected by the documented rules (the `include_self = false`
    /// tie bug; non-finite inputs at unreferenced positions).
    PassedWithCorrection,
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    /// The case folder's name.
    pub name: String,
    /// `Ok(())` when the case passed, else what differed.
    pub outcome: Result<(), String>,
    /// What the gradient check of the case found (when the case passed).
    pub grad: GradCheck,
    /// The case's notes (printed with `--verbose`).
    pub notes: String,
}

impl CaseResult {
    /// True when the case passed.
    ///
    /// ```
    /// use gather_cli::conformance::{CaseResult, GradCheck};
    /// let r = CaseResult {
    ///     name: "x".into(), outcome: Ok(()), grad: GradCheck::None, notes: String::new() };
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

    /// Number of passing cases whose gradient check ran (and passed).
    ///
    /// ```
    /// assert_eq!(gather_cli::conformance::Report::default().grad_passed(), 0);
    /// ```
    pub fn grad_passed(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.grad, GradCheck::Passed | GradCheck::PassedWithCorrection))
            .count()
    }

    /// Number of those that passed through a documented divergence
    /// ([`GradCheck::PassedWithCorrection`]).
    ///
    /// ```
    /// assert_eq!(gather_cli::conformance::Report::default().grad_corrected(), 0);
    /// ```
    pub fn grad_corrected(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.grad == GradCheck::PassedWithCorrection)
            .count()
    }

    /// The line about gradient checks, if any ran:
    /// `gradient checks: N passed (M of them match PyTorch only with Parity::PyTorch ...)`.
    ///
    /// ```
    /// assert_eq!(gather_cli::conformance::Report::default().grad_line(), None);
    /// ```
    pub fn grad_line(&self) -> Option<String> {
        let n = self.grad_passed();
        if n == 0 {
            return None;
        }
        let c = self.grad_corrected();
        Some(if c == 0 {
            format!("gradient checks: {n} passed")
        } else {
            format!(
                "gradient checks: {n} passed ({c} through a documented divergence: PyTorch's numbers \
                 with Parity::PyTorch, the corrected gradient by default)"
            )
        })
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

    /// Prints one line per failure (all cases with `verbose`), the gradient-check line, and the
    /// summary line.
    ///
    /// ```
    /// let mut out = Vec::new();
    /// gather_cli::conformance::Report::default().print(&mut out, false).unwrap();
    /// assert_eq!(String::from_utf8(out).unwrap(), "0 passed, 0 failed\n");
    /// ```
    pub fn print(&self, out: &mut dyn Write, verbose: bool) -> io::Result<()> {
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
        if let Some(line) = self.grad_line() {
            writeln!(out, "{line}")?;
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
    let bar = Progress::start(
        "conformance",
        Kind::Count(dirs.len() as u64),
        options.progress,
    );
    let results = dirs
        .par_iter()
        .map(|d| {
            let r = run_case_on(d, options.gpu.as_ref());
            bar.inc(1);
            r
        })
        .collect();
    bar.finish();
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
    run_case_on(dir, None)
}

/// [`run_case`] with the ops on `gpu` when it is given.
pub fn run_case_on(dir: &Path, gpu: Option<&gather_cuda::Cuda>) -> CaseResult {
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
                grad: GradCheck::None,
                notes: String::new(),
            };
        }
    };
    CASE.with(|c| c.replace(name.clone()));
    let (outcome, grad) = match check_case(dir, &case, gpu) {
        Ok(g) => (Ok(()), g),
        Err(e) => (Err(e), GradCheck::None),
    };
    CaseResult {
        name,
        outcome,
        grad,
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
fn check_case(
    dir: &Path,
    case: &Case,
    gpu: Option<&gather_cuda::Cuda>,
) -> Result<GradCheck, String> {
    let inputs = load_all(dir, case, &case.inputs)?;
    let expected = match &case.expected {
        Some(files) => Some(load_all(dir, case, files)?),
        None => None,
    };
    let divergence = match &case.index_dtype_divergence {
        Some(files) => Some(load_all(dir, case, files)?),
        None => None,
    };
    let grad_files = match &case.grad {
        Some(g) => {
            let mut files = vec![("grad_output".to_string(), g.grad_output.clone())];
            files.extend(g.expected.iter().cloned());
            Some(load_all(dir, case, &files)?)
        }
        None => None,
    };
    if !dynamic::OPS.iter().any(|(n, _)| *n == case.op)
        && !dynamic::ONNX_OPS.contains(&case.op.as_str())
    {
        return Err(format!(
            "unknown op `{}`: the library does not implement it",
            case.op
        ));
    }
    let result = match gpu {
        Some(g) => catch_panic(|| crate::cuda::call(g, &case.op, &case.args, &inputs))?,
        None => catch_panic(|| dynamic::call(&case.op, &case.args, &inputs))?,
    };
    match &case.error {
        Some(category) => {
            check_error_case(case, category, result, divergence.as_ref())?;
            if dynamic::has_inplace(&case.op) && inputs.contains_key("input") {
                check_inplace_atomic(case, category, &inputs, divergence.as_ref(), gpu)?;
            }
            Ok(GradCheck::None)
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
            check_outputs(case, &inputs, &outputs, &expected)?;
            match (&case.grad, grad_files) {
                (Some(spec), Some(files)) => check_grad(case, spec, &inputs, &outputs, &files, gpu),
                _ => Ok(GradCheck::None),
            }
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
    gpu: Option<&gather_cuda::Cuda>,
) -> Result<(), String> {
    let original = &inputs["input"];
    let mut target = original.clone();
    let result = match gpu {
        // On the GPU the target comes back as the call left it, changed or not.
        Some(g) => {
            catch_panic(|| crate::cuda::call_inplace(g, &case.op, &case.args, original, inputs))
                .and_then(|r| r.map_err(|e| e.to_string()))
                .map(|(after, result)| {
                    target = after;
                    result
                })
        }
        None => {
            catch_panic(|| dynamic::call_inplace(&case.op, &case.args, target.view_mut(), inputs))
        }
    }
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

/// The gradient check: back-propagates `grad_output` and compares every expected gradient under
/// R3 with the gradient tolerance (see the module docs for the documented divergences).
fn check_grad(
    case: &Case,
    spec: &GradSpec,
    inputs: &Tensors,
    outputs: &Outputs,
    files: &Tensors,
    gpu: Option<&gather_cuda::Cuda>,
) -> Result<GradCheck, String> {
    let grad_output = &files["grad_output"];
    let run = |parity: Parity| -> Result<Outputs, String> {
        catch_panic(|| match gpu {
            Some(g) => crate::cuda::call_grad(g, &case.op, &case.args, inputs, grad_output, parity),
            None => {
                dynamic::call_grad_with(&case.op, &case.args, inputs, &grad_output.view(), parity)
            }
        })?
        .map_err(|e| {
            format!(
                "gradient failed with {}: {}",
                e.kind().category(),
                one_line(&e.to_string())
            )
        })
    };
    let expected: Vec<(String, &Tensor)> = spec
        .expected
        .iter()
        .map(|(name, _)| (name.clone(), &files[name]))
        .collect();
    let grads = run(Parity::Correct)?;
    let why = match compare_grads(&grads, &expected, spec.tolerance) {
        Ok(()) => return Ok(GradCheck::Passed),
        Err(why) => why,
    };
    let Some(corrected) = corrected_grads(case, inputs, outputs, grad_output, &expected)? else {
        return Err(why);
    };
    let torch = run(Parity::PyTorch)?;
    compare_grads(&torch, &expected, spec.tolerance)
        .map_err(|e| format!("{why}; and with Parity::PyTorch: {e}"))?;
    let corrected: Vec<(String, &Tensor)> = corrected.iter().map(|(n, t)| (n.clone(), t)).collect();
    compare_grads(&grads, &corrected, spec.tolerance).map_err(|e| {
        format!("Parity::PyTorch matches, but the default gradient is not PyTorch's with the documented corrections: {e}")
    })?;
    Ok(GradCheck::PassedWithCorrection)
}

/// Every expected `grad_<name>` present in `grads` and equal under R3.
fn compare_grads(
    grads: &Outputs,
    expected: &[(String, &Tensor)],
    (rtol, atol): (f64, f64),
) -> Result<(), String> {
    for (name, want) in expected {
        let key = format!("grad_{name}");
        let got = grads
            .iter()
            .find(|(n, _)| *n == key)
            .map(|(_, t)| t)
            .ok_or_else(|| format!("no gradient `{key}` (the op gave {:?})", names(grads)))?;
        compare::check_tolerance(got, want, rtol, atol).map_err(|e| format!("{key}: {e}"))?;
    }
    Ok(())
}

fn names(outputs: &Outputs) -> Vec<&str> {
    outputs.iter().map(|(n, _)| n.as_str()).collect()
}

/// PyTorch's expected `scatter_reduce` gradients corrected by the two documented divergences of
/// the library's default ([`Parity::Correct`]), or `None` when neither applies to the case:
///
/// - `amax`/`amin` with `include_self = false`, where a referenced `input` element equals its
///   result: PyTorch counts that excluded input as one of `n + 1` tied contributors, so each of the
///   `n` tied src elements got `g / (n + 1)`; corrected: `g / n`.
/// - `prod`/`amax`/`amin` with a non-finite `input` element that no index refers to: PyTorch's
///   formulas give NaN there (`g * x / x`, `g / (x == result)`); corrected: `g` (the output element
///   is `x` itself).
///
/// Everything is derived from the case's own files (input, index, src, the forward output and
/// `grad_output`).
fn corrected_grads(
    case: &Case,
    inputs: &Tensors,
    outputs: &Outputs,
    grad_output: &Tensor,
    expected: &[(String, &Tensor)],
) -> Result<Option<Vec<(String, Tensor)>>, String> {
    let reduce = match case.args.get("reduce") {
        Some(Arg::Str(r)) => r.as_str(),
        _ => return Ok(None),
    };
    let extremum = matches!(reduce, "amax" | "amin" | "max" | "min");
    if case.op != "scatter_reduce" || !(extremum || reduce == "prod") {
        return Ok(None);
    }
    let include_self = case.args.bool_or("include_self", true) == Ok(true);
    let get = |name: &str| inputs.get(name).ok_or(format!("no input `{name}`"));
    let (x, index, src) = (get("input")?, get("index")?, get("src")?);
    let result = outputs
        .iter()
        .find(|(n, _)| n == "output")
        .map(|(_, t)| t)
        .ok_or("no output `output`")?;
    let nonempty = |s: &[usize]| if s.is_empty() { vec![1] } else { s.to_vec() };
    let (xs, is, ss) = (
        nonempty(x.shape()),
        nonempty(index.shape()),
        nonempty(src.shape()),
    );
    let dim = compare::sort_dim(&case.args, x.shape())?;
    let (xv, rv, sv, iv, gv) = (
        x.to_f64_vec(),
        result.to_f64_vec(),
        src.to_f64_vec(),
        index.to_f64_vec(),
        grad_output.to_f64_vec(),
    );
    let (xst, sst) = (dims::row_major_strides(&xs), dims::row_major_strides(&ss));
    // For every index position: its target in input and its element of src.
    let mut targets = Vec::with_capacity(iv.len());
    let mut coord = vec![0usize; is.len()];
    for &i in &iv {
        let (mut t, mut s) = (0isize, 0isize);
        for a in 0..is.len() {
            let c = if a == dim {
                i as isize
            } else {
                coord[a] as isize
            };
            t += c * xst[a];
            s += coord[a] as isize * sst[a];
        }
        targets.push((t as usize, s as usize));
        for a in (0..is.len()).rev() {
            coord[a] += 1;
            if coord[a] < is[a] {
                break;
            }
            coord[a] = 0;
        }
    }
    let mut referenced = vec![false; xv.len()];
    let mut tied = vec![0usize; xv.len()];
    for &(t, s) in &targets {
        referenced[t] = true;
        if sv[s] == rv[t] {
            tied[t] += 1;
        }
    }
    let tie_bug = |t: usize| extremum && !include_self && tied[t] > 0 && xv[t] == rv[t];
    let pass_through = |t: usize| !referenced[t] && !xv[t].is_finite();
    if !(0..xv.len()).any(|t| tie_bug(t) || pass_through(t)) {
        return Ok(None);
    }
    let mut fixed = Vec::new();
    for (name, want) in expected {
        let Tensor::F64(want) = want else {
            return Err("the documented corrections are defined for float64 gradients only".into());
        };
        let mut w = want.clone();
        let flat = w
            .as_slice_mut()
            .ok_or("expected gradient is not in standard layout")?;
        match name.as_str() {
            "src" => {
                for &(t, s) in &targets {
                    if tie_bug(t) && sv[s] == rv[t] {
                        let n = tied[t] as f64;
                        flat[s] = flat[s] * (n + 1.0) / n;
                    }
                }
            }
            "input" => {
                for (t, v) in flat.iter_mut().enumerate() {
                    if pass_through(t) {
                        *v = gv[t];
                    }
                }
            }
            _ => {}
        }
        fixed.push((name.clone(), Tensor::F64(w)));
    }
    Ok(Some(fixed))
}

static HOOK: Once = Once::new();

thread_local! {
    /// This thread is inside [`catch_panic`] (the hook stays quiet for it).
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// The message and location of the last panic caught on this thread.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The case this thread is running, for the hook of a build that cannot catch a panic.
    static CASE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Installs (once) a panic hook that, on a thread inside [`catch_panic`], records the message and
/// location instead of printing them; on every other thread it defers to the previous hook (a
/// panic on a thread the op itself started is printed, and still reported through its payload).
/// The release command does not unwind (`panic = "abort"`, the workspace's Cargo.toml): there
/// the hook names the case, as the report would have, before the process ends.
fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                let line = one_line(&info.to_string());
                if cfg!(panic = "abort") {
                    let case = CASE.with(|c| c.borrow().clone());
                    eprintln!(
                        "error: internal error (a bug in gather): case {case}: the op panicked: {line}\nhint: please report the case; a debug build (`cargo run -p gather-cli -- conformance ...`) reports it and goes on with the suite"
                    );
                } else {
                    LAST_PANIC.with(|p| *p.borrow_mut() = Some(line));
                }
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

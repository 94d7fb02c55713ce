//! `gather check`: is a call valid for these shapes, and what is the output shape? When it is
//! not, the library's error and hint, and the fixes as concrete calls, each verified by
//! checking the fixed call the same way.
//!
//! The check is a dry run: the op runs on zero-filled tensors of the given shapes (zeros are
//! valid index values for any non-empty dim), so its verdict is the library's own, error
//! messages included.
//!
//! ```
//! use gather_cli::check::{check, CheckRequest};
//! use gather_cli::opargs::OpOptions;
//! let req = CheckRequest {
//!     op: "gather".into(),
//!     shapes: vec![("input".into(), vec![128, 21, 4]), ("index".into(), vec![128])],
//!     dtype: gather::DType::F32,
//!     index_dtype: gather::DType::I64,
//!     opts: OpOptions { dim: Some("1".into()), ..Default::default() },
//! };
//! let mut out = Vec::new();
//! let valid = check(&req, &mut out).unwrap();
//! let text = String::from_utf8(out).unwrap();
//! assert!(!valid);
//! assert!(text.contains("give the index the shape [128, 1, 4]"));
//! ```

use std::io::Write;

use gather::DType;
use gather::dynamic::{self, Arg, Args, Tensor, Tensors};
use gather::error::fmt_shape;

use crate::fail::{CliResult, Failure};
use crate::opargs::{self, OpOptions};

/// The most elements the dry run allocates, all tensors together.
pub const MAX_DRY_RUN: usize = 1 << 24;

/// What to check: an op, the shapes of its tensors, dtypes and the op's options.
#[derive(Debug, Clone)]
pub struct CheckRequest {
    /// The op's name.
    pub op: String,
    /// `(tensor name, shape)` of each tensor given.
    pub shapes: Vec<(String, Vec<usize>)>,
    /// Element type of the data tensors (input, src, source).
    pub dtype: DType,
    /// Element type of the index.
    pub index_dtype: DType,
    /// The non-tensor options.
    pub opts: OpOptions,
}

/// Parses a shape: `128,21,4`, `[128, 21, 4]`, `(2, 3)`; `[]`, `()` or `scalar` for 0-d.
///
/// ```
/// use gather_cli::check::parse_shape;
/// assert_eq!(parse_shape("128,21,4").unwrap(), vec![128, 21, 4]);
/// assert_eq!(parse_shape("[2, 3]").unwrap(), vec![2, 3]);
/// assert_eq!(parse_shape("[]").unwrap(), Vec::<usize>::new());
/// assert!(parse_shape("2,x").is_err());
/// ```
pub fn parse_shape(text: &str) -> CliResult<Vec<usize>> {
    let t = text.trim();
    if t == "scalar" {
        return Ok(vec![]);
    }
    let inner = t
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .or_else(|| t.strip_prefix('(').and_then(|s| s.strip_suffix(')')))
        .unwrap_or(t);
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>().map_err(|_| {
                Failure::input(format!("bad shape `{text}`: `{s}` is not a size")).with_hint(
                    "write sizes separated by commas, e.g. 128,21,4 (or [] for a 0-d tensor)",
                )
            })
        })
        .collect()
}

fn role_dtype(name: &str, req: &CheckRequest) -> DType {
    match name {
        // bincount counts the values of its input: integers, like an index.
        "input" if req.op == "bincount" => req.index_dtype,
        "input" | "src" | "source" | "weights" => req.dtype,
        "mask" => DType::Bool,
        "repeats" => DType::I64,
        _ => req.index_dtype,
    }
}

/// The outcome of a dry run: the outputs' shapes, or the library's error.
type DryRun = Result<Vec<(String, Vec<usize>)>, gather::Error>;

/// Runs `op` on zero tensors of the given shapes.
fn dry_run(req: &CheckRequest, args: &Args, shapes: &[(String, Vec<usize>)]) -> CliResult<DryRun> {
    let numel = |s: &[usize]| s.iter().try_fold(1usize, |a, &x| a.checked_mul(x));
    let total = shapes.iter().try_fold(0usize, |acc, (_, s)| {
        numel(s).and_then(|n| acc.checked_add(n))
    });
    // gather reads its input through any strides: a large input (logits [B, L, V]) is a
    // broadcast view of one zero, and only the index and the output take memory.
    if req.op == "gather" && req.index_dtype.is_integer() && total.is_none_or(|t| t > MAX_DRY_RUN) {
        let get = |n: &str| {
            shapes
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, s)| s.as_slice())
        };
        if let (Some(input), Some(index)) = (get("input"), get("index")) {
            if numel(index).is_some_and(|n| n <= MAX_DRY_RUN) {
                let zero = ndarray::arr0(0u8).into_dyn();
                let view = zero.broadcast(ndarray::IxDyn(input)).ok_or_else(|| {
                    Failure::input(format!("cannot make a view of shape {}", fmt_shape(input)))
                })?;
                let idx = ndarray::ArrayD::<i64>::zeros(ndarray::IxDyn(index));
                return Ok(gather::gather(&view, args.dim()?, &idx)
                    .map(|out| vec![("out".to_string(), out.shape().to_vec())]));
            }
        }
    }
    if total.is_none_or(|t| t > MAX_DRY_RUN) {
        return Err(Failure::input(format!(
            "the shapes hold more than {MAX_DRY_RUN} elements, too many for check's dry run"
        ))
        .with_hint("the rules compare sizes only: check with smaller sizes that keep which sizes are equal, 1, or larger"));
    }
    let mut tensors = Tensors::new();
    for (name, shape) in shapes {
        tensors.insert(name.clone(), Tensor::zeros(role_dtype(name, req), shape));
    }
    Ok(dynamic::call(&req.op, args, &tensors).map(|outs| {
        outs.into_iter()
            .map(|(n, t)| {
                (
                    if n == "output" { "out".into() } else { n },
                    t.shape().to_vec(),
                )
            })
            .collect()
    }))
}

/// The call written out: `gather(input [128, 21, 4], dim=1, index [128])`.
fn describe_call(req: &CheckRequest, args: &Args, shapes: &[(String, Vec<usize>)]) -> String {
    let arg_text = |a: &Arg| match a {
        Arg::Int(i) => i.to_string(),
        Arg::Bool(b) => b.to_string(),
        Arg::Float(x) => x.to_string(),
        Arg::Str(s) => s.clone(),
        Arg::None => "None".into(),
    };
    let mut parts: Vec<String> = Vec::new();
    let Ok(spec) = opargs::spec(&req.op) else {
        return req.op.clone();
    };
    for (name, _) in spec.tensors {
        if let Some((_, shape)) = shapes.iter().find(|(n, _)| n == name) {
            parts.push(format!("{name} {}", fmt_shape(shape)));
        }
        if *name == "input" {
            if let Some(d) = args.get("dim") {
                parts.push(format!("dim={}", arg_text(d)));
            }
        }
    }
    for (name, _) in spec.args {
        if *name == "dim" && !spec.tensors.iter().any(|(n, _)| *n == "input") {
            // no input (repeats-only form): dim follows the tensors
        } else if *name == "dim" || *name == "sparse_grad" {
            continue;
        }
        if let Some(a) = args.get(name) {
            parts.push(format!("{name}={}", arg_text(a)));
        }
    }
    format!("{}({})", req.op, parts.join(", "))
}

fn outputs_text(outs: &[(String, Vec<usize>)]) -> String {
    if let [(_, shape)] = outs {
        return fmt_shape(shape);
    }
    outs.iter()
        .map(|(n, s)| format!("{n} {}", fmt_shape(s)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The command line that checks a fixed call.
fn command_line(req: &CheckRequest, args: &Args, shapes: &[(String, Vec<usize>)]) -> String {
    let mut s = format!("gather check {}", req.op);
    for (name, shape) in shapes {
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let dims = if dims.is_empty() {
            "[]".to_string()
        } else {
            dims.join(",")
        };
        s.push_str(&format!(" --{name}-shape {dims}"));
    }
    if let Some(Arg::Int(d)) = args.get("dim") {
        s.push_str(&format!(" --dim {d}"));
    }
    s
}

/// The rule of the call (`out[i][j] = input[i][index[i][j]]`), from `explain` on small zero
/// tensors of the same ranks; `None` when there is no such small call.
fn rule(req: &CheckRequest, shapes: &[(String, Vec<usize>)], dim: Option<i64>) -> Option<String> {
    let mut tensors = Tensors::new();
    for (name, shape) in shapes {
        let small: Vec<usize> = shape.iter().map(|&s| s.min(2)).collect();
        tensors.insert(name.clone(), Tensor::zeros(role_dtype(name, req), &small));
    }
    let mut opts = req.opts.clone();
    if let Some(d) = dim {
        opts.dim = Some(d.to_string());
    }
    let e = crate::explain::explain(&req.op, &opts, tensors).ok()?;
    Some(e.header)
}

/// One proposed fix.
struct Fix {
    what: String,
    lines: Vec<String>,
    torch: Option<String>,
    shapes: Vec<(String, Vec<usize>)>,
    args: Args,
}

/// Rust method call of a gather-family op, for the fix's code.
fn method_call(op: &str, d: i64, args: &Args) -> Option<String> {
    Some(match op {
        "gather" => format!("input.gather({d}, &index)?"),
        "scatter" if args.get("value").is_some() => {
            format!("input.scatter_value({d}, &index, value)?")
        }
        "scatter" => format!("input.scatter({d}, &index, &src)?"),
        "scatter_add" => format!("input.scatter_add({d}, &index, &src)?"),
        "scatter_reduce" => format!(
            "input.scatter_reduce({d}, &index, &src, Reduce::{}, {})?",
            match args.str("reduce").unwrap_or("sum") {
                "prod" => "Prod",
                "mean" => "Mean",
                "amax" | "max" => "Amax",
                "amin" | "min" => "Amin",
                _ => "Sum",
            },
            args.bool_or("include_self", true).unwrap_or(true)
        ),
        _ => return None,
    })
}

/// Fixes for an index whose rank differs from the input's (gather, scatter*, take_along_dim).
fn rank_fixes(req: &CheckRequest, args: &Args, shapes: &[(String, Vec<usize>)]) -> Vec<Fix> {
    let get = |n: &str| shapes.iter().find(|(k, _)| k == n).map(|(_, s)| s.clone());
    let (Some(input), Some(index)) = (get("input"), get("index")) else {
        return vec![];
    };
    let Some(Arg::Int(dim)) = args.get("dim") else {
        return vec![];
    };
    let n = input.len();
    let k = index.len();
    let d = if *dim < 0 { dim + n as i64 } else { *dim };
    if n == 0 || d < 0 || d >= n as i64 || k == n {
        return vec![];
    }
    let d = d as usize;
    let mut fixes = Vec::new();
    if k < n {
        let mut assigned: Vec<Option<usize>> = vec![None; n];
        let prefix = k == d + 1 && (0..d).all(|a| index[a] <= input[a]);
        if prefix {
            for (a, slot) in assigned.iter_mut().enumerate().take(k) {
                *slot = Some(index[a]);
            }
        } else {
            let mut next = 0;
            for (a, slot) in assigned.iter_mut().enumerate() {
                if next < k && a != d && index[next] <= input[a] {
                    *slot = Some(index[next]);
                    next += 1;
                }
            }
            if next < k {
                return vec![];
            }
        }
        let target: Vec<usize> = (0..n)
            .map(|a| assigned[a].unwrap_or(if a == d { 1 } else { input[a] }))
            .collect();
        let inserted: Vec<usize> = (0..n).filter(|&a| assigned[a].is_none()).collect();
        let broadcast = inserted.iter().any(|&a| a != d && input[a] > 1);
        let tuple = if target.len() == 1 {
            format!("({},)", target[0])
        } else {
            format!(
                "({})",
                target
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let mut rust = "let index = index.view()".to_string();
        let mut torch = "index".to_string();
        for a in &inserted {
            rust.push_str(&format!(".insert_axis(Axis({a}))"));
            torch.push_str(&format!(".unsqueeze({a})"));
        }
        if broadcast {
            rust.push_str(&format!(
                ".broadcast({tuple}).unwrap();  // {}, no copy",
                fmt_shape(&target)
            ));
            torch.push_str(&format!(".expand{tuple}"));
        } else {
            rust.push_str(&format!(";  // {}", fmt_shape(&target)));
        }
        let squeeze = inserted.contains(&d);
        let mut lines = vec![rust];
        let mut torch_call = match req.op.as_str() {
            "gather" => format!("input.gather({dim}, {torch})"),
            "take_along_dim" => format!("torch.take_along_dim(input, {torch}, dim={dim})"),
            "scatter" | "scatter_add" | "scatter_reduce" => {
                format!("input.{}({dim}, {torch}, ...)", req.op)
            }
            op => format!("torch.{op}(input, {dim}, {torch})"),
        };
        let mut fixed = shapes.to_vec();
        for (name, s) in fixed.iter_mut() {
            if name == "index" {
                *s = target.clone();
            }
        }
        if let Ok(Ok(outs)) = dry_run(req, args, &fixed) {
            let out_shape = outs.first().map(|o| o.1.clone()).unwrap_or_default();
            if let Some(call) = method_call(&req.op, *dim, args) {
                lines.push(format!("let out = {call};  // {}", fmt_shape(&out_shape)));
            } else {
                lines.push(format!(
                    "call {} with this index;  // output {}",
                    req.op,
                    fmt_shape(&out_shape)
                ));
            }
            if squeeze && (req.op == "gather" || req.op == "take_along_dim") {
                let mut squeezed = out_shape.clone();
                squeezed.remove(d);
                lines.push(format!(
                    "let out = out.index_axis_move(Axis({d}), 0);  // {}, PyTorch's .squeeze({d})",
                    fmt_shape(&squeezed)
                ));
                torch_call.push_str(&format!(".squeeze({d})"));
            }
        }
        let what = if prefix {
            format!(
                "give the index the shape {}: it picks {} of the {} entries along dim {d} and keeps every other axis whole",
                fmt_shape(&target),
                index[d],
                input[d]
            )
        } else {
            let spread: Vec<String> = inserted
                .iter()
                .filter(|&&a| a != d && input[a] > 1)
                .map(|a| a.to_string())
                .collect();
            format!(
                "give the index the shape {}: one of the {} entries along dim {d} for each position of the index{}",
                fmt_shape(&target),
                input[d],
                if spread.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", repeated over axis {} by broadcasting (no copy)",
                        spread.join(" and ")
                    )
                }
            )
        };
        fixes.push(Fix {
            what,
            lines,
            torch: Some(torch_call),
            shapes: fixed,
            args: args.clone(),
        });
    } else {
        // Extra axes: drop size-1 axes of the index, last first.
        let ones: Vec<usize> = (0..k).filter(|&a| index[a] == 1).collect();
        if ones.len() >= k - n {
            let drop: Vec<usize> = ones[ones.len() - (k - n)..].to_vec();
            let target: Vec<usize> = (0..k)
                .filter(|a| !drop.contains(a))
                .map(|a| index[a])
                .collect();
            let mut rust = "let index = index.view()".to_string();
            let mut torch = "index".to_string();
            for a in drop.iter().rev() {
                rust.push_str(&format!(".index_axis_move(Axis({a}), 0)"));
                torch.push_str(&format!(".squeeze({a})"));
            }
            rust.push_str(&format!(";  // {}", fmt_shape(&target)));
            let mut fixed = shapes.to_vec();
            for (name, s) in fixed.iter_mut() {
                if name == "index" {
                    *s = target.clone();
                }
            }
            fixes.push(Fix {
                what: format!(
                    "drop the index's extra size-1 axes: shape {}",
                    fmt_shape(&target)
                ),
                lines: vec![rust],
                torch: Some(torch),
                shapes: fixed,
                args: args.clone(),
            });
        }
    }
    fixes
}

/// The other dims with which the call is valid.
fn dim_fixes(
    req: &CheckRequest,
    args: &Args,
    shapes: &[(String, Vec<usize>)],
) -> CliResult<Vec<Fix>> {
    let Some(Arg::Int(dim)) = args.get("dim") else {
        return Ok(vec![]);
    };
    let Some((_, input)) = shapes.iter().find(|(n, _)| n == "input") else {
        return Ok(vec![]);
    };
    let n = input.len().max(1) as i64;
    let mut fixes = Vec::new();
    for d in 0..n {
        if d == *dim || d - n == *dim {
            continue;
        }
        let mut a = args.clone();
        a.set("dim", Arg::Int(d));
        if let Ok(outs) = dry_run(req, &a, shapes)? {
            let meaning = rule(req, shapes, Some(d))
                .and_then(|r| r.split_once("): ").map(|(_, m)| format!(", {m}")))
                .unwrap_or_default();
            fixes.push(Fix {
                what: format!(
                    "dim={d} (= {}) is valid: output {}{meaning}",
                    d - n,
                    outputs_text(&outs)
                ),
                lines: vec![],
                torch: None,
                shapes: shapes.to_vec(),
                args: a,
            });
        }
    }
    Ok(fixes)
}

/// The batched-select alternative to an index of too few dims: when the index's leading axes are
/// the input's axes before `dim` (one label per leading position, or `K` picks per row),
/// `select_batched(input, dim, index, batch_dims = dim)` takes the index as it is. The call is
/// run on zero-filled broadcast views (no memory) to confirm it and its output shape; `None` when
/// the idiom does not apply or the call fails.
fn batched_select_fix(
    req: &CheckRequest,
    args: &Args,
    shapes: &[(String, Vec<usize>)],
) -> Option<Vec<String>> {
    if req.op != "gather" {
        return None;
    }
    let get = |n: &str| shapes.iter().find(|(k, _)| k == n).map(|(_, s)| s.clone());
    let (input, index) = (get("input")?, get("index")?);
    let Some(Arg::Int(dim)) = args.get("dim") else {
        return None;
    };
    let n = input.len() as i64;
    let d = if *dim < 0 { dim + n } else { *dim };
    if d < 1 || d >= n || index.len() >= input.len() || index.len() < d as usize {
        return None;
    }
    let b = d as usize;
    if index[..b] != input[..b] {
        return None;
    }
    let zero_in = ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[1; 1]));
    let zero_in = zero_in.broadcast(ndarray::IxDyn(&input))?;
    let zero_idx = ndarray::ArrayD::<i64>::zeros(ndarray::IxDyn(&[1; 1]));
    let mut out_shape = input[..b].to_vec();
    out_shape.extend_from_slice(&index[b..]);
    out_shape.extend_from_slice(&input[b + 1..]);
    if out_shape.iter().product::<usize>() <= MAX_DRY_RUN {
        let zero_idx = zero_idx.broadcast(ndarray::IxDyn(&index))?;
        let got = gather::select_batched(&zero_in, d as isize, &zero_idx, b).ok()?;
        if got.shape() != out_shape.as_slice() {
            return None;
        }
    }
    let out = fmt_shape(&out_shape);
    Some(vec![
        format!(
            "a batched select takes the index {} as it is and returns {out} directly, {}",
            fmt_shape(&index),
            if index.len() == b {
                "without the size-1 axis"
            } else {
                "without inserting and broadcasting axes"
            }
        ),
        format!("    let out = gather::select_batched(&input, {d}, &index, {b})?;  // {out}"),
        format!("  TensorFlow: tf.gather(input, index, axis={d}, batch_dims={b})"),
    ])
}

/// Checks the call, prints the verdict and, for an invalid call, the fixes. Returns whether the
/// call is valid.
pub fn check(req: &CheckRequest, out: &mut dyn Write) -> CliResult<bool> {
    let spec = opargs::spec(&req.op)?;
    let names: Vec<&str> = req.shapes.iter().map(|(n, _)| n.as_str()).collect();
    opargs::check_tensors(spec, &names)?;
    let args = req.opts.to_args(spec, &names)?;
    let call = describe_call(req, &args, &req.shapes);
    let dtypes = if names.contains(&"index") {
        format!("{} data, {} index", req.dtype, req.index_dtype)
    } else {
        format!("{} data", req.dtype)
    };
    match dry_run(req, &args, &req.shapes)? {
        Ok(outs) => {
            writeln!(out, "{call}: valid ({dtypes})")?;
            writeln!(out, "output: {}", outputs_text(&outs))?;
            if let Some(r) = rule(req, &req.shapes, None) {
                writeln!(out, "rule: {r}")?;
            }
            let others = dim_fixes(req, &args, &req.shapes)?;
            if !others.is_empty() {
                writeln!(out, "other dims that are valid here:")?;
                for f in others {
                    writeln!(out, "  {}", f.what)?;
                }
            }
            Ok(true)
        }
        Err(e) => {
            writeln!(out, "{call}: invalid ({dtypes})")?;
            writeln!(out, "error: {}", e.message())?;
            if let Some(h) = e.hint() {
                writeln!(out, "hint: {h}")?;
            }
            let mut fixes = rank_fixes(req, &args, &req.shapes);
            if fixes.is_empty() && e.kind() != gather::ErrorKind::DimOutOfRange {
                fixes = dim_fixes(req, &args, &req.shapes)?;
            }
            let mut shown = 0;
            for f in &fixes {
                let verdict = match dry_run(req, &f.args, &f.shapes)? {
                    Ok(outs) => format!("valid, output {}", outputs_text(&outs)),
                    Err(_) => continue, // only fixes that work are proposed
                };
                shown += 1;
                writeln!(out)?;
                writeln!(out, "fix {shown}: {}", f.what)?;
                for l in &f.lines {
                    writeln!(out, "    {l}")?;
                }
                if let Some(t) = &f.torch {
                    writeln!(out, "  PyTorch: {t}")?;
                }
                writeln!(
                    out,
                    "  check:   {}  → {verdict}",
                    command_line(req, &f.args, &f.shapes)
                )?;
            }
            if let Some(lines) = batched_select_fix(req, &args, &req.shapes) {
                shown += 1;
                writeln!(out)?;
                writeln!(out, "fix {shown}: {}", lines[0])?;
                for l in &lines[1..] {
                    writeln!(out, "{l}")?;
                }
            }
            if shown == 0 && e.kind() == gather::ErrorKind::DimOutOfRange {
                let n = req
                    .shapes
                    .iter()
                    .find(|(n, _)| n == "input")
                    .map(|(_, s)| s.len().max(1))
                    .unwrap_or(1);
                writeln!(
                    out,
                    "\nthe valid dims are 0..={} (or -{n}..=-1 counting from the end)",
                    n - 1
                )?;
            }
            Ok(false)
        }
    }
}

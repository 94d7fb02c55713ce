//! `gather explain`: runs one op on small tensors and prints, for every output element, where it
//! came from, in the form of the tutorials:
//!
//! ```text
//! out[0][1] = input[0][index[0][1]] = input[0][2] = 30
//! ```
//!
//! For the scatter-like ops (scatter*, index_add/copy/fill/reduce, put, masked_scatter) it prints
//! where each source element lands, then how every destination was computed, duplicates
//! included (`out[0][2] = input[0][2] + src[0][1] + src[1][1] = 0 + 2 + 4 = 6`).
//!
//! The values come from the library's own result (`gather::dynamic::call`); the mapping is
//! derived from the op's definition and the index. The same [`Explanation`] drives the picture
//! of [`crate::svg`].
//!
//! ```
//! use gather_cli::explain::explain;
//! use gather_cli::opargs::OpOptions;
//! use gather_cli::tensor_io::{parse_inline, Role};
//! let mut inputs = std::collections::BTreeMap::new();
//! inputs.insert("input".to_string(), parse_inline("[[10, 20, 30], [40, 50, 60]]", Role::Data, None).unwrap());
//! inputs.insert("index".to_string(), parse_inline("[[0, 2], [1, 0]]", Role::Index, None).unwrap());
//! let opts = OpOptions { dim: Some("1".into()), ..Default::default() };
//! let e = explain("gather", &opts, inputs).unwrap();
//! assert!(e.lines().contains(&"out[0][1] = input[0][index[0][1]] = input[0][2] = 30".to_string()));
//! ```

use std::collections::BTreeMap;
use std::io::Write;

use gather::dynamic::{self, Arg, Args, Tensors};

use crate::compare::Flat;
use crate::fail::{CliResult, Failure};
use crate::opargs::{self, OpOptions};
use crate::tensor_io::show_flat;

/// The most elements a tensor of `explain` may have.
pub const MAX_ELEMENTS: usize = 200_000;

/// A cell of a tensor: its name and its row-major position.
pub type Cell = (String, usize);

/// Cell `cell` is drawn in the colours of `from` (in order; several for a reduction).
#[derive(Debug, Clone, PartialEq)]
pub struct Tint {
    /// The cell being coloured (an output or index cell).
    pub cell: Cell,
    /// The cells whose colours it takes.
    pub from: Vec<Cell>,
}

/// A titled list of lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Printed above the lines, if any.
    pub title: Option<String>,
    /// One line per element.
    pub lines: Vec<String>,
}

/// Everything `explain` prints and draws for one call.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// The op's name.
    pub op: String,
    /// The call and its rule, e.g. `gather(input, dim=1, index): out[i][j] = input[i][index[i][j]]`.
    pub header: String,
    /// The tensors given, in the op's order, as shown names (`input`, `index`, `src` ...).
    pub inputs: Vec<(String, Flat)>,
    /// The results, as shown names (`out`, or `values` and `indices`).
    pub outputs: Vec<(String, Flat)>,
    /// The scalar written by value forms (scatter --value, index_fill), as text.
    pub value: Option<String>,
    /// The mapping lines.
    pub sections: Vec<Section>,
    /// How to colour output and index cells.
    pub tints: Vec<Tint>,
    /// The tensors whose cells carry their own colours (the values that move).
    pub palette: Vec<String>,
}

impl Explanation {
    /// All mapping lines, in order.
    pub fn lines(&self) -> Vec<String> {
        self.sections
            .iter()
            .flat_map(|s| s.lines.iter().cloned())
            .collect()
    }

    /// Prints the explanation; each section shows at most `max_lines` lines (`None`: all).
    pub fn print(&self, out: &mut dyn Write, max_lines: Option<usize>) -> std::io::Result<()> {
        writeln!(out, "{}", self.header)?;
        for (name, f) in &self.inputs {
            writeln!(out, "{}", show_named(name, f))?;
        }
        if let Some(v) = &self.value {
            writeln!(out, "value = {v}")?;
        }
        for s in &self.sections {
            if let Some(t) = &s.title {
                writeln!(out, "{t}")?;
            }
            let n = max_lines.unwrap_or(usize::MAX).min(s.lines.len());
            for l in &s.lines[..n] {
                writeln!(out, "{l}")?;
            }
            if n < s.lines.len() {
                writeln!(
                    out,
                    "... {} more lines (--all prints every line)",
                    s.lines.len() - n
                )?;
            }
        }
        for (name, f) in &self.outputs {
            writeln!(out, "{}", show_named(name, f))?;
        }
        Ok(())
    }
}

/// `name [shape] dtype = values`.
fn show_named(name: &str, f: &Flat) -> String {
    format!(
        "{name} {} {} = {}",
        gather::error::fmt_shape(&f.shape),
        f.dtype,
        show_flat(f)
    )
}

/// The ops `explain` can explain (the others run with `gather run`).
pub const EXPLAINED: &[&str] = &[
    "gather",
    "take_along_dim",
    "take",
    "index_select",
    "select_batched",
    "masked_select",
    "sort",
    "topk",
    "argsort",
    "repeat_interleave",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index_add",
    "index_copy",
    "index_fill",
    "index_reduce",
    "put",
    "masked_scatter",
];

/// The error for an op of the library that `explain` does not cover.
fn not_explained(op: &str) -> Failure {
    Failure::input(format!("explain does not cover {op} (it is an op of the library, but explain has no element-by-element mapping for it)"))
        .with_hint(format!("run it with `gather run {op} ... -o out.npy`; explain covers {}", EXPLAINED.join(", ")))
}

/// Runs `op` with `opts` on `inputs` and explains the result.
///
/// An op of the library that `explain` does not cover is a clear error, before anything runs:
///
/// ```
/// let e = gather_cli::explain::explain("bincount", &Default::default(), Default::default()).unwrap_err();
/// assert!(e.message.contains("explain does not cover bincount"));
/// ```
pub fn explain(op: &str, opts: &OpOptions, inputs: Tensors) -> CliResult<Explanation> {
    let spec = opargs::spec(op)?;
    if !EXPLAINED.contains(&op) {
        return Err(not_explained(op));
    }
    let names: Vec<&str> = inputs.keys().map(String::as_str).collect();
    opargs::check_tensors(spec, &names)?;
    let args = opts.to_args(spec, &names)?;
    if matches!(args.get("bounds"), Some(Arg::Str(b)) if b != "error") {
        return Err(Failure::input(format!(
            "explain follows PyTorch's rule of {op}, not --bounds policies"
        ))
        .with_hint("run the call with `gather run`, or explain it without --bounds"));
    }
    for (name, t) in &inputs {
        if t.len() > MAX_ELEMENTS {
            return Err(too_large(name, t.len()));
        }
    }
    let outputs = dynamic::call(op, &args, &inputs)?;
    explain_outputs(op, &args, &inputs, &outputs)
}

/// Explains how `outputs` (named as `gather::dynamic::call` names them) follow from `inputs`
/// for a call of `op` with `args`. [`explain`] passes the library's own result; a test can
/// pass PyTorch's.
///
/// ```
/// use gather::dynamic::{Arg, Args, Tensor, Tensors};
/// use ndarray::array;
/// let mut inputs = Tensors::new();
/// inputs.insert("input".into(), Tensor::from(array![[4i64, 3, 5], [6, 7, 8]].into_dyn()));
/// inputs.insert("index".into(), Tensor::from(array![0i64, -1].into_dyn()));
/// let out = vec![("output".to_string(), Tensor::from(array![4i64, 8].into_dyn()))];
/// let e = gather_cli::explain::explain_outputs("take", &Args::default(), &inputs, &out).unwrap();
/// assert_eq!(e.lines()[1], "out[1] = input.flat[index[1]] = input[1][2] = 8  (index -1 wraps to 5)");
/// ```
pub fn explain_outputs(
    op: &str,
    args: &Args,
    inputs: &Tensors,
    outputs: &[(String, dynamic::Tensor)],
) -> CliResult<Explanation> {
    let spec = opargs::spec(op)?;
    for (name, t) in outputs {
        if t.len() > MAX_ELEMENTS {
            return Err(too_large(name, t.len()));
        }
    }
    let flats: BTreeMap<String, Flat> = inputs
        .iter()
        .map(|(n, t)| (n.clone(), Flat::of(t)))
        .collect();
    let shown_outputs: Vec<(String, Flat)> = outputs
        .iter()
        .map(|(n, t)| {
            (
                if n == "output" {
                    "out".to_string()
                } else {
                    n.clone()
                },
                Flat::of(t),
            )
        })
        .collect();
    let ctx = Ctx {
        op,
        args,
        t: &flats,
        out: &shown_outputs,
    };
    let body = match op {
        "gather" => gather_like(&ctx, false)?,
        "take_along_dim" => match args.get("dim") {
            Some(Arg::Int(_)) => gather_like(&ctx, true)?,
            _ => take_flat(&ctx, true)?,
        },
        "take" => take_flat(&ctx, false)?,
        "index_select" => index_select(&ctx)?,
        "select_batched" => select_batched(&ctx)?,
        "masked_select" => masked_select(&ctx)?,
        "sort" | "topk" => sort_like(&ctx)?,
        "argsort" => argsort(&ctx)?,
        "repeat_interleave" => repeat_interleave(&ctx)?,
        "scatter" | "scatter_add" | "scatter_reduce" => scatter_like(&ctx)?,
        "index_add" | "index_copy" | "index_fill" | "index_reduce" => index_write(&ctx)?,
        "put" => put(&ctx)?,
        "masked_scatter" => masked_scatter(&ctx)?,
        _ => return Err(not_explained(op)),
    };
    let mut shown_inputs: Vec<(String, Flat)> = Vec::new();
    for (name, _) in spec.tensors {
        if let Some(f) = flats.get(*name) {
            shown_inputs.push((name.to_string(), f.clone()));
        }
    }
    Ok(Explanation {
        op: op.to_string(),
        header: body.header,
        inputs: shown_inputs,
        outputs: shown_outputs,
        value: body.value,
        sections: body.sections,
        tints: body.tints,
        palette: body.palette,
    })
}

fn too_large(name: &str, n: usize) -> Failure {
    Failure::input(format!(
        "explain is for small tensors (at most {MAX_ELEMENTS} elements), but {name} has {n}"
    ))
    .with_hint("run the op on the whole data with `gather run`, and explain a slice of it")
}

struct Ctx<'a> {
    op: &'a str,
    args: &'a Args,
    t: &'a BTreeMap<String, Flat>,
    out: &'a [(String, Flat)],
}

struct Body {
    header: String,
    value: Option<String>,
    sections: Vec<Section>,
    tints: Vec<Tint>,
    palette: Vec<String>,
}

impl Ctx<'_> {
    fn tensor(&self, name: &str) -> CliResult<&Flat> {
        self.t
            .get(name)
            .ok_or_else(|| Failure::input(format!("{} needs --{name}", self.op)))
    }

    /// `dim` normalised against a rank (a 0-d tensor counts as 1-d).
    fn dim(&self, ndim: usize) -> CliResult<usize> {
        let n = ndim.max(1) as i64;
        let d = self.args.int("dim")?;
        let d = if d < 0 { d + n } else { d };
        if (0..n).contains(&d) {
            Ok(d as usize)
        } else {
            Err(Failure::input(format!(
                "dim {d} is out of range for {n} dims"
            )))
        }
    }

    fn dim_text(&self) -> String {
        match self.args.get("dim") {
            Some(Arg::Int(d)) => d.to_string(),
            _ => "None".into(),
        }
    }

    fn output(&self, i: usize) -> CliResult<&Flat> {
        self.out
            .get(i)
            .map(|(_, f)| f)
            .ok_or_else(|| Failure::input(format!("{} returned no output {i}", self.op)))
    }
}

/// A mapping the explanation cannot follow: the library returned something the op's definition
/// does not predict (this is a bug in either).
fn mismatch(op: &str, what: &str) -> Failure {
    Failure::input(format!("cannot explain this {op} call: {what}"))
        .with_hint("this is a bug: please report the call")
}

// ---------------------------------------------------------------------------------------------
// Coordinates and labels

/// The row-major coordinates of flat position `i` in `shape`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for (d, &s) in shape.iter().enumerate().rev() {
        if s > 0 {
            c[d] = i % s;
            i /= s;
        }
    }
    c
}

/// The flat position of `coords` in `shape`, if they are inside it.
pub fn ravel(coords: &[usize], shape: &[usize]) -> Option<usize> {
    if coords.len() != shape.len() {
        return None;
    }
    coords
        .iter()
        .zip(shape)
        .try_fold(0usize, |acc, (&c, &s)| (c < s).then_some(acc * s + c))
}

/// `name[a][b]`, or `name` for no coordinates.
pub fn label(name: &str, coords: &[usize]) -> String {
    let parts: Vec<String> = coords.iter().map(|c| c.to_string()).collect();
    label_parts(name, &parts)
}

fn label_parts(name: &str, parts: &[String]) -> String {
    let mut s = name.to_string();
    for p in parts {
        s.push('[');
        s.push_str(p);
        s.push(']');
    }
    s
}

/// The coordinates of a tensor of `shape` seen as at least 1-d (`[]` → `[0]`).
fn view_coords(coords: Vec<usize>) -> Vec<usize> {
    if coords.is_empty() { vec![0] } else { coords }
}

/// `shape` seen as at least 1-d.
fn view_shape(shape: &[usize]) -> Vec<usize> {
    if shape.is_empty() {
        vec![1]
    } else {
        shape.to_vec()
    }
}

/// The label of a cell given by view coordinates: a 0-d tensor has no brackets.
fn view_label(name: &str, f: &Flat, view: &[usize]) -> String {
    if f.shape.is_empty() {
        name.to_string()
    } else {
        label(name, view)
    }
}

/// Index symbols for a formula: i, j, k, l, m, n, then i6, i7 ...
fn symbols(n: usize) -> Vec<String> {
    let base = ["i", "j", "k", "l", "m", "n"];
    (0..n)
        .map(|a| {
            base.get(a)
                .map(|s| s.to_string())
                .unwrap_or_else(|| format!("i{a}"))
        })
        .collect()
}

/// The coordinates of `at` (a shape broadcast to `full`) for a position of `full`.
fn broadcast_coords(full: &[usize], pos: &[usize], shape: &[usize]) -> Vec<usize> {
    let off = full.len() - shape.len();
    (0..shape.len())
        .map(|i| if shape[i] == 1 { 0 } else { pos[off + i] })
        .collect()
}

fn index_at(op: &str, f: &Flat, i: usize) -> CliResult<i64> {
    if i >= f.len() {
        return Err(mismatch(op, "an index position outside the index"));
    }
    f.as_index(i)
        .ok_or_else(|| mismatch(op, "an index that is not an integer"))
}

fn bool_at(f: &Flat, i: usize) -> bool {
    f.bits.get(i).is_some_and(|&b| b != 0)
}

fn arg_text(a: Option<&Arg>) -> String {
    match a {
        Some(Arg::Bool(b)) => b.to_string(),
        Some(Arg::Int(i)) => i.to_string(),
        Some(Arg::Float(x)) => x.to_string(),
        Some(Arg::Str(s)) => s.clone(),
        Some(Arg::None) | None => "None".into(),
    }
}

fn cell(name: &str, i: usize) -> Cell {
    (name.to_string(), i)
}

// ---------------------------------------------------------------------------------------------
// Read ops: every output element is one input element.

/// gather, and take_along_dim with an integer dim (which broadcasts and wraps).
fn gather_like(c: &Ctx, along: bool) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let ix = c.tensor("index")?;
    let out = c.output(0)?;
    let d = c.dim(x.shape.len())?;
    let xs = view_shape(&x.shape);
    let is = view_shape(&ix.shape);
    let sym = symbols(xs.len());
    let mut rule = sym.clone();
    rule[d] = label("index", &[]) + &sym.iter().map(|s| format!("[{s}]")).collect::<String>();
    let name = if along {
        "take_along_dim(input, index, dim="
    } else {
        "gather(input, dim="
    };
    let header = format!(
        "{}{}{}: {} = {}{}",
        name,
        c.dim_text(),
        if along { ")" } else { ", index)" },
        label_parts("out", &sym),
        label_parts("input", &rule),
        if along {
            "  (index taken mod the size of dim; size-1 axes broadcast)"
        } else {
            ""
        }
    );
    let mut lines = Vec::new();
    let mut tints = Vec::new();
    for p in 0..out.len() {
        let pv = view_coords(unravel(p, &out.shape));
        let q: Vec<usize> = (0..is.len())
            .map(|a| {
                if along && a != d && is[a] == 1 {
                    0
                } else {
                    pv[a]
                }
            })
            .collect();
        let qf = ravel(&q, &is).ok_or_else(|| mismatch(c.op, "output and index shapes differ"))?;
        let v = index_at(c.op, ix, qf)?;
        let size = xs[d] as i64;
        let k = if along { v.rem_euclid(size.max(1)) } else { v };
        let mut r: Vec<usize> = (0..xs.len())
            .map(|a| {
                if along && a != d && xs[a] == 1 {
                    0
                } else {
                    pv[a]
                }
            })
            .collect();
        r[d] = usize::try_from(k).map_err(|_| mismatch(c.op, "a negative index was accepted"))?;
        let rf = ravel(&r, &xs)
            .ok_or_else(|| mismatch(c.op, "an index outside the input was accepted"))?;
        let mut parts: Vec<String> = r.iter().map(|v| v.to_string()).collect();
        parts[d] = view_label("index", ix, &q);
        let via = if x.shape.is_empty() {
            String::new()
        } else {
            format!(" = {}", label_parts("input", &parts))
        };
        let wrap = if k != v {
            format!("  (index {v} wraps to {k})")
        } else {
            String::new()
        };
        lines.push(format!(
            "{}{via} = {} = {}{wrap}",
            view_label("out", out, &pv),
            view_label("input", x, &r),
            out.show(p)
        ));
        tints.push(Tint {
            cell: cell("out", p),
            from: vec![cell("input", rf)],
        });
        if !along || ix.shape == out.shape {
            tints.push(Tint {
                cell: cell("index", qf),
                from: vec![cell("input", rf)],
            });
        }
    }
    Ok(Body {
        header,
        value: None,
        sections: vec![Section { title: None, lines }],
        tints,
        palette: vec!["input".into()],
    })
}

/// take (negative indices wrap), and take_along_dim with dim=None (no wrapping).
fn take_flat(c: &Ctx, along: bool) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let ix = c.tensor("index")?;
    let out = c.output(0)?;
    let header = if along {
        "take_along_dim(input, index, dim=None): out[k] = input.flat[index.flat[k]]  (input and index read in row-major order)".to_string()
    } else {
        let sym = symbols(ix.shape.len());
        format!(
            "take(input, index): {} = input.flat[{}]  (input read in row-major order; negative indices count from the end)",
            label_parts("out", &sym),
            label_parts("index", &sym)
        )
    };
    let n = x.len() as i64;
    let mut lines = Vec::new();
    let mut tints = Vec::new();
    if out.len() != ix.len() {
        return Err(mismatch(
            c.op,
            "the output does not have one element per index",
        ));
    }
    for p in 0..out.len() {
        let v = index_at(c.op, ix, p)?;
        let k = if v < 0 && !along { v + n } else { v };
        let kf = usize::try_from(k)
            .ok()
            .filter(|&k| k < x.len())
            .ok_or_else(|| mismatch(c.op, "an index outside the input was accepted"))?;
        let wrap = if k != v {
            format!("  (index {v} wraps to {k})")
        } else {
            String::new()
        };
        let ic = unravel(p, &ix.shape);
        let oc = unravel(p, &out.shape);
        lines.push(format!(
            "{} = input.flat[{}] = {} = {}{wrap}",
            label("out", &oc),
            label("index", &ic),
            label("input", &unravel(kf, &x.shape)),
            out.show(p)
        ));
        tints.push(Tint {
            cell: cell("out", p),
            from: vec![cell("input", kf)],
        });
        tints.push(Tint {
            cell: cell("index", p),
            from: vec![cell("input", kf)],
        });
    }
    Ok(Body {
        header,
        value: None,
        sections: vec![Section { title: None, lines }],
        tints,
        palette: vec!["input".into()],
    })
}

fn index_select(c: &Ctx) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let ix = c.tensor("index")?;
    let out = c.output(0)?;
    let d = c.dim(x.shape.len())?;
    let xs = view_shape(&x.shape);
    let sym = symbols(xs.len());
    let mut rule = sym.clone();
    rule[d] = format!("index[{}]", sym[d]);
    let header = format!(
        "index_select(input, dim={}, index): {} = {}",
        c.dim_text(),
        label_parts("out", &sym),
        label_parts("input", &rule)
    );
    let mut lines = Vec::new();
    let mut tints = Vec::new();
    for p in 0..out.len() {
        let pv = view_coords(unravel(p, &out.shape));
        let j = pv.get(d).copied().unwrap_or(0);
        let v = index_at(c.op, ix, j)?;
        let mut r = pv.clone();
        r[d] = usize::try_from(v).map_err(|_| mismatch(c.op, "a negative index was accepted"))?;
        let rf = ravel(&r, &xs)
            .ok_or_else(|| mismatch(c.op, "an index outside the input was accepted"))?;
        let mut parts: Vec<String> = r.iter().map(|v| v.to_string()).collect();
        parts[d] = view_label("index", ix, &[j]);
        let via = if x.shape.is_empty() {
            String::new()
        } else {
            format!(" = {}", label_parts("input", &parts))
        };
        lines.push(format!(
            "{}{via} = {} = {}",
            view_label("out", out, &pv),
            view_label("input", x, &r),
            out.show(p)
        ));
        tints.push(Tint {
            cell: cell("out", p),
            from: vec![cell("input", rf)],
        });
    }
    Ok(Body {
        header,
        value: None,
        sections: vec![Section { title: None, lines }],
        tints,
        palette: vec!["input".into()],
    })
}

/// select_batched: `out[b.., k.., t..] = input[b.., p.., index[b.., k..], t..]`.
fn select_batched(c: &Ctx) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let ix = c.tensor("index")?;
    let out = c.output(0)?;
    let d = c.dim(x.shape.len())?;
    let b = usize::try_from(c.args.int("batch_dims")?)
        .map_err(|_| mismatch(c.op, "a negative batch_dims was accepted"))?;
    let k = ix.shape.len().saturating_sub(b);
    let sym = symbols(out.shape.len());
    let mut isym: Vec<String> = sym[..b.min(sym.len())].to_vec();
    isym.extend_from_slice(&sym[d.min(sym.len())..(d + k).min(sym.len())]);
    let mut rule: Vec<String> = sym[..d.min(sym.len())].to_vec();
    rule.push(label_parts("index", &isym));
    rule.extend_from_slice(&sym[(d + k).min(sym.len())..]);
    let header = format!(
        "select_batched(input, dim={}, index, batch_dims={b}): {} = {}",
        c.dim_text(),
        label_parts("out", &sym),
        label_parts("input", &rule)
    );
    let mut lines = Vec::new();
    let mut tints = Vec::new();
    for p in 0..out.len() {
        let pc = unravel(p, &out.shape);
        let mut ic: Vec<usize> = pc[..b].to_vec();
        ic.extend_from_slice(&pc[d..d + k]);
        let jf = ravel(&ic, &ix.shape)
            .ok_or_else(|| mismatch(c.op, "an output outside the index's positions"))?;
        let v = index_at(c.op, ix, jf)?;
        let mut r: Vec<usize> = pc[..d].to_vec();
        r.push(usize::try_from(v).map_err(|_| mismatch(c.op, "a negative index was accepted"))?);
        r.extend_from_slice(&pc[d + k..]);
        let rf = ravel(&r, &x.shape)
            .ok_or_else(|| mismatch(c.op, "an index outside the input was accepted"))?;
        let mut parts: Vec<String> = r.iter().map(|v| v.to_string()).collect();
        parts[d] = label("index", &ic);
        lines.push(format!(
            "{} = {} = {} = {}",
            label("out", &pc),
            label_parts("input", &parts),
            label("input", &r),
            out.show(p)
        ));
        tints.push(Tint {
            cell: cell("out", p),
            from: vec![cell("input", rf)],
        });
        tints.push(Tint {
            cell: cell("index", jf),
            from: vec![cell("input", rf)],
        });
    }
    Ok(Body {
        header,
        value: None,
        sections: vec![Section { title: None, lines }],
        tints,
        palette: vec!["input".into()],
    })
}

fn masked_select(c: &Ctx) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let m = c.tensor("mask")?;
    let out = c.output(0)?;
    let full = gather::dims::broadcast_shapes(&x.shape, &m.shape)?;
    let header = "masked_select(input, mask): out = the elements of input where mask is true, in row-major order (input and mask broadcast together)".to_string();
    let mut lines = Vec::new();
    let mut tints = Vec::new();
    let total: usize = full.iter().product();
    let mut k = 0;
    for b in 0..total {
        let bc = unravel(b, &full);
        let mc = broadcast_coords(&full, &bc, &m.shape);
        let mf = ravel(&mc, &m.shape).ok_or_else(|| mismatch(c.op, "mask shape"))?;
        if !bool_at(m, mf) {
            continue;
        }
        let xc = broadcast_coords(&full, &bc, &x.shape);
        let xf = ravel(&xc, &x.shape).ok_or_else(|| mismatch(c.op, "input shape"))?;
        if k >= out.len() {
            return Err(mismatch(c.op, "more true mask elements than outputs"));
        }
        lines.push(format!(
            "{} = {} = {}  ({} is true)",
            label("out", &[k]),
            label("input", &xc),
            out.show(k),
            label("mask", &mc)
        ));
        tints.push(Tint {
            cell: cell("out", k),
            from: vec![cell("input", xf)],
        });
        tints.push(Tint {
            cell: cell("mask", mf),
            from: vec![cell("input", xf)],
        });
        k += 1;
    }
    if k != out.len() {
        return Err(mismatch(c.op, "fewer true mask elements than outputs"));
    }
    Ok(Body {
        header,
        value: None,
        sections: vec![Section { title: None, lines }],
        tints,
        palette: vec!["input".into()],
    })
}

fn sort_like(c: &Ctx) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let values = c.output(0)?;
    let indices = c.output(1)?;
    let d = c.dim(x.shape.len())?;
    let xs = view_shape(&x.shape);
    let sym = symbols(xs.len());
    let mut rule = sym.clone();
    rule[d] = label_parts("indices", &sym);
    let what = if c.op == "topk" {
        let largest = matches!(c.args.get("largest"), Some(Arg::Bool(true)));
        format!(
            "topk(input, k={}, dim={}, largest={largest}, sorted={}): the {} {} along dim {d}",
            arg_text(c.args.get("k")),
            c.dim_text(),
            arg_text(c.args.get("sorted")),
            arg_text(c.args.get("k")),
            if largest { "largest" } else { "smallest" }
        )
    } else {
        let desc = matches!(c.args.get("descending"), Some(Arg::Bool(true)));
        format!(
            "sort(input, dim={}, descending={desc}, stable={}): {} along dim {d}",
            c.dim_text(),
            arg_text(c.args.get("stable")),
            if desc {
                "largest first"
            } else {
                "smallest first"
            }
        )
    };
    let header = format!(
        "{what}; {} = {}",
        label_parts("values", &sym),
        label_parts("input", &rule)
    );
    let mut lines = Vec::new();
    let mut tints = Vec::new();
    if indices.len() != values.len() {
        return Err(mismatch(c.op, "values and indices differ in size"));
    }
    for p in 0..values.len() {
        let pv = view_coords(unravel(p, &values.shape));
        let k = index_at(c.op, indices, p)?;
        let mut r = pv.clone();
        r[d] = usize::try_from(k).map_err(|_| mismatch(c.op, "a negative index"))?;
        let rf = ravel(&r, &xs).ok_or_else(|| mismatch(c.op, "an index outside the input"))?;
        let mut parts: Vec<String> = r.iter().map(|v| v.to_string()).collect();
        parts[d] = view_label("indices", indices, &pv);
        let via = if x.shape.is_empty() {
            String::new()
        } else {
            format!(" = {}", label_parts("input", &parts))
        };
        lines.push(format!(
            "{}{via} = {} = {}",
            view_label("values", values, &pv),
            view_label("input", x, &r),
            values.show(p)
        ));
        tints.push(Tint {
            cell: cell("values", p),
            from: vec![cell("input", rf)],
        });
        tints.push(Tint {
            cell: cell("indices", p),
            from: vec![cell("input", rf)],
        });
    }
    Ok(Body {
        header,
        value: None,
        sections: vec![Section { title: None, lines }],
        tints,
        palette: vec!["input".into()],
    })
}

fn argsort(c: &Ctx) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let out = c.output(0)?;
    let d = c.dim(x.shape.len())?;
    let xs = view_shape(&x.shape);
    let sym = symbols(xs.len());
    let mut rule = sym.clone();
    rule[d] = label_parts("out", &sym);
    let desc = matches!(c.args.get("descending"), Some(Arg::Bool(true)));
    let header = format!(
        "argsort(input, dim={}, descending={desc}, stable={}): {} runs {} along dim {d} as {} does",
        c.dim_text(),
        arg_text(c.args.get("stable")),
        label_parts("input", &rule),
        if desc {
            "from the largest"
        } else {
            "from the smallest"
        },
        sym[d]
    );
    let mut lines = Vec::new();
    let mut tints = Vec::new();
    for p in 0..out.len() {
        let pv = view_coords(unravel(p, &out.shape));
        let k = index_at(c.op, out, p)?;
        let mut r = pv.clone();
        r[d] = usize::try_from(k).map_err(|_| mismatch(c.op, "a negative index"))?;
        let rf = ravel(&r, &xs).ok_or_else(|| mismatch(c.op, "an index outside the input"))?;
        lines.push(format!(
            "{} = {k}: sorted position {} holds {} = {}",
            view_label("out", out, &pv),
            pv[d],
            view_label("input", x, &r),
            x.show(rf)
        ));
        tints.push(Tint {
            cell: cell("out", p),
            from: vec![cell("input", rf)],
        });
    }
    Ok(Body {
        header,
        value: None,
        sections: vec![Section { title: None, lines }],
        tints,
        palette: vec!["input".into()],
    })
}

fn repeat_interleave(c: &Ctx) -> CliResult<Body> {
    let out = c.output(0)?;
    let reps_tensor = c.t.get("repeats");
    let count = |s: usize| -> CliResult<usize> {
        let r = match reps_tensor {
            Some(r) if r.len() == 1 => index_at(c.op, r, 0)?,
            Some(r) => index_at(c.op, r, s)?,
            None => c.args.int("repeats")?,
        };
        usize::try_from(r).map_err(|_| mismatch(c.op, "a negative repeat count was accepted"))
    };
    let reps_label = |s: usize| match reps_tensor {
        Some(r) if r.len() == 1 => view_label("repeats", r, &[0]),
        Some(r) => view_label("repeats", r, &[s]),
        None => "repeats".to_string(),
    };
    let mut lines = Vec::new();
    let mut tints = Vec::new();
    let Some(x) = c.t.get("input") else {
        // repeats-only form: out = [0]*r0 + [1]*r1 + ...
        let r = reps_tensor.ok_or_else(|| mismatch(c.op, "no repeats"))?;
        let mut pos = 0;
        for s in 0..r.len() {
            let n = count(s)?;
            for copy in 0..n {
                if pos >= out.len() {
                    return Err(mismatch(c.op, "the output is shorter than the repeats say"));
                }
                lines.push(format!(
                    "out[{pos}] = {s}  ({} = {n}: copy {} of {n})",
                    reps_label(s),
                    copy + 1
                ));
                tints.push(Tint {
                    cell: cell("out", pos),
                    from: vec![cell("repeats", s)],
                });
                pos += 1;
            }
        }
        return Ok(Body {
            header: "repeat_interleave(repeats): out = [0] * repeats[0] + [1] * repeats[1] + ..."
                .into(),
            value: None,
            sections: vec![Section { title: None, lines }],
            tints,
            palette: vec!["repeats".into()],
        });
    };
    let flat = matches!(c.args.get("dim"), None | Some(Arg::None));
    // The input seen along the repeated axis: slices `s` of length `slices`.
    let (xs, d) = if flat {
        (vec![x.len()], 0)
    } else {
        (view_shape(&x.shape), c.dim(x.shape.len())?)
    };
    let mut source_of = Vec::new(); // position along dim in out -> (slice, copy, of)
    for s in 0..xs[d] {
        let n = count(s)?;
        for copy in 0..n {
            source_of.push((s, copy, n));
        }
    }
    let os = if flat {
        vec![out.len()]
    } else {
        view_shape(&out.shape)
    };
    let header = if flat {
        format!(
            "repeat_interleave(input, repeats={}, dim=None): the flattened input, each element repeated",
            arg_text(c.args.get("repeats")).replace("None", "tensor")
        )
    } else {
        format!(
            "repeat_interleave(input, repeats, dim={}): each slice input[..][s][..] along dim {d} repeated",
            c.dim_text()
        )
    };
    for p in 0..out.len() {
        let pv = unravel(p, &os);
        let j = pv.get(d).copied().unwrap_or(0);
        let &(s, copy, n) = source_of
            .get(j)
            .ok_or_else(|| mismatch(c.op, "the output is longer than the repeats say"))?;
        let mut r = pv.clone();
        r[d] = s;
        let rf = ravel(&r, &xs).ok_or_else(|| mismatch(c.op, "a slice outside the input"))?;
        let from = if flat {
            label("input", &unravel(rf, &x.shape))
        } else {
            view_label("input", x, &r)
        };
        let outl = if flat {
            label("out", &[p])
        } else {
            view_label("out", out, &pv)
        };
        lines.push(format!(
            "{outl} = {from} = {}  (copy {} of {n}, {} = {n})",
            out.show(p),
            copy + 1,
            reps_label(s)
        ));
        tints.push(Tint {
            cell: cell("out", p),
            from: vec![cell("input", rf)],
        });
    }
    Ok(Body {
        header,
        value: None,
        sections: vec![Section { title: None, lines }],
        tints,
        palette: vec!["input".into()],
    })
}

// ---------------------------------------------------------------------------------------------
// Write ops: source elements land in the output; several may land on one element.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Red {
    Set,
    Sum,
    Prod,
    Mean,
    Max,
    Min,
}

impl Red {
    fn parse(op: &str, name: &str) -> CliResult<Red> {
        Ok(match name {
            "sum" | "add" => Red::Sum,
            "prod" | "multiply" => Red::Prod,
            "mean" => Red::Mean,
            "amax" | "max" => Red::Max,
            "amin" | "min" => Red::Min,
            _ => return Err(mismatch(op, "an unknown reduction was accepted")),
        })
    }

    fn describe(self) -> &'static str {
        match self {
            Red::Set => "the last write in index order is kept",
            Red::Sum => "summed in index order",
            Red::Prod => "multiplied in index order",
            Red::Mean => "averaged",
            Red::Max => "the largest is kept; NaN wins",
            Red::Min => "the smallest is kept; NaN wins",
        }
    }
}

/// One source element on its way to the output.
struct Landing {
    /// `src[0][1]`, `source[2]` or `value`.
    label: String,
    /// Its value, printed.
    value: String,
    /// Its cell (`None` for a scalar value).
    from: Option<Cell>,
}

/// Collects the writes of a scatter-like op and turns them into sections and tints.
struct Writes<'a> {
    op: &'a str,
    out: &'a Flat,
    input: &'a Flat,
    /// For each output element, the input element it starts from.
    self_of: Vec<usize>,
    per_target: Vec<Vec<Landing>>,
    moves: Vec<String>,
    tints: Vec<Tint>,
}

impl<'a> Writes<'a> {
    fn new(op: &'a str, out: &'a Flat, input: &'a Flat, self_of: Vec<usize>) -> Self {
        Writes {
            op,
            out,
            input,
            self_of,
            per_target: (0..out.len()).map(|_| Vec::new()).collect(),
            moves: Vec::new(),
            tints: Vec::new(),
        }
    }

    fn add(
        &mut self,
        target: usize,
        route: String,
        note: String,
        w: Landing,
        index_cell: Option<Cell>,
    ) -> CliResult<()> {
        let slot = self
            .per_target
            .get_mut(target)
            .ok_or_else(|| mismatch(self.op, "a write outside the output"))?;
        let dest = label("out", &unravel(target, &self.out.shape));
        let route = if route == dest {
            dest
        } else {
            format!("{route} = {dest}")
        };
        let from_text = if w.from.is_some() {
            format!("{} = {}", w.label, w.value)
        } else {
            format!("{} {}", w.label, w.value)
        };
        self.moves.push(format!("{from_text} → {route}{note}"));
        if let (Some(ic), Some(f)) = (index_cell, &w.from) {
            self.tints.push(Tint {
                cell: ic,
                from: vec![f.clone()],
            });
        }
        slot.push(w);
        Ok(())
    }

    fn finish(
        mut self,
        red: Red,
        include_self: bool,
        alpha: Option<String>,
    ) -> CliResult<(Vec<Section>, Vec<Tint>)> {
        let mut results = Vec::new();
        let mut unchanged = Vec::new();
        for o in 0..self.out.len() {
            let oc = unravel(o, &self.out.shape);
            let outl = label("out", &oc);
            let got = self.out.show(o);
            let si = self.self_of[o];
            let self_label = label("input", &unravel(si, &self.input.shape));
            let self_cell = cell("input", si);
            let ws = &self.per_target[o];
            if ws.is_empty() {
                unchanged.push(format!("{outl} = {self_label} = {got}"));
                continue;
            }
            let cells = |ws: &[&Landing]| -> Vec<Cell> {
                ws.iter().filter_map(|w| w.from.clone()).collect()
            };
            if red == Red::Set {
                let kept = ws.iter().rposition(|w| w.value == got);
                let (winner, note) = match kept {
                    Some(i) if ws.len() == 1 => (&ws[i], String::new()),
                    Some(i) => {
                        let all: Vec<String> = ws
                            .iter()
                            .map(|w| format!("{} = {}", w.label, w.value))
                            .collect();
                        let rule = if i == ws.len() - 1 {
                            "the last in index order is kept"
                        } else {
                            "this one is kept"
                        };
                        (
                            &ws[i],
                            format!("  ({} writes: {}; {rule})", ws.len(), all.join(", ")),
                        )
                    }
                    None => {
                        return Err(mismatch(
                            self.op,
                            &format!("{outl} = {got} is none of the values written there"),
                        ));
                    }
                };
                let lhs = if winner.from.is_some() {
                    winner.label.clone()
                } else {
                    format!("{} {}", winner.label, winner.value)
                };
                let rhs = if winner.from.is_some() {
                    format!(" = {got}")
                } else {
                    String::new()
                };
                results.push(format!("{outl} = {lhs}{rhs}{note}"));
                let from = match &winner.from {
                    Some(f) => vec![f.clone()],
                    None => vec![cell("value", 0)],
                };
                self.tints.push(Tint {
                    cell: cell("out", o),
                    from,
                });
                continue;
            }
            let mut terms: Vec<(String, String)> = Vec::new();
            if include_self {
                terms.push((self_label.clone(), self.input.show(si)));
            }
            for w in ws {
                match &alpha {
                    Some(a) => terms.push((format!("{a}*{}", w.label), format!("{a}*{}", w.value))),
                    None => terms.push((w.label.clone(), w.value.clone())),
                }
            }
            let names: Vec<&str> = terms.iter().map(|t| t.0.as_str()).collect();
            let vals: Vec<&str> = terms.iter().map(|t| t.1.as_str()).collect();
            let (a, b) = match red {
                Red::Sum => (names.join(" + "), vals.join(" + ")),
                Red::Prod => (names.join(" * "), vals.join(" * ")),
                Red::Mean => (
                    format!("({}) / {}", names.join(" + "), terms.len()),
                    format!("({}) / {}", vals.join(" + "), terms.len()),
                ),
                Red::Max => (
                    format!("max({})", names.join(", ")),
                    format!("max({})", vals.join(", ")),
                ),
                Red::Min => (
                    format!("min({})", names.join(", ")),
                    format!("min({})", vals.join(", ")),
                ),
                Red::Set => unreachable!("handled above"),
            };
            let note = if include_self {
                String::new()
            } else {
                format!(
                    "  (include_self=false: {self_label} = {} is left out)",
                    self.input.show(si)
                )
            };
            results.push(format!("{outl} = {a} = {b} = {got}{note}"));
            let mut from = Vec::new();
            if include_self {
                from.push(self_cell);
            }
            from.extend(cells(&ws.iter().collect::<Vec<_>>()));
            self.tints.push(Tint {
                cell: cell("out", o),
                from,
            });
        }
        let only_values = self.per_target.iter().flatten().all(|w| w.from.is_none());
        let duplicates = self.per_target.iter().any(|ws| ws.len() > 1);
        let how = if red == Red::Set && (only_values || !duplicates) {
            String::new()
        } else {
            let mut how = red.describe().to_string();
            if red != Red::Set && include_self {
                how.push_str(", starting from the input");
            }
            if red == Red::Mean && !self.out.dtype.is_float() {
                how.push_str("; an integer mean rounds down");
            }
            format!(" ({how})")
        };
        let mut sections = vec![
            Section {
                title: Some("where each element goes:".into()),
                lines: self.moves,
            },
            Section {
                title: Some(format!("each written element of out{how}:")),
                lines: results,
            },
        ];
        if !unchanged.is_empty() {
            sections.push(Section {
                title: Some("unchanged (nothing is written there):".into()),
                lines: unchanged,
            });
        }
        Ok((sections, self.tints))
    }
}

fn value_text(args: &Args) -> String {
    arg_text(args.get("value"))
}

fn scatter_like(c: &Ctx) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let ix = c.tensor("index")?;
    let out = c.output(0)?;
    let d = c.dim(x.shape.len())?;
    let xs = view_shape(&x.shape);
    let src = c.t.get("src");
    let (red, include_self) = match c.op {
        "scatter" => match c.args.get("reduce") {
            Some(Arg::Str(r)) => (Red::parse(c.op, r)?, true),
            _ => (Red::Set, true),
        },
        "scatter_add" => (Red::Sum, true),
        _ => (
            Red::parse(c.op, c.args.str("reduce")?)?,
            c.args.bool_or("include_self", true)?,
        ),
    };
    let sym = symbols(xs.len());
    let mut rule = sym.clone();
    rule[d] = label_parts("index", &sym);
    let what = match src {
        Some(_) => label_parts("src", &sym),
        None => "value".into(),
    };
    let verb = match (c.op, red) {
        (_, Red::Set) => "=".to_string(),
        ("scatter", Red::Sum) | ("scatter_add", _) => "+=".to_string(),
        ("scatter", Red::Prod) => "*=".to_string(),
        _ => format!("⇐ {} of", c.args.str("reduce").unwrap_or("")),
    };
    let mut call = format!("{}(input, dim={}, index", c.op, c.dim_text());
    match src {
        Some(_) => call.push_str(", src"),
        None => call.push_str(&format!(", value={}", value_text(c.args))),
    }
    if let Some(Arg::Str(r)) = c.args.get("reduce") {
        call.push_str(&format!(", reduce={r}"));
    }
    if c.op == "scatter_reduce" {
        call.push_str(&format!(", include_self={include_self}"));
    }
    let header = format!("{call}): {} {verb} {what}", label_parts("out", &rule));
    let mut w = Writes::new(c.op, out, x, (0..out.len()).collect());
    for p in 0..ix.len() {
        let pv = view_coords(unravel(p, &ix.shape));
        let k = index_at(c.op, ix, p)?;
        let mut t = pv.clone();
        t[d] = usize::try_from(k).map_err(|_| mismatch(c.op, "a negative index was accepted"))?;
        let tf = ravel(&t, &xs)
            .ok_or_else(|| mismatch(c.op, "an index outside the output was accepted"))?;
        let mut parts: Vec<String> = pv.iter().map(|v| v.to_string()).collect();
        parts[d] = view_label("index", ix, &pv);
        let route = if x.shape.is_empty() {
            "out".to_string()
        } else {
            label_parts("out", &parts)
        };
        let write = match src {
            Some(s) => {
                let sf = ravel(&pv, &view_shape(&s.shape))
                    .ok_or_else(|| mismatch(c.op, "src smaller than the index"))?;
                Landing {
                    label: view_label("src", s, &pv),
                    value: s.show(sf),
                    from: Some(cell("src", sf)),
                }
            }
            None => Landing {
                label: "value".into(),
                value: value_text(c.args),
                from: None,
            },
        };
        let icell = Some(cell("index", p));
        if write.from.is_none() {
            w.tints.push(Tint {
                cell: cell("index", p),
                from: vec![cell("value", 0)],
            });
        }
        w.add(tf, route, String::new(), write, icell)?;
    }
    let (sections, tints) = w.finish(red, include_self, None)?;
    Ok(Body {
        header,
        value: src.is_none().then(|| value_text(c.args)),
        sections,
        tints,
        palette: vec![if src.is_some() { "src" } else { "value" }.into()],
    })
}

fn index_write(c: &Ctx) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let ix = c.tensor("index")?;
    let out = c.output(0)?;
    let d = c.dim(x.shape.len())?;
    let xs = view_shape(&x.shape);
    let size = xs[d] as i64;
    let (red, include_self) = match c.op {
        "index_add" => (Red::Sum, true),
        "index_copy" | "index_fill" => (Red::Set, true),
        _ => (
            Red::parse(c.op, c.args.str("reduce")?)?,
            c.args.bool_or("include_self", true)?,
        ),
    };
    let alpha = match c.args.get("alpha") {
        Some(Arg::Int(1)) | None => None,
        Some(Arg::Float(x)) if *x == 1.0 => None,
        a => Some(arg_text(a)),
    };
    let sym = symbols(xs.len());
    let mut rule = sym.clone();
    rule[d] = format!("index[{}]", sym[d]);
    let header = match c.op {
        "index_add" => format!(
            "index_add(input, dim={}, index, source, alpha={}): {} += {}{}",
            c.dim_text(),
            alpha.clone().unwrap_or_else(|| "1".into()),
            label_parts("out", &rule),
            alpha.as_ref().map(|a| format!("{a}*")).unwrap_or_default(),
            label_parts("source", &sym)
        ),
        "index_copy" => format!(
            "index_copy(input, dim={}, index, source): {} = {}",
            c.dim_text(),
            label_parts("out", &rule),
            label_parts("source", &sym)
        ),
        "index_fill" => format!(
            "index_fill(input, dim={}, index, value={}): {} = value for every {}  (negative indices count from the end)",
            c.dim_text(),
            value_text(c.args),
            label_parts("out", &rule),
            sym.iter()
                .enumerate()
                .filter(|(a, _)| *a != d)
                .map(|(_, s)| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => format!(
            "index_reduce(input, dim={}, index, source, reduce={}, include_self={include_self}): {} ⇐ {} of {}",
            c.dim_text(),
            c.args.str("reduce")?,
            label_parts("out", &rule),
            c.args.str("reduce")?,
            label_parts("source", &sym)
        ),
    };
    let mut w = Writes::new(c.op, out, x, (0..out.len()).collect());
    let index_label = |j: usize| view_label("index", ix, &[j]);
    if c.op == "index_fill" {
        // slice v of the input receives value for every j with index[j] == v
        let mut by_target: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for j in 0..ix.len() {
            let v = index_at(c.op, ix, j)?;
            let v = if v < 0 { v + size } else { v };
            let v = usize::try_from(v)
                .map_err(|_| mismatch(c.op, "an index outside the input was accepted"))?;
            by_target.entry(v).or_default().push(j);
        }
        for t in 0..out.len() {
            let tv = view_coords(unravel(t, &out.shape));
            if let Some(js) = by_target.get(&tv[d]) {
                for &j in js {
                    let mut parts: Vec<String> = tv.iter().map(|v| v.to_string()).collect();
                    parts[d] = index_label(j);
                    let route = if x.shape.is_empty() {
                        "out".to_string()
                    } else {
                        label_parts("out", &parts)
                    };
                    let raw = index_at(c.op, ix, j)?;
                    let note = if raw < 0 {
                        format!("  (index {raw} wraps to {})", tv[d])
                    } else {
                        String::new()
                    };
                    w.add(
                        t,
                        route,
                        note,
                        Landing {
                            label: "value".into(),
                            value: value_text(c.args),
                            from: None,
                        },
                        None,
                    )?;
                }
            }
        }
        for j in 0..ix.len() {
            w.tints.push(Tint {
                cell: cell("index", j),
                from: vec![cell("value", 0)],
            });
        }
        let (sections, tints) = w.finish(red, include_self, None)?;
        return Ok(Body {
            header,
            value: Some(value_text(c.args)),
            sections,
            tints,
            palette: vec!["value".into()],
        });
    }
    let s = c.tensor("source")?;
    for q in 0..s.len() {
        let qv = view_coords(unravel(q, &s.shape));
        let j = qv.get(d).copied().unwrap_or(0);
        let v = index_at(c.op, ix, j)?;
        let mut t = qv.clone();
        t[d] = usize::try_from(v).map_err(|_| mismatch(c.op, "a negative index was accepted"))?;
        let tf = ravel(&t, &xs)
            .ok_or_else(|| mismatch(c.op, "an index outside the output was accepted"))?;
        let mut parts: Vec<String> = qv.iter().map(|v| v.to_string()).collect();
        parts[d] = index_label(j);
        let route = if x.shape.is_empty() {
            "out".to_string()
        } else {
            label_parts("out", &parts)
        };
        w.add(
            tf,
            route,
            String::new(),
            Landing {
                label: view_label("source", s, &qv),
                value: s.show(q),
                from: Some(cell("source", q)),
            },
            None,
        )?;
    }
    let (sections, tints) = w.finish(red, include_self, alpha)?;
    Ok(Body {
        header,
        value: None,
        sections,
        tints,
        palette: vec!["source".into()],
    })
}

fn put(c: &Ctx) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let ix = c.tensor("index")?;
    let s = c.tensor("source")?;
    let out = c.output(0)?;
    let accumulate = c.args.bool_or("accumulate", false)?;
    let red = if accumulate { Red::Sum } else { Red::Set };
    let header = format!(
        "put(input, index, source, accumulate={accumulate}): out.flat[index.flat[k]] {} source.flat[k]  (row-major order; negative indices count from the end)",
        if accumulate { "+=" } else { "=" }
    );
    if ix.len() != s.len() {
        return Err(mismatch(c.op, "index and source differ in size"));
    }
    let n = x.len() as i64;
    let mut w = Writes::new(c.op, out, x, (0..out.len()).collect());
    for k in 0..ix.len() {
        let v = index_at(c.op, ix, k)?;
        let t = if v < 0 { v + n } else { v };
        let t = usize::try_from(t)
            .ok()
            .filter(|&t| t < out.len())
            .ok_or_else(|| mismatch(c.op, "an index outside the input was accepted"))?;
        let route = format!("out.flat[{}]", label("index", &unravel(k, &ix.shape)));
        let note = if v < 0 {
            format!("  (index {v} wraps to {t})")
        } else {
            String::new()
        };
        w.add(
            t,
            route,
            note,
            Landing {
                label: label("source", &unravel(k, &s.shape)),
                value: s.show(k),
                from: Some(cell("source", k)),
            },
            Some(cell("index", k)),
        )?;
    }
    let (sections, tints) = w.finish(red, true, None)?;
    Ok(Body {
        header,
        value: None,
        sections,
        tints,
        palette: vec!["source".into()],
    })
}

fn masked_scatter(c: &Ctx) -> CliResult<Body> {
    let x = c.tensor("input")?;
    let m = c.tensor("mask")?;
    let s = c.tensor("source")?;
    let out = c.output(0)?;
    let full = gather::dims::broadcast_shapes(&x.shape, &m.shape)?;
    if full != out.shape {
        return Err(mismatch(
            c.op,
            "the output does not have the broadcast shape",
        ));
    }
    let self_of = (0..out.len())
        .map(|o| {
            let oc = unravel(o, &full);
            ravel(&broadcast_coords(&full, &oc, &x.shape), &x.shape)
                .ok_or_else(|| mismatch(c.op, "input shape"))
        })
        .collect::<CliResult<Vec<_>>>()?;
    let header = "masked_scatter(input, mask, source): where mask is true, out takes source.flat[0], source.flat[1], ... in row-major order (input and mask broadcast together)".to_string();
    let mut w = Writes::new(c.op, out, x, self_of);
    let mut k = 0;
    for o in 0..out.len() {
        let oc = unravel(o, &full);
        let mc = broadcast_coords(&full, &oc, &m.shape);
        let mf = ravel(&mc, &m.shape).ok_or_else(|| mismatch(c.op, "mask shape"))?;
        if !bool_at(m, mf) {
            continue;
        }
        if k >= s.len() {
            return Err(mismatch(
                c.op,
                "more true mask elements than source elements",
            ));
        }
        let note = format!("  ({} is true)", label("mask", &mc));
        w.add(
            o,
            label("out", &oc),
            note,
            Landing {
                label: label("source", &unravel(k, &s.shape)),
                value: s.show(k),
                from: Some(cell("source", k)),
            },
            Some(cell("mask", mf)),
        )?;
        k += 1;
    }
    let (sections, tints) = w.finish(Red::Set, true, None)?;
    Ok(Body {
        header,
        value: None,
        sections,
        tints,
        palette: vec!["source".into()],
    })
}

/// Loads the tensors of an op call from the command line: files or inline literals.
pub fn load_inputs(
    op: &str,
    tensors: &crate::opargs::TensorOptions,
    opts: &OpOptions,
    progress: bool,
) -> CliResult<Tensors> {
    let spec = opargs::spec(op)?;
    let given = tensors.given(opts);
    let names: Vec<&str> = given.iter().map(|(n, _)| *n).collect();
    opargs::check_tensors(spec, &names)?;
    let load_opts = crate::tensor_io::LoadOptions {
        dtype: tensors.dtype()?,
        bf16_npy: tensors.bf16_npy,
        progress,
    };
    let mut out = Tensors::new();
    for (name, spec_text) in given {
        let role = match (op, name) {
            // bincount counts the values of its input: integers, like an index.
            ("bincount", "input") => crate::tensor_io::Role::Index,
            (_, "input" | "src" | "source" | "weights") => crate::tensor_io::Role::Data,
            _ => crate::tensor_io::Role::Index,
        };
        let t = crate::tensor_io::load(spec_text, role, &load_opts)
            .map_err(|e| e.context(&format!("--{name}")))?;
        out.insert(name.to_string(), t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! The mappings checked against PyTorch's worked examples (torch_semantics.md, Appendix B).
    //! The outputs are PyTorch's, given by hand, so the ops that are not in the library yet are
    //! covered too.

    use super::*;
    use gather::DType;
    use gather::dynamic::Tensor;
    use ndarray::{ArrayD, IxDyn, array};

    fn x() -> Tensor {
        Tensor::from(ArrayD::from_shape_vec(IxDyn(&[3, 4]), (0..12i64).collect()).unwrap())
    }

    fn t(a: ndarray::ArrayD<i64>) -> Tensor {
        Tensor::from(a)
    }

    fn lines(
        op: &str,
        args: &[(&str, Arg)],
        inputs: Vec<(&str, Tensor)>,
        out: Vec<(&str, Tensor)>,
    ) -> Vec<String> {
        let mut a = Args::default();
        for (n, v) in args {
            a.set(n, v.clone());
        }
        let inputs: Tensors = inputs
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect();
        let out: Vec<(String, Tensor)> = out.into_iter().map(|(n, t)| (n.to_string(), t)).collect();
        explain_outputs(op, &a, &inputs, &out).unwrap().lines()
    }

    fn has(lines: &[String], want: &str) {
        assert!(
            lines.iter().any(|l| l == want),
            "missing `{want}` in:\n{}",
            lines.join("\n")
        );
    }

    #[test]
    fn take_wraps_negative_indices_into_the_flat_input() {
        let l = lines(
            "take",
            &[],
            vec![
                ("input", x()),
                ("index", t(array![[0i64, 11], [-1, -12]].into_dyn())),
            ],
            vec![("output", t(array![[0i64, 11], [11, 0]].into_dyn()))],
        );
        assert_eq!(
            l,
            vec![
                "out[0][0] = input.flat[index[0][0]] = input[0][0] = 0",
                "out[0][1] = input.flat[index[0][1]] = input[2][3] = 11",
                "out[1][0] = input.flat[index[1][0]] = input[2][3] = 11  (index -1 wraps to 11)",
                "out[1][1] = input.flat[index[1][1]] = input[0][0] = 0  (index -12 wraps to 0)",
            ]
        );
    }

    #[test]
    fn take_along_dim_broadcasts_the_index_and_wraps_modulo_the_size() {
        let l = lines(
            "take_along_dim",
            &[("dim", Arg::Int(1))],
            vec![("input", x()), ("index", t(array![[0i64, 3]].into_dyn()))],
            vec![("output", t(array![[0i64, 3], [4, 7], [8, 11]].into_dyn()))],
        );
        has(&l, "out[1][1] = input[1][index[0][1]] = input[1][3] = 7");
        has(&l, "out[2][0] = input[2][index[0][0]] = input[2][0] = 8");
        let l = lines(
            "take_along_dim",
            &[("dim", Arg::Int(1))],
            vec![
                ("input", x()),
                ("index", t(array![[-1i64], [4], [1]].into_dyn())),
            ],
            vec![("output", t(array![[3i64], [4], [9]].into_dyn()))],
        );
        has(
            &l,
            "out[0][0] = input[0][index[0][0]] = input[0][3] = 3  (index -1 wraps to 3)",
        );
        has(
            &l,
            "out[1][0] = input[1][index[1][0]] = input[1][0] = 4  (index 4 wraps to 0)",
        );
        let l = lines(
            "take_along_dim",
            &[("dim", Arg::None)],
            vec![("input", x()), ("index", t(array![[5i64, 0]].into_dyn()))],
            vec![("output", t(array![5i64, 0].into_dyn()))],
        );
        has(&l, "out[0] = input.flat[index[0][0]] = input[1][1] = 5");
    }

    #[test]
    fn masked_select_and_masked_scatter_follow_the_true_elements_in_row_major_order() {
        let mask = Tensor::from(x_bool());
        let l = lines(
            "masked_select",
            &[],
            vec![("input", x()), ("mask", mask.clone())],
            vec![("output", t(array![6i64, 7, 8, 9, 10, 11].into_dyn()))],
        );
        assert_eq!(l[0], "out[0] = input[1][2] = 6  (mask[1][2] is true)");
        assert_eq!(l.len(), 6);
        let zeros = Tensor::zeros(DType::I64, &[3, 4]);
        let source = t(ArrayD::from_shape_vec(IxDyn(&[10]), (100..110i64).collect()).unwrap());
        let l = lines(
            "masked_scatter",
            &[],
            vec![("input", zeros), ("mask", mask), ("source", source)],
            vec![(
                "output",
                t(array![[0i64, 0, 0, 0], [0, 0, 100, 101], [102, 103, 104, 105]].into_dyn()),
            )],
        );
        has(&l, "source[0] = 100 → out[1][2]  (mask[1][2] is true)");
        has(&l, "source[5] = 105 → out[2][3]  (mask[2][3] is true)");
        has(&l, "out[2][0] = source[2] = 102");
        has(&l, "out[0][0] = input[0][0] = 0");
    }

    fn x_bool() -> ArrayD<bool> {
        ArrayD::from_shape_vec(IxDyn(&[3, 4]), (0..12).map(|v| v > 5).collect()).unwrap()
    }

    #[test]
    fn put_with_accumulate_sums_every_write_after_wrapping() {
        let l = lines(
            "put",
            &[("accumulate", Arg::Bool(true))],
            vec![
                ("input", Tensor::zeros(DType::I64, &[3, 4])),
                ("index", t(array![0i64, 0, -12].into_dyn())),
                ("source", t(array![1i64, 2, 3].into_dyn())),
            ],
            vec![(
                "output",
                t(array![[6i64, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]].into_dyn()),
            )],
        );
        has(
            &l,
            "source[2] = 3 → out.flat[index[2]] = out[0][0]  (index -12 wraps to 0)",
        );
        has(
            &l,
            "out[0][0] = input[0][0] + source[0] + source[1] + source[2] = 0 + 1 + 2 + 3 = 6",
        );
    }

    #[test]
    fn index_fill_writes_whole_slices_and_wraps() {
        let l = lines(
            "index_fill",
            &[("dim", Arg::Int(1)), ("value", Arg::Int(5))],
            vec![
                ("input", Tensor::zeros(DType::I64, &[3, 4])),
                ("index", t(array![0i64, -1].into_dyn())),
            ],
            vec![(
                "output",
                t(array![[5i64, 0, 0, 5], [5, 0, 0, 5], [5, 0, 0, 5]].into_dyn()),
            )],
        );
        has(
            &l,
            "value 5 → out[2][index[1]] = out[2][3]  (index -1 wraps to 3)",
        );
        has(&l, "out[2][3] = value 5");
        has(&l, "out[1][1] = input[1][1] = 0");
    }

    #[test]
    fn legacy_scatter_multiply_includes_the_input() {
        let src = t(ArrayD::from_shape_vec(IxDyn(&[3, 4]), (1..13i64).collect()).unwrap());
        let ones = t(ArrayD::from_elem(IxDyn(&[3, 4]), 1i64));
        let mut want = ArrayD::from_elem(IxDyn(&[3, 4]), 1i64);
        for (j, v) in [5i64, 12, 21, 32].into_iter().enumerate() {
            want[[0, j]] = v;
        }
        let l = lines(
            "scatter",
            &[
                ("dim", Arg::Int(0)),
                ("reduce", Arg::Str("multiply".into())),
            ],
            vec![
                ("input", ones),
                ("index", t(ArrayD::zeros(IxDyn(&[2, 4])))),
                ("src", src),
            ],
            vec![("output", t(want))],
        );
        has(
            &l,
            "out[0][0] = input[0][0] * src[0][0] * src[1][0] = 1 * 1 * 5 = 5",
        );
        has(
            &l,
            "out[0][3] = input[0][3] * src[0][3] * src[1][3] = 1 * 4 * 8 = 32",
        );
    }

    #[test]
    fn repeat_interleave_names_the_copy_and_its_repeat_count() {
        let l = lines(
            "repeat_interleave",
            &[("dim", Arg::None)],
            vec![
                ("input", t(array![1i64, 2, 3].into_dyn())),
                ("repeats", t(array![1i64, 0, 2].into_dyn())),
            ],
            vec![("output", t(array![1i64, 3, 3].into_dyn()))],
        );
        assert_eq!(
            l,
            vec![
                "out[0] = input[0] = 1  (copy 1 of 1, repeats[0] = 1)",
                "out[1] = input[2] = 3  (copy 1 of 2, repeats[2] = 2)",
                "out[2] = input[2] = 3  (copy 2 of 2, repeats[2] = 2)",
            ]
        );
    }

    #[test]
    fn an_output_the_definition_does_not_predict_is_reported_not_explained() {
        let mut a = Args::default();
        a.set("dim", Arg::Int(0));
        let inputs: Tensors = [
            ("input".to_string(), t(array![0i64, 0].into_dyn())),
            ("index".to_string(), t(array![1i64].into_dyn())),
            ("src".to_string(), t(array![7i64].into_dyn())),
        ]
        .into_iter()
        .collect();
        let wrong = vec![("output".to_string(), t(array![0i64, 9].into_dyn()))];
        let e = explain_outputs("scatter", &a, &inputs, &wrong).unwrap_err();
        assert!(
            e.message
                .contains("out[1] = 9 is none of the values written there"),
            "{}",
            e.message
        );
    }
}

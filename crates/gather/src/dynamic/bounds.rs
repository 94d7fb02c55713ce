//! Bounds policies by name: the arguments `bounds` (`error`, `wrap`, `clip`, `fill`, `drop`) and
//! `fill_value` (the scalar of `fill`) route a call to the `*_bounded` forms of
//! [`crate::ops::bounds`] and its gradient to [`crate::grad::GradOptions`].

use ndarray::ArrayViewD;

use ndarray::ArrayD;

use super::{Arg, Args, Inputs, Tensor, TensorElem, index_dtype_error, input, same_dtype};
use super::{with_index_tensor, with_view};
use crate::element::{Element, Scalar};
use crate::error::{Error, Result};
use crate::grad::GradFloat;
use crate::index::IndexElem;
use crate::kernels::words::Moved;
use crate::ops::bounds::OutOfBounds;
use crate::ops::index::parse_index_reduce;
use crate::ops::scatter::Reduce;

/// True when `args` asks for a policy other than PyTorch's (`bounds` given and not `error`), or
/// gives a `fill_value` (checked against `bounds` later).
pub(crate) fn requested(args: &Args) -> bool {
    let b = !matches!(args.get("bounds"), None | Some(Arg::None))
        && !matches!(args.get("bounds"), Some(Arg::Str(s)) if s == "error");
    b || !matches!(args.get("fill_value"), None | Some(Arg::None))
}

/// The policy a gradient call asks for, `None` for PyTorch's (no policy asked for), read as the
/// gradients read it: its name and fill value only; the checks of the op's form come later,
/// with its operands (`bounds_policy` checks the form with the names of the forward's).
///
/// ```
/// use gather::dynamic::{Arg, Args, grad_bounds_policy};
/// let mut args = Args::default();
/// assert_eq!(grad_bounds_policy("scatter", &args)?, None);
/// args.set("bounds", Arg::Str("wrap".into()));
/// assert_eq!(grad_bounds_policy("scatter", &args)?, Some(gather::OutOfBounds::Wrap));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn grad_bounds_policy(op: &str, args: &Args) -> Result<Option<OutOfBounds<Scalar>>> {
    if !requested(args) {
        return Ok(None);
    }
    policy_of(op, args).map(Some)
}

/// Whether `op`'s form takes a bounds policy: `scatter` takes one in its `src` form without
/// `reduce` only (`has_src`: a `src` tensor is given). Public for the crates that run the
/// gradients on other devices (`gather-cuda`), so that a call fails there with the same error.
///
/// ```
/// use gather::dynamic::{Arg, Args, check_policy_form};
/// let mut args = Args::default();
/// args.set("bounds", Arg::Str("wrap".into()));
/// assert!(check_policy_form("scatter", &args, true).is_ok());
/// let e = check_policy_form("scatter", &args, false).unwrap_err();
/// assert!(e.hint().unwrap().contains("index_fill"));
/// ```
pub fn check_policy_form(op: &str, args: &Args, has_src: bool) -> Result<()> {
    if op == "scatter" && (!matches!(args.get("reduce"), None | Some(Arg::None)) || !has_src) {
        return Err(Error::invalid(
            "scatter: a bounds policy applies to the src form without reduce",
        )
        .with_hint("for a reduction use scatter_reduce (or scatter_add) with the policy; for a scalar use index_fill"));
    }
    Ok(())
}

/// The policy `args` ask for.
pub(crate) fn policy<T: Element>(op: &str, args: &Args) -> Result<OutOfBounds<T>> {
    typed_policy(policy_of(op, args)?)
}

/// [`policy`] with the fill value still a scalar: the names and their errors are compiled once,
/// not per element type.
fn policy_of(op: &str, args: &Args) -> Result<OutOfBounds<Scalar>> {
    let name = match args.get("bounds") {
        None | Some(Arg::None) => "error",
        _ => args.str("bounds")?,
    };
    let has_fill = !matches!(args.get("fill_value"), None | Some(Arg::None));
    if has_fill != (name == "fill") {
        let message = if has_fill {
            format!("{op}: fill_value goes with bounds=fill only, but bounds is {name}")
        } else {
            format!("{op}: bounds=fill needs a fill_value, the value read at out-of-range indices")
        };
        return Err(Error::invalid(message)
            .with_hint("e.g. bounds=fill with fill_value=0 reads 0 for out-of-range indices"));
    }
    Ok(match name {
        "error" => OutOfBounds::Error,
        "wrap" => OutOfBounds::Wrap,
        "clip" => OutOfBounds::Clip,
        "drop" => OutOfBounds::Drop,
        "fill" => OutOfBounds::Fill(args.scalar("fill_value")?),
        other => {
            return Err(Error::invalid(format!(
                "{op}: unknown bounds policy `{other}`"
            ))
            .with_hint("the policies are error (PyTorch's), wrap, clip, fill (reads, with fill_value) and drop (writes)"));
        }
    })
}

/// The policy for the element type: its fill value converted.
fn typed_policy<T: Element>(p: OutOfBounds<Scalar>) -> Result<OutOfBounds<T>> {
    Ok(match p {
        OutOfBounds::Fill(v) => OutOfBounds::Fill(T::from_scalar(v)?),
        other => other.map(|_| unreachable!("only Fill holds a value")),
    })
}

fn no_policy(op: &str) -> Error {
    Error::invalid(format!("{op} takes no bounds policy")).with_hint(
        "the policies apply to gather, take_along_dim, index_select, take, select_batched, scatter (with src), scatter_add, scatter_reduce, index_add, index_copy, index_fill, index_reduce and put",
    )
}

/// The ops that take a bounds policy and compute (the others, [`MOVING_OPS`], only move
/// elements).
const ARITH_OPS: &[&str] = &[
    "scatter_add",
    "scatter_reduce",
    "index_add",
    "index_reduce",
    "put",
];

/// Runs `op` out of place under the policy of `args`.
pub(crate) fn call(op: &str, args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    if !MOVING_OPS.contains(&op) && !ARITH_OPS.contains(&op) {
        return Err(no_policy(op));
    }
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    with_view!(x, x => {
        with_index_tensor!(index, i => {
            let (p, write) = parse(op, args, inputs.tensor("src").is_some())?;
            typed(op, args, p, &write, inputs, x, i)
        },
            _ => Err(index_dtype_error(op, "index", &index)))
    })
}

/// True when a call of `op` asks for a bounds policy and `op` takes one: the CPU library then
/// reads the index's dtype first, before the policy's arguments and the dim. For backends that
/// run the ops elsewhere (`gather-cuda`), so that a call with two faults fails alike.
///
/// ```
/// use gather::dynamic::{Arg, Args, takes_bounds_policy};
/// let mut args = Args::default();
/// assert!(!takes_bounds_policy("gather", &args));
/// args.set("bounds", Arg::Str("wrap".into()));
/// assert!(takes_bounds_policy("gather", &args));
/// assert!(!takes_bounds_policy("sort", &args));
/// ```
pub fn takes_bounds_policy(op: &str, args: &Args) -> bool {
    requested(args) && (MOVING_OPS.contains(&op) || ARITH_OPS.contains(&op))
}

/// The bounds policy a call asks for (arguments `bounds` and `fill_value`), checked against the
/// op as [`call`](super::call) checks it; `None` when it asks for PyTorch's rule. `inputs` names
/// the tensors the call is given. For backends that run the ops elsewhere (`gather-cuda`).
///
/// ```
/// use gather::dynamic::{Arg, Args, bounds_policy};
/// let mut args = Args::default();
/// assert_eq!(bounds_policy("gather", &args, &["input", "index"])?, None);
/// args.set("bounds", Arg::Str("clip".into()));
/// assert_eq!(bounds_policy("gather", &args, &["input", "index"])?, Some(gather::OutOfBounds::Clip));
/// assert!(bounds_policy("sort", &args, &["input"]).is_err());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn bounds_policy(
    op: &str,
    args: &Args,
    inputs: &[&str],
) -> Result<Option<OutOfBounds<Scalar>>> {
    if !requested(args) {
        return Ok(None);
    }
    if !MOVING_OPS.contains(&op) && !ARITH_OPS.contains(&op) {
        return Err(no_policy(op));
    }
    parse(op, args, inputs.contains(&"src")).map(|(p, _)| Some(p))
}

fn scalar_or(args: &Args, name: &str, default: Scalar) -> Result<Scalar> {
    match args.get(name) {
        None | Some(Arg::None) => Ok(default),
        _ => args.scalar(name),
    }
}

/// What a call under a policy does, read from its arguments before the element type is known, so
/// that the reading and its errors are compiled once.
enum Write {
    /// An op of [`MOVING_OPS`] (or `put` without accumulation), on the moved type: the name of
    /// its second operand, and index_fill's value.
    Moving {
        other: Option<&'static str>,
        value: Option<Scalar>,
    },
    ScatterAdd(isize),
    ScatterReduce(isize, Reduce, bool),
    IndexAdd(isize, Scalar),
    IndexReduce(isize, Reduce, bool),
    Put,
}

/// The policy and the [`Write`] of `op` (one of [`MOVING_OPS`] or [`ARITH_OPS`]).
#[inline(never)]
fn parse(op: &str, args: &Args, has_src: bool) -> Result<(OutOfBounds<Scalar>, Write)> {
    let p = policy_of(op, args)?;
    let include_self = || args.bool_or("include_self", true);
    let plain_put = op == "put" && !args.bool_or("accumulate", false)?;
    let write = if MOVING_OPS.contains(&op) || plain_put {
        check_policy_form(op, args, has_src)?;
        let other = match op {
            "scatter" => Some("src"),
            "index_copy" | "put" => Some("source"),
            _ => None,
        };
        let value = match op {
            "index_fill" => Some(args.scalar("value")?),
            _ => None,
        };
        Write::Moving { other, value }
    } else {
        match op {
            "scatter_add" => Write::ScatterAdd(args.dim()?),
            "scatter_reduce" => {
                let reduce: Reduce = args.str("reduce")?.parse()?;
                Write::ScatterReduce(args.dim()?, reduce, include_self()?)
            }
            "index_add" => Write::IndexAdd(args.dim()?, scalar_or(args, "alpha", Scalar::Int(1))?),
            "index_reduce" => {
                let reduce = parse_index_reduce(args.str("reduce")?)?;
                Write::IndexReduce(args.dim()?, reduce, include_self()?)
            }
            "put" => Write::Put,
            _ => return Err(no_policy(op)),
        }
    };
    Ok((p, write))
}

/// The ops that only move elements: they run on the moved type (see `Moved`), compiled for it
/// alone (5 types) in [`moving`].
const MOVING_OPS: &[&str] = &[
    "gather",
    "take_along_dim",
    "index_select",
    "take",
    "select_batched",
    "scatter",
    "index_copy",
    "index_fill",
];

fn typed<T: TensorElem + Moved, I: IndexElem>(
    op: &str,
    args: &Args,
    p: OutOfBounds<Scalar>,
    write: &Write,
    inputs: &dyn Inputs,
    x: &ArrayViewD<'_, T>,
    i: &ArrayViewD<'_, I>,
) -> Result<Tensor> {
    let p = typed_policy::<T>(p)?;
    let src = |name: &str| same_dtype::<T>(op, name, &input(inputs, name)?);
    let opts = crate::Options::new().bounds(p);
    let out = match *write {
        Write::Moving { other, value } => {
            let other = other.map(src).transpose()?;
            let other = other.as_ref().map(|o| T::moved(&o.view()));
            let value = value.map(T::from_scalar).transpose()?.map(T::to_moved);
            let read = crate::Options::new().bounds(p.map(T::to_moved));
            let out = moving(op, args, read, &T::moved(&x.view()), i, other, value)?;
            return Ok(super::moved_back::<T>(out));
        }
        Write::ScatterAdd(dim) => opts.scatter_add(x, dim, i, &src("src")?)?,
        Write::ScatterReduce(dim, reduce, incl) => {
            opts.scatter_reduce(x, dim, i, &src("src")?, reduce, incl)?
        }
        Write::IndexAdd(dim, alpha) => {
            opts.index_add(x, dim, i, &src("source")?, T::from_scalar(alpha)?)?
        }
        Write::IndexReduce(dim, reduce, incl) => {
            opts.index_reduce(x, dim, i, &src("source")?, reduce, incl)?
        }
        Write::Put => opts.put(x, i, &src("source")?, true)?,
    };
    Ok(T::wrap(out))
}

/// The ops of [`MOVING_OPS`] (and `put` without accumulation) on the moved type `M`: `other` is
/// the second operand of the writes, `value` index_fill's.
fn moving<M: Element, I: IndexElem>(
    op: &str,
    args: &Args,
    read: crate::Options<M>,
    xm: &ArrayViewD<'_, M>,
    i: &ArrayViewD<'_, I>,
    other: Option<ArrayViewD<'_, M>>,
    value: Option<M>,
) -> Result<ArrayD<M>> {
    let other = || other.clone().ok_or_else(|| no_policy(op));
    match op {
        "gather" => read.gather(xm, args.dim()?, i),
        "take_along_dim" => {
            let dim = args.opt_int("dim")?.map(|d| d as isize);
            read.take_along_dim(xm, i, dim)
        }
        "index_select" => read.index_select(xm, args.dim()?, i),
        "take" => read.take(xm, i),
        "select_batched" => read.select_batched(xm, args.dim()?, i, super::take::batch_dims(args)?),
        "scatter" => read.scatter(xm, args.dim()?, i, &other()?),
        "index_copy" => read.index_copy(xm, args.dim()?, i, &other()?),
        "index_fill" => read.index_fill(xm, args.dim()?, i, value.ok_or_else(|| no_policy(op))?),
        "put" => read.put(xm, i, &other()?, false),
        _ => Err(no_policy(op)),
    }
}

fn named<T: TensorElem>(name: &str, a: ArrayD<T>) -> (String, Tensor) {
    (name.to_string(), T::wrap(a))
}

/// The gradients of `op` under the policy of `args` (see [`super::call_grad`]).
pub(crate) fn grad<T: GradFloat + TensorElem, I: IndexElem>(
    op: &str,
    args: &Args,
    inputs: &dyn Inputs,
    x: &ArrayViewD<'_, T>,
    g: &ArrayViewD<'_, T>,
    i: &ArrayViewD<'_, I>,
    parity: crate::grad::Parity,
) -> Result<Vec<(String, Tensor)>> {
    let go = crate::Options::new()
        .bounds(policy::<T>(op, args)?)
        .grad()
        .parity(parity);
    let src = |name: &str| same_dtype::<T>(op, name, &input(inputs, name)?);
    let one = |a: ArrayD<T>| Ok(vec![named("grad_input", a)]);
    match op {
        "gather" => one(go.gather(g, x.raw_dim(), args.dim()?, i)?),
        "take_along_dim" => {
            let dim = args.opt_int("dim")?.map(|d| d as isize);
            one(go.take_along_dim(g, x.raw_dim(), i, dim)?)
        }
        "index_select" => one(go.index_select(g, x.raw_dim(), args.dim()?, i)?),
        "take" => one(go.take(g, x.raw_dim(), i)?),
        "select_batched" => one(go.select_batched(
            g,
            x.raw_dim(),
            args.dim()?,
            i,
            super::take::batch_dims(args)?,
        )?),
        "scatter" | "scatter_add" | "scatter_reduce" => {
            check_policy_form(op, args, inputs.tensor("src").is_some())?;
            let s = src("src")?;
            let r = match op {
                "scatter" => go.scatter(g, args.dim()?, i, s.raw_dim())?,
                "scatter_add" => go.scatter_add(g, args.dim()?, i, s.raw_dim())?,
                _ => {
                    let reduce: Reduce = args.str("reduce")?.parse()?;
                    let incl = args.bool_or("include_self", true)?;
                    go.scatter_reduce(g, x, args.dim()?, i, &s, reduce, incl)?
                }
            };
            Ok(vec![named("grad_input", r.input), named("grad_src", r.src)])
        }
        "index_add" | "index_copy" | "put" => {
            let s = src("source")?;
            let r = match op {
                "index_add" => {
                    let alpha = T::from_scalar(scalar_or(args, "alpha", Scalar::Int(1))?)?;
                    go.index_add(g, args.dim()?, i, s.raw_dim(), alpha)?
                }
                "index_copy" => go.index_copy(g, args.dim()?, i, s.raw_dim())?,
                _ => {
                    let accumulate = args.bool_or("accumulate", false)?;
                    go.put(g, i, s.raw_dim(), accumulate)?
                }
            };
            Ok(vec![
                named("grad_input", r.input),
                named("grad_source", r.source),
            ])
        }
        "index_fill" => one(go.index_fill(g, args.dim()?, i)?),
        "index_reduce" => {
            let reduce = parse_index_reduce(args.str("reduce")?)?;
            let incl = args.bool_or("include_self", true)?;
            let r = go.index_reduce(g, x, args.dim()?, i, &src("source")?, reduce, incl)?;
            Ok(vec![
                named("grad_input", r.input),
                named("grad_source", r.source),
            ])
        }
        _ => Err(no_policy(op)),
    }
}

#[cfg(test)]
mod tests {
    use crate::ErrorKind;
    use crate::dynamic::{Arg, Args, Tensor, Tensors, call, call_grad, call_inplace};
    use ndarray::array;

    fn inputs(pairs: Vec<(&str, Tensor)>) -> Tensors {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    #[test]
    fn bounds_and_fill_value_route_calls_and_gradients_to_the_policy() {
        let x = Tensor::from(array![10.0f32, 20.0, 30.0].into_dyn());
        let ins = inputs(vec![
            ("input", x.clone()),
            ("index", Tensor::from(array![-1i64, 1, 5].into_dyn())),
            ("src", Tensor::from(array![1.0f32, 2.0, 4.0].into_dyn())),
        ]);
        let mut args = Args::default();
        args.set("dim", Arg::Int(0));
        assert_eq!(
            call("gather", &args, &ins).unwrap_err().kind(),
            ErrorKind::IndexOutOfBounds
        );
        args.set("bounds", Arg::Str("fill".into()));
        args.set("fill_value", Arg::Float(-1.0));
        let out = call("gather", &args, &ins).unwrap();
        assert_eq!(
            out[0].1,
            Tensor::from(array![-1.0f32, 20.0, -1.0].into_dyn())
        );
        let g = Tensor::from(array![1.0f32, 1.0, 1.0].into_dyn());
        let d = call_grad("gather", &args, &ins, &g.view()).unwrap();
        assert_eq!(d[0].1, Tensor::from(array![0.0f32, 1.0, 0.0].into_dyn()));
        // fill on a write is an invalid argument; drop works.
        let e = call("scatter_add", &args, &ins).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let mut args = Args::default();
        args.set("dim", Arg::Int(0));
        args.set("bounds", Arg::Str("drop".into()));
        let out = call("scatter_add", &args, &ins).unwrap();
        assert_eq!(
            out[0].1,
            Tensor::from(array![10.0f32, 22.0, 30.0].into_dyn())
        );
        let d = call_grad("scatter_add", &args, &ins, &g.view()).unwrap();
        assert_eq!(d[1].1, Tensor::from(array![0.0f32, 1.0, 0.0].into_dyn()));
        let mut t = x.clone();
        call_inplace("scatter_add", &args, t.view_mut(), &ins).unwrap();
        assert_eq!(t, out[0].1);
        // A failed in-place call under a policy changes nothing.
        args.set("bounds", Arg::Str("wrap".into()));
        let mut t = x.clone();
        let e = call_inplace("scatter_add", &args, t.view_mut(), &ins).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(t, x);
        // Bad names and stray fill values teach.
        args.set("bounds", Arg::Str("clamp".into()));
        let e = call("scatter_add", &args, &ins).unwrap_err();
        assert!(e.hint().unwrap().contains("clip"), "{e}");
        args.set("bounds", Arg::Str("clip".into()));
        args.set("fill_value", Arg::Int(0));
        assert_eq!(
            call("gather", &args, &ins).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        let mut a = Args::default();
        a.set("bounds", Arg::Str("clip".into()));
        let e = call("masked_select", &a, &ins).unwrap_err();
        assert!(e.to_string().contains("takes no bounds policy"), "{e}");
    }

    #[test]
    fn the_gradient_of_scatters_value_form_under_a_policy_gives_the_forwards_error() {
        let ins = inputs(vec![
            ("input", Tensor::from(array![1.0f32, 2.0].into_dyn())),
            ("index", Tensor::from(array![1i64].into_dyn())),
        ]);
        let mut args = Args::default();
        args.set("dim", Arg::Int(0));
        args.set("value", Arg::Float(2.0));
        args.set("bounds", Arg::Str("wrap".into()));
        let forward = call("scatter", &args, &ins).unwrap_err();
        let g = Tensor::from(array![1.0f32, 1.0].into_dyn());
        let e = call_grad("scatter", &args, &ins, &g.view()).unwrap_err();
        assert_eq!(e.to_string(), forward.to_string());
        assert!(e.hint().unwrap().contains("index_fill"), "{e}");
    }
}

//! The group reductions beyond PyTorch (`scatter_groups` & co, the segment ops, `bincount`),
//! dynamically typed.
//!
//! Arguments (absent ones take the typed API's defaults):
//! - `scatter_groups`: tensors `src`, `index`; `dim`, `reduce` (`sum`, `prod`, `mean`, `amax`,
//!   `amin`, `first`, `last`, `logsumexp`, `var`, `std`), `correction` (var/std only, default 1),
//!   `dim_size` (default: largest index + 1), `fill` (empty groups: `identity`, the default,
//!   `zero`, `nan`, or a number / boolean);
//! - `scatter_any` / `scatter_all`: `src`, `index`; `dim`, `dim_size`, `fill` (`identity`,
//!   `zero`, `true`/`false`); bool output;
//! - `scatter_softmax` / `scatter_log_softmax`: `src`, `index`; `dim`;
//! - `scatter_reduce_arg`: `input`, `index`, `src`; `dim`, `reduce` (`amax`/`amin`),
//!   `include_self` (default true); outputs `values` and `indices` (`i64`, -1 where no source
//!   won);
//! - `segment_reduce`, `segment_arg_reduce` (outputs `values`, `indices`), `segment_any`,
//!   `segment_all`, `segment_softmax`, `segment_log_softmax`: `src` and exactly one of the 1-D
//!   tensors `offsets` (CSR), `ids` (sorted segment ids) or `lengths`; `dim` (default 0), and
//!   as above `reduce`, `correction`, `fill`; `num_segments` with `ids`;
//! - `bincount`: `input` (integers) and optionally `weights` (input's shape, any dtype: the
//!   output has its dtype); `minlength` (default 0); `dim` (absent or null: 1-D input, as
//!   `torch.bincount`; an integer: counts along that axis of an N-D input).

use ndarray::ArrayViewD;

use ndarray::{ArrayD, Ix1};

use super::{Arg, Args, Inputs, Tensor, TensorView, index_dtype_error, input, same_dtype};
use super::{with_index_tensor, with_view};
use crate::element::Scalar;
use crate::error::{Error, ErrorKind, Result, fmt_shape, prefixed};
use crate::index::IndexElem;
use crate::ops::reduce::{self as typed, ArgReduce, EmptyFill, GroupOptions, GroupReduce};
use crate::ops::segment::{self as seg, Segments};

/// Runs `$body` with `$a` bound to the typed array of a float [`Tensor`]; for the other dtypes,
/// `$other` with `$d` bound to the dtype (the softmax functions exist for floats only).
macro_rules! with_float {
    ($t:expr, $a:ident => $body:expr, $d:ident => $other:expr) => {
        match $t {
            TensorView::F16($a) => $body,
            TensorView::BF16($a) => $body,
            TensorView::F32($a) => $body,
            TensorView::F64($a) => $body,
            t => {
                let $d = t.dtype();
                $other
            }
        }
    };
}

/// A non-negative integer argument of `op` (`dim_size`, `num_segments`, `minlength`), `None`
/// when absent or null; a negative one is an error that names `op`.
///
/// ```
/// use gather::dynamic::{Arg, Args, opt_size};
/// let mut a = Args::default();
/// assert_eq!(opt_size("scatter_groups", &a, "dim_size")?, None);
/// a.set("dim_size", Arg::Int(4));
/// assert_eq!(opt_size("scatter_groups", &a, "dim_size")?, Some(4));
/// a.set("dim_size", Arg::Int(-1));
/// let e = opt_size("scatter_groups", &a, "dim_size").unwrap_err();
/// assert_eq!(e.message(), "scatter_groups: dim_size must be non-negative, but got -1");
/// # Ok::<(), gather::Error>(())
/// ```
pub fn opt_size(op: &str, args: &Args, name: &str) -> Result<Option<usize>> {
    match args.opt_int(name)? {
        None => Ok(None),
        Some(v) => usize::try_from(v).map(Some).map_err(|_| {
            Error::invalid(format!("{op}: {name} must be non-negative, but got {v}")).with_hint(
                format!("{name} is a count: 0, 1, 2, ...; leave it out for the default"),
            )
        }),
    }
}

/// The reduction of `scatter_groups` and `segment_reduce`: `reduce` (required) and, for
/// `var`/`std`, `correction` (default 1). Shared with the GPU backend, so that both give the
/// same errors.
///
/// ```
/// use gather::dynamic::{Arg, Args, group_reduce};
/// use gather::ops::reduce::GroupReduce;
/// let mut a = Args::default();
/// a.set("reduce", Arg::Str("var".into()));
/// a.set("correction", Arg::Int(0));
/// assert_eq!(group_reduce("scatter_groups", &a)?, GroupReduce::Var { correction: 0 });
/// a.set("reduce", Arg::Str("sum".into()));
/// assert!(group_reduce("scatter_groups", &a).unwrap_err().message().contains("correction = 0"));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn group_reduce(op: &str, args: &Args) -> Result<GroupReduce> {
    let r: GroupReduce = args.str("reduce")?.parse().map_err(|e| prefixed(op, e))?;
    let Some(c) = args.opt_int("correction")? else {
        return Ok(r);
    };
    let correction = usize::try_from(c).map_err(|_| {
        Error::invalid(format!(
            "{op}: correction must be non-negative, but got {c}"
        ))
        .with_hint("correction = 1 is the sample (unbiased) estimate, 0 the population one")
    })?;
    match r {
        GroupReduce::Var { .. } => Ok(GroupReduce::Var { correction }),
        GroupReduce::Std { .. } => Ok(GroupReduce::Std { correction }),
        _ => Err(Error::invalid(format!(
            "{op}: correction = {c} applies to reduce=\"var\" or \"std\", not \"{}\"",
            r.name()
        ))
        .with_hint("leave correction out, or use reduce=var / reduce=std")),
    }
}

/// The reduction of `scatter_reduce_arg` and `segment_arg_reduce`: `reduce`, `amax` or `amin`.
///
/// ```
/// use gather::dynamic::{Arg, Args, arg_reduce};
/// use gather::ops::reduce::ArgReduce;
/// let mut a = Args::default();
/// a.set("reduce", Arg::Str("amin".into()));
/// assert_eq!(arg_reduce("segment_arg_reduce", &a)?, ArgReduce::Amin);
/// a.set("reduce", Arg::Str("sum".into()));
/// assert!(arg_reduce("segment_arg_reduce", &a).unwrap_err().message().starts_with("segment_arg_reduce: "));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn arg_reduce(op: &str, args: &Args) -> Result<ArgReduce> {
    args.str("reduce")?.parse().map_err(|e| prefixed(op, e))
}

/// What the empty groups of `op` hold: the argument `fill` (`identity`, the default, `zero`,
/// `nan`, or a number or boolean), its value still a [`Scalar`] (it becomes the element type
/// with the dtype of `src`).
///
/// ```
/// use gather::dynamic::{Arg, Args, group_fill};
/// use gather::ops::reduce::EmptyFill;
/// use gather::Scalar;
/// let mut a = Args::default();
/// assert_eq!(group_fill("scatter_groups", &a)?, EmptyFill::Identity);
/// a.set("fill", Arg::Str("nan".into()));
/// assert_eq!(group_fill("scatter_groups", &a)?, EmptyFill::Nan);
/// a.set("fill", Arg::Int(-1));
/// assert_eq!(group_fill("scatter_groups", &a)?, EmptyFill::Value(Scalar::Int(-1)));
/// a.set("fill", Arg::Str("max".into()));
/// assert!(group_fill("scatter_groups", &a).is_err());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn group_fill(op: &str, args: &Args) -> Result<EmptyFill<Scalar>> {
    match args.get("fill") {
        None | Some(Arg::None) => Ok(EmptyFill::Identity),
        Some(Arg::Str(s)) => match s.as_str() {
            "identity" => Ok(EmptyFill::Identity),
            "zero" => Ok(EmptyFill::Zero),
            "nan" => Ok(EmptyFill::Nan),
            "inf" | "-inf" => Ok(EmptyFill::Value(args.scalar("fill")?)),
            _ => Err(Error::invalid(format!(
                "{op}: fill must be identity, zero, nan or a number, but got \"{s}\""
            ))
            .with_hint("fill is what an empty group holds: identity (the reduction's identity, the default), zero, nan, or a value such as -1")),
        },
        Some(_) => Ok(EmptyFill::Value(args.scalar("fill")?)),
    }
}

/// [`group_fill`] of the bool ops (`scatter_any`/`scatter_all`, `segment_any`/`segment_all`),
/// whose output is bool whatever `src` is: a value converts to `bool` here.
///
/// ```
/// use gather::dynamic::{Arg, Args, bool_fill};
/// use gather::ops::reduce::EmptyFill;
/// let mut a = Args::default();
/// a.set("fill", Arg::Bool(true));
/// assert_eq!(bool_fill("segment_any", &a)?, EmptyFill::Value(true));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn bool_fill(op: &str, args: &Args) -> Result<EmptyFill<bool>> {
    group_fill(op, args)?.to_element(op)
}

/// `values` and `indices` outputs.
fn two(values: Tensor, indices: ArrayD<i64>) -> Vec<(String, Tensor)> {
    vec![
        ("values".to_string(), values),
        ("indices".to_string(), Tensor::from(indices)),
    ]
}

pub(crate) fn scatter_groups(args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    const OP: &str = "scatter_groups";
    let src = input(inputs, "src")?;
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    let reduce = group_reduce(OP, args)?;
    let dim_size = opt_size(OP, args, "dim_size")?;
    let fill = group_fill(OP, args)?;
    with_view!(src, s => {
        with_index_tensor!(index, i => {
            let opts = GroupOptions { dim_size, fill: fill.to_element(OP)? };
            Ok(Tensor::from(typed::scatter_groups(s, dim, i, reduce, opts)?))
        }, _ => Err(index_dtype_error(OP, "index", &index)))
    })
}

/// `scatter_any` (`all == false`) and `scatter_all`.
pub(crate) fn scatter_any_all(op: &str, args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let src = input(inputs, "src")?;
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    let opts = GroupOptions {
        dim_size: opt_size(op, args, "dim_size")?,
        fill: bool_fill(op, args)?,
    };
    let all = op == "scatter_all";
    with_view!(src, s => {
        with_index_tensor!(index, i => Ok(Tensor::from(if all {
            typed::scatter_all(s, dim, i, opts)?
        } else {
            typed::scatter_any(s, dim, i, opts)?
        })), _ => Err(index_dtype_error(op, "index", &index)))
    })
}

/// `scatter_softmax` and `scatter_log_softmax`.
pub(crate) fn scatter_softmax(op: &str, args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let src = input(inputs, "src")?;
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    let log = op == "scatter_log_softmax";
    with_float!(src, s => {
        with_index_tensor!(index, i => Ok(Tensor::from(if log {
            typed::scatter_log_softmax(&s, dim, i)?
        } else {
            typed::scatter_softmax(&s, dim, i)?
        })), _ => Err(index_dtype_error(op, "index", &index)))
    }, d => Err(typed::softmax_dtype_error(op, d)))
}

pub(crate) fn scatter_reduce_arg(
    args: &Args,
    inputs: &dyn Inputs,
) -> Result<Vec<(String, Tensor)>> {
    const OP: &str = "scatter_reduce_arg";
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    let src = input(inputs, "src")?;
    let dim = args.dim()?;
    let reduce = arg_reduce(OP, args)?;
    let include_self = args.bool_or("include_self", true)?;
    with_view!(x, x => {
        with_index_tensor!(index, i => {
            let s = same_dtype(OP, "src", &src)?;
            let (v, a) = typed::scatter_reduce_arg(x, dim, i, &s, reduce, include_self)?;
            Ok(two(Tensor::from(v), a))
        }, _ => Err(index_dtype_error(OP, "index", &index)))
    })
}

/// The names of the tensors that can give the segments, in the order errors list them.
const SEGMENT_TENSORS: [&str; 3] = ["offsets", "ids", "lengths"];

/// The segments of a segment op (`segment_reduce` & co) as its arguments give them: the name
/// of the one tensor among `offsets`, `ids` and `lengths` that `inputs` (the names of the
/// call's tensors) has, `dim` (default 0) and `num_segments` (with `ids` only; `None`: the
/// largest id + 1). Shared with the GPU backend, so that both give the same errors.
///
/// ```
/// use gather::dynamic::{Arg, Args, segment_args};
/// let mut a = Args::default();
/// assert_eq!(segment_args("segment_reduce", &a, &["src", "lengths"])?, ("lengths", 0, None));
/// a.set("num_segments", Arg::Int(3));
/// a.set("dim", Arg::Int(-1));
/// assert_eq!(segment_args("segment_reduce", &a, &["ids", "src"])?, ("ids", -1, Some(3)));
/// let e = segment_args("segment_reduce", &a, &["offsets", "ids", "src"]).unwrap_err();
/// assert!(e.message().contains("given twice (offsets and ids)"));
/// assert!(segment_args("segment_reduce", &a, &["offsets", "src"]).is_err()); // num_segments
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_args(
    op: &str,
    args: &Args,
    inputs: &[&str],
) -> Result<(&'static str, isize, Option<usize>)> {
    let given: Vec<&'static str> = SEGMENT_TENSORS
        .into_iter()
        .filter(|n| inputs.contains(n))
        .collect();
    let name = match given.as_slice() {
        [name] => *name,
        [] => return Err(Error::invalid(format!(
            "{op}: missing the segments: give one of the tensors offsets, ids, lengths"
        ))
        .with_hint("offsets: S + 1 CSR positions along dim; ids: one sorted segment id per position; lengths: the length of each segment")),
        many => return Err(Error::invalid(format!(
            "{op}: the segments are given twice ({}); give exactly one of offsets, ids, lengths",
            many.join(" and ")
        ))
        .with_hint("they describe the same thing in three ways: keep one")),
    };
    let dim = args.opt_int("dim")?.map_or(0, |d| d as isize);
    let num_segments = opt_size(op, args, "num_segments")?;
    if let (Some(n), false) = (num_segments, name == "ids") {
        return Err(Error::invalid(format!(
            "{op}: num_segments = {n} goes with ids, but the segments are given as {name}"
        ))
        .with_hint(format!(
            "{name} already fix the number of segments: leave num_segments out"
        )));
    }
    Ok((name, dim, num_segments))
}

/// The segments of `t` (1-D), the tensor `name` of [`segment_args`], as the typed [`Segments`].
fn segments_of<'a, I: IndexElem>(
    op: &str,
    name: &str,
    t: &ArrayViewD<'a, I>,
    num_segments: Option<usize>,
) -> Result<Segments<'a, I>> {
    let v = t
        .clone()
        .into_dimensionality::<Ix1>()
        .map_err(|_| crate::ops::segment::segments_rank_error(op, name, t.shape()))?;
    Ok(match name {
        "ids" => Segments::Ids {
            ids: v,
            num_segments,
        },
        "offsets" => Segments::Offsets(v),
        _ => Segments::Lengths(v),
    })
}

/// Every segment op (`segment_reduce`, `segment_arg_reduce`, `segment_any`, `segment_all`,
/// `segment_softmax`, `segment_log_softmax`).
pub(crate) fn segment(op: &str, args: &Args, inputs: &dyn Inputs) -> Result<Vec<(String, Tensor)>> {
    let src = input(inputs, "src")?;
    let given: Vec<&str> = SEGMENT_TENSORS
        .into_iter()
        .filter(|n| inputs.tensor(n).is_some())
        .collect();
    let (name, dim, num_segments) = segment_args(op, args, &given)?;
    let segt = input(inputs, name)?;
    let out = |t: Tensor| vec![("output".to_string(), t)];
    match op {
        "segment_reduce" => {
            let reduce = group_reduce(op, args)?;
            let fill = group_fill(op, args)?;
            with_view!(src, s => {
                with_index_tensor!(segt, ix => segments_of(op, name, ix, num_segments).and_then(|sg| {
                    let fill = fill.to_element(op)?;
                    Ok(out(Tensor::from(seg::segment_reduce(s, dim, sg, reduce, fill)?)))
                }), _ => Err(index_dtype_error(op, name, &segt)))
            })
        }
        "segment_arg_reduce" => {
            let reduce = arg_reduce(op, args)?;
            let fill = group_fill(op, args)?;
            with_view!(src, s => {
                with_index_tensor!(segt, ix => segments_of(op, name, ix, num_segments).and_then(|sg| {
                    let fill = fill.to_element(op)?;
                    let (v, a) = seg::segment_arg_reduce(s, dim, sg, reduce, fill)?;
                    Ok(two(Tensor::from(v), a))
                }), _ => Err(index_dtype_error(op, name, &segt)))
            })
        }
        "segment_any" | "segment_all" => {
            let fill = bool_fill(op, args)?;
            let all = op == "segment_all";
            with_view!(src, s => {
                with_index_tensor!(segt, ix => segments_of(op, name, ix, num_segments).and_then(|sg| {
                    Ok(out(Tensor::from(if all {
                        seg::segment_all(s, dim, sg, fill)?
                    } else {
                        seg::segment_any(s, dim, sg, fill)?
                    })))
                }), _ => Err(index_dtype_error(op, name, &segt)))
            })
        }
        "segment_softmax" | "segment_log_softmax" => {
            let log = op == "segment_log_softmax";
            with_float!(src, s => {
                with_index_tensor!(segt, ix => segments_of(op, name, ix, num_segments).and_then(|sg| {
                    Ok(out(Tensor::from(if log {
                        seg::segment_log_softmax(&s, dim, sg)?
                    } else {
                        seg::segment_softmax(&s, dim, sg)?
                    })))
                }), _ => Err(index_dtype_error(op, name, &segt)))
            }, d => Err(typed::softmax_dtype_error(op, d)))
        }
        _ => Err(Error::invalid(format!("segment: unknown op `{op}`"))),
    }
}

pub(crate) fn bincount(args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    const OP: &str = "bincount";
    let x = input(inputs, "input")?;
    let minlength = opt_size(OP, args, "minlength")?.unwrap_or(0);
    let dim = args.opt_int("dim")?.map(|d| d as isize);
    if dim.is_none() && x.shape().len() != 1 {
        return Err(Error::new(
            ErrorKind::RankMismatch,
            format!(
                "{OP}: bincount only supports 1-d non-negative integral inputs, but input has {} dims {}",
                x.shape().len(),
                fmt_shape(x.shape())
            ),
        )
        .with_hint("pass dim to count along one axis of an N-D input (each lane separately), or flatten the input"));
    }
    let axis = dim.unwrap_or(0);
    with_index_tensor!(x, ix => match inputs.tensor("weights") {
        None if dim.is_none() => {
            let v = ix.view().into_dimensionality::<Ix1>().expect("checked 1-D above");
            Ok(Tensor::from(seg::bincount(&v, minlength)?.into_dyn()))
        }
        None => Ok(Tensor::from(seg::bincount_axis(ix, axis, minlength)?)),
        Some(w) => with_view!(w, w => Ok(Tensor::from(seg::bincount_weighted_axis(ix, axis, w, minlength)?))),
    }, _ => Err(index_dtype_error(OP, "input", &x)))
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::test_util::{args, one, t, tensors};
    use super::*;
    use crate::dynamic::Tensors;
    use crate::element::DType;
    use ndarray::{Array1, array};

    fn err(op: &str, a: &Args, ins: &Tensors) -> Error {
        call(op, a, ins).unwrap_err()
    }

    #[test]
    fn scatter_groups_matches_the_typed_function_for_float_and_int_src_and_two_index_dtypes() {
        let srcf = array![[1.0f32, -2.0, 3.5, 0.25], [4.0, 5.0, -6.0, 7.0]];
        let srci = array![[1i32, -2, 3, 8], [4, 5, -6, 7]];
        let idx64 = array![[2i64, 0, 2, 1], [0, 0, 3, 3]];
        let idx32 = idx64.mapv(|v| v as i32);
        let idx_u8 = idx64.mapv(|v| v as u8);
        for reduce in ["sum", "prod", "mean", "amax", "amin", "first", "last"] {
            let a = args(&[
                ("dim", Arg::Int(1)),
                ("reduce", Arg::Str(reduce.into())),
                ("dim_size", Arg::Int(5)),
            ]);
            let opts = GroupOptions::default().dim_size(5);
            let r: GroupReduce = reduce.parse().unwrap();
            let wf = typed::scatter_groups(&srcf, 1, &idx64, r, opts).unwrap();
            let wi =
                typed::scatter_groups(&srci, 1, &idx32, r, GroupOptions::default().dim_size(5))
                    .unwrap();
            let got = one(
                "scatter_groups",
                &a,
                &tensors(vec![("src", t(srcf.clone())), ("index", t(idx64.clone()))]),
            );
            assert_eq!(got, t(wf.clone()), "{reduce} f32/i64");
            let got = one(
                "scatter_groups",
                &a,
                &tensors(vec![("src", t(srci.clone())), ("index", t(idx32.clone()))]),
            );
            assert_eq!(got, t(wi), "{reduce} i32/i32");
            // A narrow index dtype is widened and gives the same result.
            let got = one(
                "scatter_groups",
                &a,
                &tensors(vec![("src", t(srcf.clone())), ("index", t(idx_u8.clone()))]),
            );
            assert_eq!(got, t(wf), "{reduce} f32/u8");
        }
        // The float-only reductions, correction and fills.
        type Case<'a> = (Vec<(&'a str, Arg)>, GroupReduce, EmptyFill<f64>);
        let cases: Vec<Case> = vec![
            (
                vec![("reduce", Arg::Str("logsumexp".into()))],
                GroupReduce::LogSumExp,
                EmptyFill::Identity,
            ),
            (
                vec![("reduce", Arg::Str("var".into()))],
                GroupReduce::Var { correction: 1 },
                EmptyFill::Identity,
            ),
            (
                vec![
                    ("reduce", Arg::Str("std".into())),
                    ("correction", Arg::Int(0)),
                    ("fill", Arg::Str("zero".into())),
                ],
                GroupReduce::Std { correction: 0 },
                EmptyFill::Zero,
            ),
            (
                vec![
                    ("reduce", Arg::Str("amax".into())),
                    ("fill", Arg::Float(-1.5)),
                ],
                GroupReduce::Amax,
                EmptyFill::Value(-1.5),
            ),
            (
                vec![
                    ("reduce", Arg::Str("sum".into())),
                    ("fill", Arg::Str("nan".into())),
                ],
                GroupReduce::Sum,
                EmptyFill::Nan,
            ),
        ];
        let src = srcf.mapv(f64::from);
        for (extra, r, fill) in cases {
            let mut a = args(&[("dim", Arg::Int(-1)), ("dim_size", Arg::Int(5))]);
            for (n, v) in &extra {
                a.set(n, v.clone());
            }
            let opts = GroupOptions {
                dim_size: Some(5),
                fill,
            };
            let want = typed::scatter_groups(&src, -1, &idx64, r, opts).unwrap();
            let got = one(
                "scatter_groups",
                &a,
                &tensors(vec![("src", t(src.clone())), ("index", t(idx32.clone()))]),
            );
            // NaN != NaN: compare the bits.
            let bits = |x: &Tensor| {
                x.to_f64_vec()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&got), bits(&t(want)), "{r:?} {fill:?}");
            assert_eq!(got.dtype(), DType::F64);
        }
    }

    #[test]
    fn scatter_groups_errors_are_typed_with_the_numbers() {
        let ins = |src: Tensor, idx: Tensor| tensors(vec![("src", src), ("index", idx)]);
        let f = || t(array![1.0f32, 2.0, 3.0]);
        let i = || t(array![0i64, 1, 1]);
        let a = |r: &str| args(&[("dim", Arg::Int(0)), ("reduce", Arg::Str(r.into()))]);
        let e = err("scatter_groups", &a("median"), &ins(f(), i()));
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message()
                .starts_with("scatter_groups: reduce must be one of"),
            "{e}"
        );
        assert!(e.message().contains("median"), "{e}");
        let e = err(
            "scatter_groups",
            &a("logsumexp"),
            &ins(t(array![1i32, 2, 3]), i()),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("logsumexp") && e.message().contains("int32"),
            "{e}"
        );
        assert!(e.hint().unwrap().contains("float"));
        let e = err(
            "scatter_groups",
            &a("sum"),
            &ins(f(), t(array![0.0f32, 1.0, 1.0])),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("float32"), "{e}");
        assert!(e.hint().is_some());
        // Without dim_size the output grows to the largest index; with it, 7 is out of range.
        let mut b = a("sum");
        assert_eq!(
            one("scatter_groups", &b, &ins(f(), t(array![0i64, 7, 1]))).shape(),
            &[8]
        );
        b.set("dim_size", Arg::Int(3));
        let e = err("scatter_groups", &b, &ins(f(), t(array![0i64, 7, 1])));
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(e.index_value(), Some(7));
        let e = err(
            "scatter_groups",
            &args(&[("dim", Arg::Int(0))]),
            &ins(f(), i()),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("`reduce`"), "{e}");
        let e = err(
            "scatter_groups",
            &args(&[("reduce", Arg::Str("sum".into()))]),
            &ins(f(), i()),
        );
        assert!(e.message().contains("`dim`"), "{e}");
        let e = err("scatter_groups", &a("sum"), &tensors(vec![("src", f())]));
        assert!(e.message().contains("missing input tensor `index`"), "{e}");
        let mut b = a("sum");
        b.set("dim", Arg::Int(3));
        assert_eq!(
            err("scatter_groups", &b, &ins(f(), i())).kind(),
            ErrorKind::DimOutOfRange
        );
        let mut b = a("mean");
        b.set("correction", Arg::Int(0));
        let e = err("scatter_groups", &b, &ins(f(), i()));
        assert!(
            e.message().contains("correction = 0") && e.message().contains("mean"),
            "{e}"
        );
        let mut b = a("var");
        b.set("correction", Arg::Int(-2));
        assert!(
            err("scatter_groups", &b, &ins(f(), i()))
                .message()
                .contains("-2")
        );
        let mut b = a("sum");
        b.set("dim_size", Arg::Int(-1));
        let e = err("scatter_groups", &b, &ins(f(), i()));
        assert!(
            e.message()
                .contains("dim_size must be non-negative, but got -1"),
            "{e}"
        );
        let mut b = a("sum");
        b.set("fill", Arg::Str("nan".into()));
        let e = err("scatter_groups", &b, &ins(t(array![1i64, 2, 3]), i()));
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("NaN fill"), "{e}");
        let mut b = a("sum");
        b.set("fill", Arg::Int(300));
        let e = err("scatter_groups", &b, &ins(t(array![1u8, 2, 3]), i()));
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().starts_with("scatter_groups: ") && e.message().contains("300"),
            "{e}"
        );
        let mut b = a("sum");
        b.set("fill", Arg::Str("lots".into()));
        assert!(
            err("scatter_groups", &b, &ins(f(), i()))
                .message()
                .contains("\"lots\"")
        );
    }

    #[test]
    fn scatter_any_all_and_softmax_match_the_typed_functions() {
        let src = array![[0.0f64, 2.0, -1.0, 0.0], [1.0, 1.0, 3.0, 0.5]];
        let srci = array![[0i16, 2, -1, 0], [1, 1, 3, 0]];
        let idx = array![1i64, 1, 0, 2];
        let idx32 = array![1i32, 1, 0, 2];
        let opts = GroupOptions::default().dim_size(4);
        let a = args(&[("dim", Arg::Int(1)), ("dim_size", Arg::Int(4))]);
        let ins = |s: Tensor, i: Tensor| tensors(vec![("src", s), ("index", i)]);
        assert_eq!(
            one("scatter_any", &a, &ins(t(src.clone()), t(idx.clone()))),
            t(typed::scatter_any(&src, 1, &idx, opts).unwrap())
        );
        assert_eq!(
            one("scatter_all", &a, &ins(t(srci.clone()), t(idx32.clone()))),
            t(typed::scatter_all(&srci, 1, &idx32, opts).unwrap())
        );
        let mut b = a.clone();
        b.set("fill", Arg::Bool(true));
        let want = typed::scatter_any(&srci, 1, &idx, opts.fill(EmptyFill::Value(true))).unwrap();
        assert!(want[[0, 3]]);
        assert_eq!(
            one("scatter_any", &b, &ins(t(srci.clone()), t(idx.clone()))),
            t(want)
        );
        b.set("fill", Arg::Str("nan".into()));
        assert_eq!(
            err("scatter_all", &b, &ins(t(srci.clone()), t(idx.clone()))).kind(),
            ErrorKind::InvalidArgument
        );
        let d = args(&[("dim", Arg::Int(1))]);
        let srcf = src.mapv(|v| v as f32);
        assert_eq!(
            one("scatter_softmax", &d, &ins(t(src.clone()), t(idx.clone()))),
            t(typed::scatter_softmax(&src, 1, &idx).unwrap())
        );
        assert_eq!(
            one(
                "scatter_log_softmax",
                &d,
                &ins(t(srcf.clone()), t(idx32.clone()))
            ),
            t(typed::scatter_log_softmax(&srcf, 1, &idx32).unwrap())
        );
        let e = err("scatter_softmax", &d, &ins(t(srci.clone()), t(idx.clone())));
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("scatter_softmax") && e.message().contains("int16"),
            "{e}"
        );
        let e = err("scatter_log_softmax", &d, &ins(t(src), t(array![1i64, 1])));
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.message().contains("must cover src [2, 4]"), "{e}");
    }

    #[test]
    fn scatter_reduce_arg_returns_values_and_indices_like_the_typed_function() {
        let x = array![[0.0f32, 10.0, 0.0], [1.0, 1.0, 1.0]];
        let src = array![[5.0f32, 20.0, 5.0, 7.0], [0.5, 3.0, 3.0, -1.0]];
        let idx = array![[0i64, 1, 0, 2], [1, 1, 1, 0]];
        let xi = x.mapv(|v| v as i64);
        let srci = src.mapv(|v| v as i64);
        let idx32 = idx.mapv(|v| v as i32);
        for (reduce, r) in [("amax", ArgReduce::Amax), ("amin", ArgReduce::Amin)] {
            for include_self in [true, false] {
                let a = args(&[
                    ("dim", Arg::Int(1)),
                    ("reduce", Arg::Str(reduce.into())),
                    ("include_self", Arg::Bool(include_self)),
                ]);
                let (v, i) = typed::scatter_reduce_arg(&x, 1, &idx, &src, r, include_self).unwrap();
                let out = call(
                    "scatter_reduce_arg",
                    &a,
                    &tensors(vec![
                        ("input", t(x.clone())),
                        ("index", t(idx.clone())),
                        ("src", t(src.clone())),
                    ]),
                )
                .unwrap();
                assert_eq!(out, two(t(v), i.into_dyn()));
                let (v, i) =
                    typed::scatter_reduce_arg(&xi, 1, &idx32, &srci, r, include_self).unwrap();
                let out = call(
                    "scatter_reduce_arg",
                    &a,
                    &tensors(vec![
                        ("input", t(xi.clone())),
                        ("index", t(idx32.clone())),
                        ("src", t(srci.clone())),
                    ]),
                )
                .unwrap();
                assert_eq!(out, two(t(v), i.into_dyn()));
            }
        }
        let a = args(&[("dim", Arg::Int(1)), ("reduce", Arg::Str("sum".into()))]);
        let ins = tensors(vec![
            ("input", t(x.clone())),
            ("index", t(idx.clone())),
            ("src", t(src)),
        ]);
        let e = err("scatter_reduce_arg", &a, &ins);
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("scatter_reduce_arg") && e.message().contains("sum"),
            "{e}"
        );
        let a = args(&[("dim", Arg::Int(1)), ("reduce", Arg::Str("amax".into()))]);
        let ins = tensors(vec![("input", t(x)), ("index", t(idx)), ("src", t(srci))]);
        let e = err("scatter_reduce_arg", &a, &ins);
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("float32 and int64"), "{e}");
        assert!(e.hint().is_some());
    }

    #[test]
    fn segment_ops_match_the_typed_functions_for_every_way_of_giving_segments() {
        let src = array![
            [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0],
            [6.0, -5.0, 4.0, 3.0, 2.0, 1.0]
        ];
        let srci = src.mapv(|v| v as i32);
        let offsets = array![0i64, 2, 2, 6];
        let ids = array![0i32, 0, 2, 2, 2, 2];
        let lengths = array![2u16, 0, 4];
        let lengths64 = lengths.mapv(i64::from);
        let a = |list: &[(&str, Arg)]| {
            let mut a = args(list);
            a.set("dim", Arg::Int(1));
            a
        };
        let with = |s: Tensor, kind: &str, seg: Tensor| tensors(vec![("src", s), (kind, seg)]);
        for reduce in ["sum", "mean", "amax", "last"] {
            let r: GroupReduce = reduce.parse().unwrap();
            let ar = a(&[("reduce", Arg::Str(reduce.into()))]);
            let want =
                seg::segment_reduce(&src, 1, Segments::offsets(&offsets), r, EmptyFill::Identity)
                    .unwrap();
            assert_eq!(
                one(
                    "segment_reduce",
                    &ar,
                    &with(t(src.clone()), "offsets", t(offsets.clone()))
                ),
                t(want.clone())
            );
            assert_eq!(
                one(
                    "segment_reduce",
                    &ar,
                    &with(t(src.clone()), "ids", t(ids.clone()))
                ),
                t(want.clone())
            );
            assert_eq!(
                one(
                    "segment_reduce",
                    &ar,
                    &with(t(src.clone()), "lengths", t(lengths.clone()))
                ),
                t(want)
            );
            let want =
                seg::segment_reduce(&srci, 1, Segments::lengths(&lengths64), r, EmptyFill::Zero)
                    .unwrap();
            let mut az = ar.clone();
            az.set("fill", Arg::Str("zero".into()));
            assert_eq!(
                one(
                    "segment_reduce",
                    &az,
                    &with(t(srci.clone()), "lengths", t(lengths64.clone()))
                ),
                t(want)
            );
        }
        // var with correction, ids with num_segments.
        let ar = a(&[
            ("reduce", Arg::Str("var".into())),
            ("correction", Arg::Int(0)),
            ("num_segments", Arg::Int(4)),
        ]);
        let want = seg::segment_reduce(
            &src,
            1,
            Segments::ids_with(&ids, 4),
            GroupReduce::Var { correction: 0 },
            EmptyFill::Identity,
        )
        .unwrap();
        let got = one(
            "segment_reduce",
            &ar,
            &with(t(src.clone()), "ids", t(ids.clone())),
        );
        let bits = |x: &Tensor| {
            x.to_f64_vec()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(&got), bits(&t(want)));
        assert_eq!(got.shape(), &[2, 4]);
        // arg-reduce: values and indices.
        for (name, r) in [("amax", ArgReduce::Amax), ("amin", ArgReduce::Amin)] {
            let ar = a(&[("reduce", Arg::Str(name.into())), ("fill", Arg::Int(-7))]);
            let (v, i) = seg::segment_arg_reduce(
                &srci,
                1,
                Segments::offsets(&offsets),
                r,
                EmptyFill::Value(-7),
            )
            .unwrap();
            let out = call(
                "segment_arg_reduce",
                &ar,
                &with(t(srci.clone()), "offsets", t(offsets.clone())),
            )
            .unwrap();
            assert_eq!(out, two(t(v), i.into_dyn()));
            let (v, i) =
                seg::segment_arg_reduce(&src, 1, Segments::ids(&ids), r, EmptyFill::Value(-7.0))
                    .unwrap();
            let out = call(
                "segment_arg_reduce",
                &ar,
                &with(t(src.clone()), "ids", t(ids.clone())),
            )
            .unwrap();
            assert_eq!(out, two(t(v), i.into_dyn()));
        }
        // any / all.
        let b = array![[0u8, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 1]];
        let ad = a(&[]);
        assert_eq!(
            one(
                "segment_any",
                &ad,
                &with(t(b.clone()), "offsets", t(offsets.clone()))
            ),
            t(seg::segment_any(&b, 1, Segments::offsets(&offsets), EmptyFill::Identity).unwrap())
        );
        assert_eq!(
            one(
                "segment_all",
                &ad,
                &with(t(src.clone()), "ids", t(ids.clone()))
            ),
            t(seg::segment_all(&src, 1, Segments::ids(&ids), EmptyFill::Identity).unwrap())
        );
        // softmax / log_softmax, with the default dim 0 on a transposed layout.
        let srct = src.t().to_owned();
        let d0 = Args::default();
        assert_eq!(
            one(
                "segment_softmax",
                &d0,
                &with(t(srct.clone()), "lengths", t(lengths.clone()))
            ),
            t(seg::segment_softmax(&srct, 0, Segments::lengths(&lengths)).unwrap())
        );
        let srctd = srct.mapv(f64::from);
        assert_eq!(
            one(
                "segment_log_softmax",
                &d0,
                &with(t(srctd.clone()), "offsets", t(offsets.clone()))
            ),
            t(seg::segment_log_softmax(&srctd, 0, Segments::offsets(&offsets)).unwrap())
        );
    }

    #[test]
    fn segment_errors_are_typed_with_the_numbers() {
        let src = || t(array![1.0f32, 2.0, 3.0]);
        let ar = |r: &str| args(&[("reduce", Arg::Str(r.into()))]);
        let e = err("segment_reduce", &ar("sum"), &tensors(vec![("src", src())]));
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("offsets, ids, lengths"), "{e}");
        let e = err(
            "segment_reduce",
            &ar("sum"),
            &tensors(vec![
                ("src", src()),
                ("ids", t(array![0i64, 0, 1])),
                ("offsets", t(array![0i64, 3])),
            ]),
        );
        assert!(e.message().contains("offsets and ids"), "{e}");
        let e = err(
            "segment_reduce",
            &ar("sum"),
            &tensors(vec![("src", src()), ("offsets", t(array![[0i64, 3]]))]),
        );
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        assert!(
            e.message().contains("offsets must be 1-D") && e.message().contains("[1, 2]"),
            "{e}"
        );
        let e = err(
            "segment_reduce",
            &ar("sum"),
            &tensors(vec![("src", src()), ("offsets", t(array![0.0f64, 3.0]))]),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("offsets") && e.message().contains("float64"),
            "{e}"
        );
        let e = err(
            "segment_reduce",
            &ar("std"),
            &tensors(vec![
                ("src", t(array![1u8, 2, 3])),
                ("offsets", t(array![0i64, 3])),
            ]),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("std") && e.message().contains("uint8"),
            "{e}"
        );
        let e = err(
            "segment_reduce",
            &ar("nope"),
            &tensors(vec![("src", src()), ("offsets", t(array![0i64, 3]))]),
        );
        assert!(
            e.message()
                .starts_with("segment_reduce: reduce must be one of"),
            "{e}"
        );
        let e = err(
            "segment_reduce",
            &ar("sum"),
            &tensors(vec![("src", src()), ("offsets", t(array![0i64, 4]))]),
        );
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert!(e.message().contains("offsets[1] = 4"), "{e}");
        let e = err(
            "segment_reduce",
            &ar("sum"),
            &tensors(vec![("src", src()), ("lengths", t(array![1i64, 1]))]),
        );
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.message().contains("sum to 2") && e.message().contains("3 positions"),
            "{e}"
        );
        let mut b = ar("sum");
        b.set("num_segments", Arg::Int(2));
        let e = err(
            "segment_reduce",
            &b,
            &tensors(vec![("src", src()), ("lengths", t(array![3i64]))]),
        );
        assert!(e.message().contains("num_segments = 2"), "{e}");
        let e = err(
            "segment_arg_reduce",
            &ar("mean"),
            &tensors(vec![("src", src()), ("lengths", t(array![3i64]))]),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("segment_arg_reduce") && e.message().contains("mean"),
            "{e}"
        );
        let e = err(
            "segment_softmax",
            &Args::default(),
            &tensors(vec![
                ("src", t(array![1i8, 2])),
                ("ids", t(array![0i64, 0])),
            ]),
        );
        assert!(e.message().contains("int8"), "{e}");
        let e = err(
            "segment_any",
            &args(&[("dim", Arg::Int(1))]),
            &tensors(vec![("src", src()), ("ids", t(array![0i64, 0, 0]))]),
        );
        assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
        let e = err(
            "segment_reduce",
            &Args::default(),
            &tensors(vec![("src", src()), ("ids", t(array![0i64, 0, 0]))]),
        );
        assert!(e.message().contains("`reduce`"), "{e}");
    }

    #[test]
    fn bincount_matches_the_typed_functions_in_all_four_forms() {
        let x = array![1u8, 3, 1, 0];
        let x64 = x.mapv(i64::from);
        let a = |list: &[(&str, Arg)]| args(list);
        assert_eq!(
            one("bincount", &a(&[]), &tensors(vec![("input", t(x.clone()))])),
            t(seg::bincount(&x, 0).unwrap())
        );
        assert_eq!(
            one(
                "bincount",
                &a(&[("minlength", Arg::Int(6))]),
                &tensors(vec![("input", t(x64.clone()))])
            ),
            t(seg::bincount(&x64, 6).unwrap())
        );
        let w = array![0.5f32, 1.0, 2.0, -1.0];
        let wi = array![2i32, 3, 4, 5];
        assert_eq!(
            one(
                "bincount",
                &a(&[]),
                &tensors(vec![("input", t(x.clone())), ("weights", t(w.clone()))])
            ),
            t(seg::bincount_weighted(&x, &w, 0).unwrap())
        );
        assert_eq!(
            one(
                "bincount",
                &a(&[("dim", Arg::None)]),
                &tensors(vec![("input", t(x64.clone())), ("weights", t(wi.clone()))])
            ),
            t(seg::bincount_weighted(&x64, &wi, 0).unwrap())
        );
        let m = array![[0i32, 1, 1], [2, 2, 2]];
        let m64 = m.mapv(i64::from);
        assert_eq!(
            one(
                "bincount",
                &a(&[("dim", Arg::Int(1))]),
                &tensors(vec![("input", t(m.clone()))])
            ),
            t(seg::bincount_axis(&m, 1, 0).unwrap())
        );
        let mw = array![[1.5f64, 2.0, 0.5], [3.0, 4.0, 1.0]];
        assert_eq!(
            one(
                "bincount",
                &a(&[("dim", Arg::Int(0)), ("minlength", Arg::Int(4))]),
                &tensors(vec![("input", t(m64.clone())), ("weights", t(mw.clone()))])
            ),
            t(seg::bincount_weighted_axis(&m64, 0, &mw, 4).unwrap())
        );
        // Errors.
        let e = err("bincount", &a(&[]), &tensors(vec![("input", t(m.clone()))]));
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        assert!(e.message().contains("[2, 3]"), "{e}");
        let e = err(
            "bincount",
            &a(&[]),
            &tensors(vec![("input", t(array![1i64, -2]))]),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("-2"), "{e}");
        let e = err(
            "bincount",
            &a(&[]),
            &tensors(vec![("input", t(array![1.0f32]))]),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("bincount") && e.message().contains("float32"),
            "{e}"
        );
        let e = err(
            "bincount",
            &a(&[]),
            &tensors(vec![
                ("input", t(x.clone())),
                ("weights", t(Array1::<f32>::zeros(3))),
            ]),
        );
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.message().contains("[3]") && e.message().contains("[4]"),
            "{e}"
        );
        let e = err(
            "bincount",
            &a(&[("minlength", Arg::Int(-1))]),
            &tensors(vec![("input", t(x))]),
        );
        assert!(
            e.message()
                .contains("minlength must be non-negative, but got -1"),
            "{e}"
        );
        let e = err(
            "bincount",
            &a(&[("dim", Arg::Int(2))]),
            &tensors(vec![("input", t(m))]),
        );
        assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
        assert!(
            err("bincount", &a(&[]), &Tensors::new())
                .message()
                .contains("`input`")
        );
    }
}

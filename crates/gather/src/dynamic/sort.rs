//! sort, argsort, topk and repeat_interleave, dynamically typed.
//!
//! Arguments, by the conformance suite's names (absent ones take PyTorch's defaults):
//! - `sort` / `argsort`: `dim` (default -1), `descending` (false), `stable` (false; `null` too);
//!   outputs `values` and `indices` (`i64`), or `output` (`i64`) for argsort;
//! - `topk`: `k`, `dim` (-1), `largest` (true), `sorted` (true); outputs `values`, `indices`;
//! - `repeat_interleave`: input tensor `input` and either a `repeats` tensor input (any integer
//!   dtype) or an integer arg `repeats`; `dim` (int or null, default null); optional `output_size`.
//!   Without an `input` tensor it is the repeats-only form, whose output has the dtype of
//!   `repeats` for `int32`/`int64` repeats (as PyTorch) and `int64` for the other integer dtypes.

use super::Read;
use super::{Arg, Args, Inputs, Tensor, TensorView, index_dtype_error, input};
use super::{with_index_tensor, with_view};
use crate::dims::normalize_dim;
use crate::error::{Error, Result};
use crate::ops::{repeat, sort};

/// `dim`, or `default` when absent.
fn dim_or(args: &Args, default: isize) -> Result<isize> {
    Ok(args.opt_int("dim")?.map_or(default, |d| d as isize))
}

/// A boolean that may also be absent or `null` (PyTorch's `stable=None`), giving `default`.
fn opt_bool(args: &Args, name: &str, default: bool) -> Result<bool> {
    match args.get(name) {
        None | Some(Arg::None) => Ok(default),
        _ => args.bool_or(name, default),
    }
}

/// The arguments of `sort`, `argsort` and `topk` that every device reads alike: `dim` (default
/// -1) and whether the order is flipped (`descending`, default false; topk's `largest`, default
/// true). `stable` and topk's `sorted` are read too (bool or null) but change nothing: every
/// order is the stable one, best first.
///
/// ```
/// use gather::dynamic::{Arg, Args, order_args};
/// let mut a = Args::default();
/// assert_eq!(order_args("topk", &a).unwrap(), (-1, true));
/// a.set("descending", Arg::Bool(true));
/// a.set("dim", Arg::Int(0));
/// assert_eq!(order_args("sort", &a).unwrap(), (0, true));
/// ```
pub fn order_args(op: &str, args: &Args) -> Result<(isize, bool)> {
    let dim = dim_or(args, -1)?;
    let flip = if op == "topk" {
        opt_bool(args, "sorted", true)?;
        opt_bool(args, "largest", true)?
    } else {
        opt_bool(args, "stable", false)?;
        opt_bool(args, "descending", false)?
    };
    Ok((dim, flip))
}

pub(crate) fn sort_like(
    op: &str,
    args: &Args,
    inputs: &dyn Inputs,
) -> Result<Vec<(String, Tensor)>> {
    let x = input(inputs, "input")?;
    // `stable` and `sorted` change nothing: every order here is the stable one, best first.
    let (dim, flip) = order_args(op, args)?;
    let (values, indices) = match op {
        "sort" => with_view!(x, a => {
            let (v, i) = sort::sort(a, dim, flip, true)?;
            (Tensor::from(v), i)
        }),
        "topk" => {
            let k = args.int("k")?;
            // The same checks as the typed topk, which cannot see a negative k.
            sort::check_topk(x.shape(), k, dim, x.dtype())?;
            let k = k as usize;
            with_view!(x, a => {
                let (v, i) = sort::topk(a, k, dim, flip, true)?;
                (Tensor::from(v), i)
            })
        }
        _ => return Err(Error::invalid(format!("sort_like: unknown op `{op}`"))),
    };
    Ok(vec![
        ("values".to_string(), values),
        ("indices".to_string(), Tensor::from(indices)),
    ])
}

pub(crate) fn argsort(args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let (dim, descending) = order_args("argsort", args)?;
    with_view!(x, a => Ok(Tensor::from(sort::argsort(a, dim, descending, true)?)))
}

/// `repeat_interleave`'s `dim` and `output_size` arguments (either may be absent or null), checked:
/// `output_size` must be non-negative. For other devices that run the op (the CLI's GPU path).
///
/// ```
/// use gather::dynamic::{Arg, Args, repeat_interleave_args};
/// let mut a = Args::default();
/// a.set("dim", Arg::Int(-1));
/// assert_eq!(repeat_interleave_args(&a).unwrap(), (Some(-1), None));
/// a.set("output_size", Arg::Int(-2));
/// assert!(repeat_interleave_args(&a).is_err());
/// ```
pub fn repeat_interleave_args(args: &Args) -> Result<(Option<isize>, Option<usize>)> {
    const OP: &str = "repeat_interleave";
    let output_size = match args.opt_int("output_size")? {
        None => None,
        Some(o) => Some(usize::try_from(o).map_err(|_| {
            Error::invalid(format!("{OP}: output_size must be non-negative, got {o}"))
                .with_hint("output_size is the length of the output along dim; leave it out (null) to have it computed")
        })?),
    };
    Ok((args.opt_int("dim")?.map(|d| d as isize), output_size))
}

/// The one count of `repeat_interleave` without a repeats tensor (the `repeats` argument), for an
/// input of `ndim` dims: PyTorch wraps `dim` first, then requires the count to be non-negative.
/// Errors are named `op` (the forward's name, or its gradient's).
///
/// ```
/// use gather::dynamic::{Arg, Args, repeat_interleave_count};
/// let mut a = Args::default();
/// a.set("repeats", Arg::Int(3));
/// assert_eq!(repeat_interleave_count("repeat_interleave", &a, 2, Some(1)).unwrap(), 3);
/// assert!(repeat_interleave_count("repeat_interleave", &a, 2, Some(2)).is_err());
/// a.set("repeats", Arg::Int(-1));
/// let e = repeat_interleave_count("grad::repeat_interleave", &a, 2, None).unwrap_err();
/// assert!(e.message().starts_with("grad::repeat_interleave: Repeats must be non-negative"));
/// ```
pub fn repeat_interleave_count(
    op: &str,
    args: &Args,
    ndim: usize,
    dim: Option<isize>,
) -> Result<usize> {
    let r = args.int("repeats")?;
    if let Some(d) = dim {
        normalize_dim(op, d, ndim)?;
    }
    usize::try_from(r).map_err(|_| {
        Error::invalid(format!("{op}: Repeats must be non-negative (repeats = {r})"))
            .with_hint("repeats counts the copies of every slice, so it must be >= 0; use 0 for an empty result")
    })
}

pub(crate) fn repeat_interleave(args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    const OP: &str = "repeat_interleave";
    let (dim, output_size) = repeat_interleave_args(args)?;
    match (inputs.tensor("input"), inputs.tensor("repeats")) {
        (None, Some(r)) => {
            let positions = with_index_tensor!(r, a => repeat::repeat_interleave_repeats(a, output_size)?,
                _ => return Err(index_dtype_error(OP, "repeats", &r)));
            let positions = positions.into_dyn();
            // PyTorch returns the repeats' dtype. The positions are below repeats.len() and
            // ascending, so the last one says whether they fit.
            let last = positions.last().copied().unwrap_or(0);
            macro_rules! in_dtype {
                ($($v:ident => $t:ty),*) => {
                    match r {
                        $(TensorView::$v(_) if <$t>::try_from(last).is_ok() => {
                            Ok(Tensor::from(positions.mapv(|p| p as $t)))
                        })*
                        TensorView::I64(_) => Ok(Tensor::from(positions)),
                        _ => Err(Error::invalid(format!(
                            "{OP}: the positions (up to {last}) do not fit in {}",
                            r.dtype()
                        ))
                        .with_hint("pass the repeats as int64")),
                    }
                };
            }
            in_dtype!(I8 => i8, I16 => i16, I32 => i32, U8 => u8, U16 => u16, U32 => u32, U64 => u64)
        }
        (None, None) => Err(Error::invalid(format!(
            "{OP}: missing input tensor `input` (or `repeats` for the repeats-only form)"
        ))),
        // Repeating only moves elements: it runs on the moved type (see `Moved`).
        (Some(x), Some(r)) => {
            with_index_tensor!(r, ri => Read::RepeatInterleave(ri, dim, output_size).on(&x),
            _ => Err(index_dtype_error(OP, "repeats", &r)))
        }
        (Some(x), None) => {
            let r = repeat_interleave_count(OP, args, x.shape().len(), dim)?;
            Read::RepeatInterleaveScalar(r, dim, output_size).on(&x)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::test_util::{args, tensors};
    use super::*;
    use crate::dynamic::Tensors;
    use crate::element::DType;
    use crate::error::ErrorKind;
    use ndarray::{arr0, array};

    #[test]
    fn sort_and_topk_return_named_values_and_int64_indices() {
        let inputs = tensors(vec![(
            "input",
            Tensor::from(array![3.0f32, f32::NAN, 1.0].into_dyn()),
        )]);
        let out = call(
            "sort",
            &args(&[
                ("dim", Arg::Int(0)),
                ("descending", Arg::Bool(true)),
                ("stable", Arg::None),
            ]),
            &inputs,
        )
        .unwrap();
        assert_eq!(out[0].0, "values");
        assert_eq!(
            out[1],
            (
                "indices".to_string(),
                Tensor::from(array![1i64, 0, 2].into_dyn())
            )
        );
        let out = call(
            "topk",
            &args(&[
                ("k", Arg::Int(2)),
                ("dim", Arg::Int(-1)),
                ("largest", Arg::Bool(false)),
                ("sorted", Arg::Bool(false)),
            ]),
            &inputs,
        )
        .unwrap();
        assert_eq!(
            out[0],
            (
                "values".to_string(),
                Tensor::from(array![1.0f32, 3.0].into_dyn())
            )
        );
        assert_eq!(out[1].1, Tensor::from(array![2i64, 0].into_dyn()));
        let out = call("argsort", &args(&[]), &inputs).unwrap();
        assert_eq!(
            out[0],
            (
                "output".to_string(),
                Tensor::from(array![2i64, 0, 1].into_dyn())
            )
        );
    }

    #[test]
    fn topk_errors_map_to_the_suite_categories() {
        let x = tensors(vec![(
            "input",
            Tensor::from(array![[1i8, 2], [3, 4]].into_dyn()),
        )]);
        let k = |k: i64, dim: i64| {
            call(
                "topk",
                &args(&[("k", Arg::Int(k)), ("dim", Arg::Int(dim))]),
                &x,
            )
            .unwrap_err()
            .kind()
        };
        assert_eq!(k(-1, 0), ErrorKind::InvalidArgument);
        assert_eq!(k(-1, 5), ErrorKind::DimOutOfRange);
        assert_eq!(k(3, 0), ErrorKind::InvalidArgument);
        let b = tensors(vec![(
            "input",
            Tensor::from(array![true, false].into_dyn()),
        )]);
        let e = call(
            "topk",
            &args(&[("k", Arg::Int(1)), ("dim", Arg::Int(0))]),
            &b,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn repeat_interleave_dispatches_every_form() {
        let x = Tensor::from(array![[1u8, 2], [3, 4]].into_dyn());
        // Tensor repeats of a narrow integer dtype.
        let ins = tensors(vec![
            ("input", x.clone()),
            ("repeats", Tensor::from(array![2i16, 0].into_dyn())),
        ]);
        let out = call("repeat_interleave", &args(&[("dim", Arg::Int(0))]), &ins).unwrap();
        assert_eq!(out[0].1, Tensor::from(array![[1u8, 2], [1, 2]].into_dyn()));
        // Scalar repeats, flattened.
        let ins = tensors(vec![("input", x.clone())]);
        let out = call(
            "repeat_interleave",
            &args(&[
                ("repeats", Arg::Int(2)),
                ("dim", Arg::None),
                ("output_size", Arg::Int(8)),
            ]),
            &ins,
        )
        .unwrap();
        assert_eq!(
            out[0].1,
            Tensor::from(array![1u8, 1, 2, 2, 3, 3, 4, 4].into_dyn())
        );
        // Repeats only: int64 in, int64 out; int32 in, int32 out (as PyTorch).
        let ins = tensors(vec![("repeats", Tensor::from(array![1i64, 2].into_dyn()))]);
        let out = call("repeat_interleave", &args(&[("dim", Arg::None)]), &ins).unwrap();
        assert_eq!(out[0].1, Tensor::from(array![0i64, 1, 1].into_dyn()));
        let ins = tensors(vec![("repeats", Tensor::from(array![1i32, 2].into_dyn()))]);
        let out = call("repeat_interleave", &args(&[]), &ins).unwrap();
        assert_eq!(out[0].1.dtype(), DType::I32);
        // Every integer dtype comes back as itself, with the same positions; positions past
        // the dtype's range are an error that names it.
        macro_rules! each {
            ($($t:ty),*) => {$(
                let ins = tensors(vec![("repeats", Tensor::from(array![2 as $t, 0, 1].into_dyn()))]);
                let out = call("repeat_interleave", &args(&[]), &ins).unwrap();
                assert_eq!(out[0].1, Tensor::from(array![0 as $t, 0, 2].into_dyn()));
            )*};
        }
        each!(i8, i16, u8, u16, u32, u64);
        let long = ndarray::Array1::<i8>::from_elem(200, 1).into_dyn();
        let e = call(
            "repeat_interleave",
            &args(&[]),
            &tensors(vec![("repeats", Tensor::from(long))]),
        )
        .unwrap_err();
        assert!(
            e.message().contains("up to 199") && e.message().contains("int8"),
            "{e}"
        );
    }

    #[test]
    fn repeat_interleave_errors_map_to_the_suite_categories() {
        let x = Tensor::from(ndarray::Array2::<f32>::zeros((3, 4)).into_dyn());
        let run = |a: Args, ins: Tensors| call("repeat_interleave", &a, &ins).unwrap_err().kind();
        let with = |r: Tensor| tensors(vec![("input", x.clone()), ("repeats", r)]);
        assert_eq!(
            run(
                args(&[("repeats", Arg::Int(-1)), ("dim", Arg::Int(0))]),
                tensors(vec![("input", x.clone())])
            ),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            run(
                args(&[("repeats", Arg::Int(-1)), ("dim", Arg::Int(7))]),
                tensors(vec![("input", x.clone())])
            ),
            ErrorKind::DimOutOfRange
        );
        assert_eq!(
            run(
                args(&[("dim", Arg::Int(0))]),
                with(Tensor::from(array![1i64, -1, 1].into_dyn()))
            ),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            run(
                args(&[("dim", Arg::Int(0)), ("output_size", Arg::Int(4))]),
                with(Tensor::from(array![1i64, 1, 1].into_dyn()))
            ),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            run(
                args(&[("dim", Arg::Int(0))]),
                with(Tensor::from(array![[1i64, 1, 1]].into_dyn()))
            ),
            ErrorKind::RankMismatch
        );
        assert_eq!(
            run(
                args(&[("dim", Arg::Int(0))]),
                with(Tensor::from(array![1i64, 1].into_dyn()))
            ),
            ErrorKind::ShapeMismatch
        );
        assert_eq!(
            run(
                args(&[("dim", Arg::Int(0))]),
                with(Tensor::from(array![1.0f32, 1.0, 1.0].into_dyn()))
            ),
            ErrorKind::InvalidArgument
        );
        let zero_d = tensors(vec![("input", Tensor::from(arr0(1.0f32).into_dyn()))]);
        assert_eq!(
            run(
                args(&[("repeats", Arg::Int(2)), ("dim", Arg::Int(0))]),
                zero_d
            ),
            ErrorKind::DimOutOfRange
        );
        let only = tensors(vec![("repeats", Tensor::from(array![1.5f64].into_dyn()))]);
        assert_eq!(run(args(&[]), only), ErrorKind::InvalidArgument);
        assert_eq!(run(args(&[]), tensors(vec![])), ErrorKind::InvalidArgument);
    }
}

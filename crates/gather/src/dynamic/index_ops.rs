//! index_select and the index_* family, dynamically typed.
//!
//! The checks run in PyTorch's order: the reduction name (`index_reduce`), `dim`, the index's rank,
//! the index's dtype (any integer type is accepted; float and bool indices are errors, also when
//! empty, as in PyTorch), the source's dtype, then the typed op's shape and bounds checks. Scalars
//! (`alpha`, `value`) are converted to the element type with
//! [`Element::from_scalar`](crate::Element::from_scalar), which
//! truncates a float for an integer array and fails when the value does not fit.

use ndarray::{ArrayViewD, ArrayViewMutD};

use super::Read;
use super::{
    Args, Inputs, Tensor, TensorElem, TensorViewMut, index_dtype_error, input, same_dtype,
};
use super::{with_index_tensor, with_view_mut};
use crate::element::Scalar;
use crate::error::Result;
use crate::index::IndexElem;
use crate::kernels::words::Moved;
use crate::ops::index::{check_dim_and_vector, check_select_shapes, parse_index_reduce};

/// `index_reduce`'s `reduce` argument: `prod`, `mean`, `amax` or `amin` (no `sum`, no
/// `max`/`min` aliases, as in PyTorch), or the CPU library's error for the name, with its hint.
///
/// ```
/// use gather::dynamic::{Arg, Args, index_reduce_arg};
/// let mut a = Args::default();
/// a.set("reduce", Arg::Str("amax".into()));
/// assert_eq!(index_reduce_arg(&a).unwrap(), gather::Reduce::Amax);
/// a.set("reduce", Arg::Str("sum".into()));
/// assert!(index_reduce_arg(&a).unwrap_err().hint().unwrap().contains("index_add"));
/// ```
pub fn index_reduce_arg(args: &Args) -> Result<crate::Reduce> {
    parse_index_reduce(args.str("reduce")?)
}

pub(crate) fn index_select(args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    with_index_tensor!(index, i => Read::IndexSelect(dim, i).on(&x),
    _ => {
        // PyTorch checks the dtype after the shapes, and also for an empty index.
        check_select_shapes("index_select", x.shape(), dim, index.shape(), index.dtype())?;
        Err(index_dtype_error("index_select", "index", &index))
    })
}

pub(crate) fn index_family(
    op: &str,
    args: &Args,
    target: &mut TensorViewMut<'_>,
    inputs: &dyn Inputs,
) -> Result<()> {
    if op == "index_reduce" {
        parse_index_reduce(args.str("reduce")?)?;
    }
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    check_dim_and_vector(op, target.shape(), dim, index.shape(), index.dtype())?;
    with_view_mut!(*target, dst => {
        with_index_tensor!(index, i => index_typed(op, args, dst, dim, i, inputs),
            _ => Err(index_dtype_error(op, "index", &index)))
    })
}

fn index_typed<T: TensorElem + Moved, I: IndexElem>(
    op: &str,
    args: &Args,
    dst: &mut ArrayViewMutD<'_, T>,
    dim: isize,
    index: &ArrayViewD<'_, I>,
    inputs: &dyn Inputs,
) -> Result<()> {
    use crate::ops::index as ix;
    match op {
        "index_add" => {
            let source = same_dtype::<T>(op, "source", &input(inputs, "source")?)?;
            let alpha = match args.get("alpha") {
                None => Scalar::Int(1),
                Some(_) => args.scalar("alpha")?,
            };
            ix::index_add_inplace(dst, dim, index, &source, T::from_scalar(alpha)?)
        }
        "index_copy" => {
            let source = same_dtype::<T>(op, "source", &input(inputs, "source")?)?;
            let (mut d, s) = (dst.view_mut(), T::moved(&source.view()));
            ix::index_copy_inplace(&mut T::moved_mut(&mut d), dim, index, &s)
        }
        "index_fill" => {
            let value = T::from_scalar(args.scalar("value")?)?.to_moved();
            ix::index_fill_inplace(&mut T::moved_mut(&mut dst.view_mut()), dim, index, value)
        }
        "index_reduce" => {
            let source = same_dtype::<T>(op, "source", &input(inputs, "source")?)?;
            let reduce = parse_index_reduce(args.str("reduce")?)?;
            let include_self = args.bool_or("include_self", true)?;
            ix::index_reduce_inplace(dst, dim, index, &source, reduce, include_self)
        }
        _ => unreachable!("index_family is called for the index_* ops only"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{args, tensors};
    use super::super::{Arg, call, call_inplace};
    use super::*;
    use crate::error::ErrorKind;
    use ndarray::{arr0, array};

    #[test]
    fn float_alpha_on_an_integer_array_is_truncated() {
        let inputs = tensors(vec![
            ("input", Tensor::from(array![0i64, 0].into_dyn())),
            ("index", Tensor::from(array![1i64, 1].into_dyn())),
            ("source", Tensor::from(array![3i64, 4].into_dyn())),
        ]);
        let out = call(
            "index_add",
            &args(&[("dim", Arg::Int(0)), ("alpha", Arg::Float(1.5))]),
            &inputs,
        )
        .unwrap();
        assert_eq!(out[0].1, Tensor::from(array![0i64, 7].into_dyn()));
    }

    #[test]
    fn fill_value_that_does_not_fit_is_invalid_and_changes_nothing() {
        let inputs = tensors(vec![
            ("input", Tensor::from(array![1u8, 2].into_dyn())),
            ("index", Tensor::from(array![0i64].into_dyn())),
        ]);
        let a = args(&[("dim", Arg::Int(0)), ("value", Arg::Int(300))]);
        let mut target = inputs["input"].clone();
        let e = call_inplace("index_fill", &a, target.view_mut(), &inputs).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(target, inputs["input"]);
        let inf = args(&[("dim", Arg::Int(0)), ("value", Arg::Str("-inf".into()))]);
        let x = tensors(vec![
            ("input", Tensor::from(array![1.0f32, 2.0].into_dyn())),
            ("index", Tensor::from(array![-1i64].into_dyn())),
        ]);
        assert_eq!(
            call("index_fill", &inf, &x).unwrap()[0].1,
            Tensor::from(array![1.0f32, f32::NEG_INFINITY].into_dyn())
        );
    }

    #[test]
    fn float_index_is_rejected_after_the_shape_checks_even_when_empty() {
        let x = Tensor::from(array![[1.0f32, 2.0], [3.0, 4.0]].into_dyn());
        let a = args(&[("dim", Arg::Int(1))]);
        let empty = tensors(vec![
            ("input", x.clone()),
            (
                "index",
                Tensor::from(ndarray::Array1::<f32>::zeros(0).into_dyn()),
            ),
        ]);
        assert_eq!(
            call("index_select", &a, &empty).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        let two_d = tensors(vec![
            ("input", x.clone()),
            ("index", Tensor::from(array![[1.0f32]].into_dyn())),
        ]);
        assert_eq!(
            call("index_select", &a, &two_d).unwrap_err().kind(),
            ErrorKind::RankMismatch
        );
        let bad_dim = args(&[("dim", Arg::Int(2))]);
        assert_eq!(
            call("index_select", &bad_dim, &empty).unwrap_err().kind(),
            ErrorKind::DimOutOfRange
        );
        let add = tensors(vec![
            ("input", x.clone()),
            ("index", Tensor::from(array![0.0f64].into_dyn())),
            ("source", Tensor::from(array![[1.0f32], [1.0]].into_dyn())),
        ]);
        let e = call(
            "index_add",
            &args(&[("dim", Arg::Int(1)), ("alpha", Arg::Int(1))]),
            &add,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn source_of_another_dtype_is_invalid() {
        let inputs = tensors(vec![
            ("input", Tensor::from(array![1.0f32, 2.0].into_dyn())),
            ("index", Tensor::from(array![0i64].into_dyn())),
            ("source", Tensor::from(array![1.0f64].into_dyn())),
        ]);
        let e = call("index_copy", &args(&[("dim", Arg::Int(0))]), &inputs).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn index_reduce_checks_the_reduction_name_first() {
        let inputs = tensors(vec![
            ("input", Tensor::from(array![1.0f32, 2.0].into_dyn())),
            ("index", Tensor::from(array![0i64].into_dyn())),
            ("source", Tensor::from(array![5.0f32].into_dyn())),
        ]);
        for bad in ["sum", "max", "min", "multiply"] {
            let a = args(&[
                ("dim", Arg::Int(7)),
                ("reduce", Arg::Str(bad.into())),
                ("include_self", Arg::Bool(true)),
            ]);
            assert_eq!(
                call("index_reduce", &a, &inputs).unwrap_err().kind(),
                ErrorKind::InvalidArgument,
                "{bad}"
            );
        }
        let a = args(&[
            ("dim", Arg::Int(0)),
            ("reduce", Arg::Str("amax".into())),
            ("include_self", Arg::Bool(true)),
        ]);
        assert_eq!(
            call("index_reduce", &a, &inputs).unwrap()[0].1,
            Tensor::from(array![5.0f32, 2.0].into_dyn())
        );
    }

    #[test]
    fn int32_and_narrow_indices_are_accepted_everywhere() {
        let x = Tensor::from(array![10i16, 20, 30].into_dyn());
        for index in [
            Tensor::from(arr0(2i32).into_dyn()),
            Tensor::from(arr0(2u8).into_dyn()),
            Tensor::from(arr0(-1i16).into_dyn()),
        ] {
            let inputs = tensors(vec![("input", x.clone()), ("index", index.clone())]);
            let out = call(
                "index_fill",
                &args(&[("dim", Arg::Int(0)), ("value", Arg::Int(0))]),
                &inputs,
            )
            .unwrap();
            assert_eq!(out[0].1, Tensor::from(array![10i16, 20, 0].into_dyn()));
        }
    }
}

//! take, take_along_dim and put, dynamically typed.
//!
//! Every integer index dtype is accepted (PyTorch requires `int64` for these ops; the conformance
//! suite allows this under its rule R4a); float and bool indices are errors.

use ndarray::{ArrayViewD, ArrayViewMutD};

use super::Read;
use super::{
    Args, Inputs, Tensor, TensorElem, TensorView, TensorViewMut, index_dtype_error, input,
    same_dtype,
};
use super::{with_index_tensor, with_view_mut};
use crate::error::Result;
use crate::index::IndexElem;
use crate::ops::put::put_inplace;

pub(crate) fn take(_args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    with_index_tensor!(index, i => Read::Take(i).on(&x),
        _ => Err(index_dtype_error("take", "index", &index)))
}

pub(crate) fn take_along_dim(args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    let dim = args.opt_int("dim")?.map(|d| d as isize);
    with_index_tensor!(index, i => Read::TakeAlongDim(dim, i).on(&x),
        _ => Err(index_dtype_error("take_along_dim", "indices", &index)))
}

/// `select_batched`: arguments `dim` (the selected axis) and `batch_dims` (default 0).
pub(crate) fn select_batched(args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    let batch_dims = batch_dims(args)?;
    with_index_tensor!(index, i => Read::SelectBatched(dim, i, batch_dims).on(&x),
        _ => Err(index_dtype_error("select_batched", "index", &index)))
}

/// `select_batched`'s `batch_dims` argument (absent: 0), which must be non-negative.
///
/// ```
/// use gather::dynamic::{Arg, Args, batch_dims};
/// let mut a = Args::default();
/// assert_eq!(batch_dims(&a).unwrap(), 0);
/// a.set("batch_dims", Arg::Int(-1));
/// assert!(batch_dims(&a).is_err());
/// ```
pub fn batch_dims(args: &Args) -> Result<usize> {
    let b = args.opt_int("batch_dims")?.unwrap_or(0);
    usize::try_from(b).map_err(|_| {
        crate::Error::invalid(format!(
            "select_batched: batch_dims must be non-negative, but got {b}"
        ))
        .with_hint("batch_dims counts the leading axes the index shares with the input: 0, 1, ...")
    })
}

pub(crate) fn put(args: &Args, target: &mut TensorViewMut<'_>, inputs: &dyn Inputs) -> Result<()> {
    let index = input(inputs, "index")?;
    let source = input(inputs, "source")?;
    let accumulate = args.bool_or("accumulate", false)?;
    with_view_mut!(*target, dst => {
        with_index_tensor!(index, i => put_typed(dst, i, &source, accumulate),
            _ => Err(index_dtype_error("put", "index", &index)))
    })
}

fn put_typed<T: TensorElem, I: IndexElem>(
    dst: &mut ArrayViewMutD<'_, T>,
    index: &ArrayViewD<'_, I>,
    source: &TensorView<'_>,
    accumulate: bool,
) -> Result<()> {
    let source = same_dtype::<T>("put_()", "source", source)?;
    put_inplace(dst, index, &source, accumulate)
}

#[cfg(test)]
mod tests {
    use crate::ErrorKind;
    use crate::dynamic::{Arg, Args, Tensor, Tensors, call, call_inplace};
    use ndarray::array;

    fn inputs(pairs: Vec<(&str, Tensor)>) -> Tensors {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    #[test]
    fn every_integer_index_dtype_works_and_float_indices_are_rejected() {
        let x = Tensor::from(array![[1.0f32, 2.0], [3.0, 4.0]].into_dyn());
        let ins = inputs(vec![
            ("input", x.clone()),
            ("index", Tensor::from(array![3i32, -4].into_dyn())),
        ]);
        let out = call("take", &Args::default(), &ins).unwrap();
        assert_eq!(out[0].1, Tensor::from(array![4.0f32, 1.0].into_dyn()));
        let ins = inputs(vec![
            ("input", x.clone()),
            ("index", Tensor::from(array![[1u8], [0]].into_dyn())),
        ]);
        let mut args = Args::default();
        args.set("dim", Arg::Int(1));
        let out = call("take_along_dim", &args, &ins).unwrap();
        assert_eq!(out[0].1, Tensor::from(array![[2.0f32], [3.0]].into_dyn()));
        args.set("dim", Arg::None);
        assert_eq!(
            call("take_along_dim", &args, &ins).unwrap()[0].1.shape(),
            &[2]
        );
        let ins = inputs(vec![
            ("input", x),
            ("index", Tensor::from(array![0.0f32].into_dyn())),
        ]);
        assert_eq!(
            call("take", &Args::default(), &ins).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }

    #[test]
    fn select_batched_runs_by_name_with_any_integer_index() {
        let x = Tensor::from(
            ndarray::Array::from_shape_fn((2, 3, 2), |(a, b, c)| (a * 100 + b * 10 + c) as f32)
                .into_dyn(),
        );
        let mut args = Args::default();
        args.set("dim", Arg::Int(1));
        args.set("batch_dims", Arg::Int(1));
        for index in [
            Tensor::from(array![[2i64, 0], [1, 1]].into_dyn()),
            Tensor::from(array![[2u8, 0], [1, 1]].into_dyn()),
            Tensor::from(array![[2i32, 0], [1, 1]].into_dyn()),
        ] {
            let ins = inputs(vec![("input", x.clone()), ("index", index)]);
            let out = call("select_batched", &args, &ins).unwrap();
            assert_eq!(
                out[0].1,
                Tensor::from(
                    array![
                        [[20.0f32, 21.0], [0.0, 1.0]],
                        [[110.0, 111.0], [110.0, 111.0]]
                    ]
                    .into_dyn()
                )
            );
        }
        // batch_dims defaults to 0 (index_select for a 1-d index).
        let mut args0 = Args::default();
        args0.set("dim", Arg::Int(0));
        let ins = inputs(vec![
            ("input", x.clone()),
            ("index", Tensor::from(array![1i64].into_dyn())),
        ]);
        assert_eq!(
            call("select_batched", &args0, &ins).unwrap()[0].1.shape(),
            &[1, 3, 2]
        );
        args.set("batch_dims", Arg::Int(-1));
        let e = call("select_batched", &args, &ins).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let ins = inputs(vec![
            ("input", x),
            ("index", Tensor::from(array![1.0f32].into_dyn())),
        ]);
        let e = call("select_batched", &args0, &ins).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn select_batched_gradient_sums_into_the_rows_read() {
        let x = Tensor::from(ndarray::Array3::<f64>::zeros((2, 3, 2)).into_dyn());
        let mut args = Args::default();
        args.set("dim", Arg::Int(1));
        args.set("batch_dims", Arg::Int(1));
        let ins = inputs(vec![
            ("input", x),
            ("index", Tensor::from(array![[2i64, 2], [0, 1]].into_dyn())),
        ]);
        let g =
            Tensor::from(array![[[1.0f64, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]].into_dyn());
        let grads = crate::dynamic::call_grad("select_batched", &args, &ins, &g.view()).unwrap();
        assert_eq!(grads[0].0, "grad_input");
        assert_eq!(
            grads[0].1,
            Tensor::from(
                array![
                    [[0.0f64, 0.0], [0.0, 0.0], [4.0, 6.0]],
                    [[5.0, 6.0], [7.0, 8.0], [0.0, 0.0]]
                ]
                .into_dyn()
            )
        );
    }

    #[test]
    fn put_checks_the_source_dtype_before_writing() {
        let mut target = Tensor::from(array![1i64, 2, 3].into_dyn());
        let mut args = Args::default();
        args.set("accumulate", Arg::Bool(true));
        let ins = inputs(vec![
            ("index", Tensor::from(array![0i64].into_dyn())),
            ("source", Tensor::from(array![5i32].into_dyn())),
        ]);
        let e = call_inplace("put", &args, target.view_mut(), &ins).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(target, Tensor::from(array![1i64, 2, 3].into_dyn()));
        let ins = inputs(vec![
            ("input", target.clone()),
            ("index", Tensor::from(array![0i64, -1].into_dyn())),
            ("source", Tensor::from(array![5i64, 6].into_dyn())),
        ]);
        let out = call("put", &args, &ins).unwrap();
        assert_eq!(out[0].1, Tensor::from(array![6i64, 2, 9].into_dyn()));
    }
}

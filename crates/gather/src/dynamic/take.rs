//! take, take_along_dim and put, dynamically typed.
//!
//! Every integer index dtype is accepted (PyTorch requires `int64` for these ops; the conformance
//! suite allows this under its rule R4a); float and bool indices are errors.

use super::{Args, Tensor, TensorElem, Tensors, index_dtype_error, input, same_dtype};
use crate::error::Result;
use crate::index::IndexElem;
use crate::ops::put::put_inplace;
use crate::ops::take as typed;
use crate::{with_index_tensor, with_tensor};

pub(crate) fn take(_args: &Args, inputs: &Tensors) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    with_tensor!(x, x => {
        with_index_tensor!(index, i => Ok(Tensor::from(typed::take(x, i)?.into_dyn())),
            _ => Err(index_dtype_error("take", "index", index)))
    })
}

pub(crate) fn take_along_dim(args: &Args, inputs: &Tensors) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    let dim = args.opt_int("dim")?.map(|d| d as isize);
    with_tensor!(x, x => {
        with_index_tensor!(index, i => Ok(Tensor::from(typed::take_along_dim(x, i, dim)?)),
            _ => Err(index_dtype_error("take_along_dim", "indices", index)))
    })
}

pub(crate) fn put(args: &Args, target: &mut Tensor, inputs: &Tensors) -> Result<()> {
    let index = input(inputs, "index")?;
    let source = input(inputs, "source")?;
    let accumulate = args.bool_or("accumulate", false)?;
    with_tensor!(target, dst => {
        with_index_tensor!(index, i => put_typed(dst, i, source, accumulate),
            _ => Err(index_dtype_error("put", "index", index)))
    })
}

fn put_typed<T: TensorElem, I: IndexElem>(
    dst: &mut ndarray::ArrayD<T>,
    index: &ndarray::ArrayD<I>,
    source: &Tensor,
    accumulate: bool,
) -> Result<()> {
    let source = same_dtype::<T>("put_()", "source", source)?;
    put_inplace(dst, index, source, accumulate)
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
    fn put_checks_the_source_dtype_before_writing() {
        let mut target = Tensor::from(array![1i64, 2, 3].into_dyn());
        let mut args = Args::default();
        args.set("accumulate", Arg::Bool(true));
        let ins = inputs(vec![
            ("index", Tensor::from(array![0i64].into_dyn())),
            ("source", Tensor::from(array![5i32].into_dyn())),
        ]);
        let e = call_inplace("put", &args, &mut target, &ins).unwrap_err();
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

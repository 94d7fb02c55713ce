//! take, take_along_dim and put, dynamically typed.
//!
//! Every integer index dtype is accepted (PyTorch requires `int64` for these ops; the conformance
//! suite allows this under its rule R4a); float and bool indices are errors.

use super::{index_dtype_error, input, same_dtype, Args, Tensor, TensorElem, Tensors};
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

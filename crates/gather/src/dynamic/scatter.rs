//! gather and the scatter family, dynamically typed.

use ndarray::ArrayD;

use super::{Arg, Args, Tensor, TensorElem, Tensors, index_dtype_error, input, same_dtype};
use crate::dims::normalize_dim;
use crate::error::{Error, Result};
use crate::index::IndexElem;
use crate::ops::scatter::{LegacyReduce, Reduce};
use crate::{with_index_tensor, with_tensor};

/// An index tensor of a non-integer dtype is accepted only when it is empty (PyTorch skips the
/// dtype check then); it is replaced by an empty `i64` index of the same shape.
pub(crate) fn empty_index_or_error(
    op: &str,
    index: &Tensor,
    ndim: usize,
    dim: isize,
) -> Result<ArrayD<i64>> {
    normalize_dim(op, dim, ndim)?;
    if index.is_empty() {
        Ok(ArrayD::zeros(index.shape()))
    } else {
        Err(index_dtype_error(op, "index", index))
    }
}

pub(crate) fn gather(args: &Args, inputs: &Tensors) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    with_tensor!(x, x => {
        with_index_tensor!(index, i => Ok(Tensor::from(crate::gather(x, dim, i)?)),
            _ => {
                let i = empty_index_or_error("gather", index, x.ndim(), dim)?;
                Ok(Tensor::from(crate::gather(x, dim, &i)?))
            })
    })
}

pub(crate) fn scatter_family(
    op: &str,
    args: &Args,
    target: &mut Tensor,
    inputs: &Tensors,
) -> Result<()> {
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    normalize_dim(op, dim, target.shape().len())?;
    with_tensor!(target, dst => {
        with_index_tensor!(index, i => scatter_typed(op, args, dst, dim, i, inputs),
            _ => {
                let i = empty_index_or_error(op, index, dst.ndim(), dim)?;
                scatter_typed(op, args, dst, dim, &i, inputs)
            })
    })
}

fn scatter_typed<T: TensorElem, I: IndexElem>(
    op: &str,
    args: &Args,
    dst: &mut ArrayD<T>,
    dim: isize,
    index: &ArrayD<I>,
    inputs: &Tensors,
) -> Result<()> {
    match op {
        "scatter" => {
            let reduce = match args.get("reduce") {
                None | Some(Arg::None) => None,
                Some(Arg::Str(s)) => Some(s.parse::<LegacyReduce>()?),
                Some(other) => {
                    return Err(Error::invalid(format!(
                        "scatter: reduce must be a string, got {other:?}"
                    )));
                }
            };
            match (inputs.get("src"), reduce) {
                (Some(src), None) => {
                    crate::scatter_inplace(dst, dim, index, same_dtype::<T>(op, "src", src)?)
                }
                (Some(src), Some(r)) => crate::ops::scatter::scatter_legacy_inplace(
                    dst,
                    dim,
                    index,
                    same_dtype::<T>(op, "src", src)?,
                    r,
                ),
                (None, None) => {
                    crate::scatter_inplace(dst, dim, index, T::from_scalar(args.scalar("value")?)?)
                }
                (None, Some(r)) => crate::ops::scatter::scatter_legacy_inplace(
                    dst,
                    dim,
                    index,
                    T::from_scalar(args.scalar("value")?)?,
                    r,
                ),
            }
        }
        "scatter_add" => crate::scatter_add_inplace(
            dst,
            dim,
            index,
            same_dtype::<T>(op, "src", input(inputs, "src")?)?,
        ),
        "scatter_reduce" => {
            let src = same_dtype::<T>(op, "src", input(inputs, "src")?)?;
            let reduce: Reduce = args.str("reduce")?.parse()?;
            let include_self = args.bool_or("include_self", true)?;
            crate::scatter_reduce_inplace(dst, dim, index, src, reduce, include_self)
        }
        _ => unreachable!("scatter_family is called for scatter ops only"),
    }
}

//! sort, argsort, topk and repeat_interleave, dynamically typed.

use super::{Args, Tensor, Tensors};
use crate::error::{Error, Result};

pub(crate) fn sort_like(
    op: &str,
    _args: &Args,
    _inputs: &Tensors,
) -> Result<Vec<(String, Tensor)>> {
    Err(Error::invalid(format!("{op}: not implemented yet")))
}

pub(crate) fn argsort(_args: &Args, _inputs: &Tensors) -> Result<Tensor> {
    Err(Error::invalid("argsort: not implemented yet"))
}

pub(crate) fn repeat_interleave(_args: &Args, _inputs: &Tensors) -> Result<Tensor> {
    Err(Error::invalid("repeat_interleave: not implemented yet"))
}

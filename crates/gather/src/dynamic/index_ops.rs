//! index_select and the index_* family, dynamically typed.

use super::{Args, Tensor, Tensors};
use crate::error::{Error, Result};

pub(crate) fn index_select(_args: &Args, _inputs: &Tensors) -> Result<Tensor> {
    Err(Error::invalid("index_select: not implemented yet"))
}

pub(crate) fn index_family(
    op: &str,
    _args: &Args,
    _target: &mut Tensor,
    _inputs: &Tensors,
) -> Result<()> {
    Err(Error::invalid(format!("{op}: not implemented yet")))
}

//! masked_select and masked_scatter, dynamically typed.

use super::{Args, Tensor, Tensors};
use crate::error::{Error, Result};

pub(crate) fn masked_select(_args: &Args, _inputs: &Tensors) -> Result<Tensor> {
    Err(Error::invalid("masked_select: not implemented yet"))
}

pub(crate) fn masked_scatter(_args: &Args, _inputs: &Tensors) -> Result<Tensor> {
    Err(Error::invalid("masked_scatter: not implemented yet"))
}

pub(crate) fn masked_scatter_inplace(
    _args: &Args,
    _target: &mut Tensor,
    _inputs: &Tensors,
) -> Result<()> {
    Err(Error::invalid("masked_scatter: not implemented yet"))
}

//! take, take_along_dim and put, dynamically typed.

use super::{Args, Tensor, Tensors};
use crate::error::{Error, Result};

pub(crate) fn take(_args: &Args, _inputs: &Tensors) -> Result<Tensor> {
    Err(Error::invalid("take: not implemented yet"))
}

pub(crate) fn take_along_dim(_args: &Args, _inputs: &Tensors) -> Result<Tensor> {
    Err(Error::invalid("take_along_dim: not implemented yet"))
}

pub(crate) fn put(_args: &Args, _target: &mut Tensor, _inputs: &Tensors) -> Result<()> {
    Err(Error::invalid("put: not implemented yet"))
}

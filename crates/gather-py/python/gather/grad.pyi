"""Type stubs of `gather.grad`: each function takes the output's gradient, then the op's arguments."""

from typing import Literal, Optional, Tuple, Union

import numpy as np

from . import Array, Bounds, DType, IndexReduce, Out, Reduce, Scalar

Parity = Literal["correct", "pytorch"]
Pair = Tuple[Out, Out]

def gather(grad_output: Array, input: Array, dim: int, index: Array, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def scatter(
    grad_output: Array,
    input: Array,
    dim: int,
    index: Array,
    src: Union[Array, Scalar, None] = None,
    *,
    value: Optional[Scalar] = None,
    reduce: Optional[Literal["add", "multiply"]] = None,
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
    dtype: DType = None,
) -> Union[Out, Pair]: ...
def scatter_add(grad_output: Array, input: Array, dim: int, index: Array, src: Array, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Pair: ...
def scatter_reduce(
    grad_output: Array,
    input: Array,
    dim: int,
    index: Array,
    src: Array,
    reduce: Reduce,
    *,
    include_self: bool = True,
    parity: Parity = "correct",
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
    dtype: DType = None,
) -> Pair: ...
def index_select(grad_output: Array, input: Array, dim: int, index: Array, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def index_add(
    grad_output: Array,
    input: Array,
    dim: int,
    index: Array,
    source: Array,
    *,
    alpha: Optional[Scalar] = None,
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
    dtype: DType = None,
) -> Pair: ...
def index_copy(grad_output: Array, input: Array, dim: int, index: Array, source: Array, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Pair: ...
def index_fill(grad_output: Array, input: Array, dim: int, index: Array, value: Scalar, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def index_reduce(
    grad_output: Array,
    input: Array,
    dim: int,
    index: Array,
    source: Array,
    reduce: IndexReduce,
    *,
    include_self: bool = True,
    parity: Parity = "correct",
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
    dtype: DType = None,
) -> Pair: ...
def take(grad_output: Array, input: Array, index: Array, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def take_along_dim(
    grad_output: Array, input: Array, indices: Array, dim: Optional[int] = None, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None
) -> Out: ...
def put(
    grad_output: Array, input: Array, index: Array, source: Array, accumulate: bool = False, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None
) -> Pair: ...
def masked_select(grad_output: Array, input: Array, mask: Array, *, dtype: DType = None) -> Out: ...
def masked_scatter(grad_output: Array, input: Array, mask: Array, source: Array, *, dtype: DType = None) -> Pair: ...
def sort(
    grad_output: Array, input: Array, dim: int = -1, descending: bool = False, *, stable: bool = False, dtype: DType = None
) -> Out: ...
def topk(
    grad_output: Array,
    input: Array,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,
    *,
    dtype: DType = None,
) -> Out: ...
def repeat_interleave(
    grad_output: Array,
    input: Array,
    repeats: Union[int, Array],
    dim: Optional[int] = None,
    *,
    output_size: Optional[int] = None,
    dtype: DType = None,
) -> Out: ...
def select_batched(
    grad_output: Array, input: Array, axis: int, index: Array, batch_dims: int = 0, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None
) -> Out: ...

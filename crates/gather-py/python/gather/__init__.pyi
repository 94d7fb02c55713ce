"""Type stubs of the `gather` package (see __init__.py and the functions' docstrings)."""

from typing import Any, Literal, Optional, Tuple, TypeVar, Union

import numpy as np
import numpy.typing as npt

from . import grad as grad
from . import torch_scatter as torch_scatter
from ._errors import (
    DimOutOfRangeError as DimOutOfRangeError,
    DTypeError as DTypeError,
    GatherError as GatherError,
    IndexOutOfBoundsError as IndexOutOfBoundsError,
    InvalidArgumentError as InvalidArgumentError,
    RankMismatchError as RankMismatchError,
    ShapeMismatchError as ShapeMismatchError,
)

# Any array-like NumPy accepts (arrays are borrowed without a copy; lists are converted), or a
# tensor of another framework with __dlpack__ (a PyTorch CPU tensor, a JAX array).
Array = Union[npt.ArrayLike, Any]
# A result: a NumPy array for NumPy and array-like inputs, else the type of the first data
# argument (`input`, `src`): torch in, torch out.
Out = Any
# A Python or NumPy scalar: the `value`/`alpha` of an op, converted the way PyTorch converts it.
Scalar = Union[bool, int, float, np.generic]
# None, or "bfloat16": the uint16 data arrays hold bfloat16 bit patterns (results likewise).
DType = Optional[Literal["bfloat16"]]
Reduce = Literal["sum", "prod", "mean", "amax", "amin", "max", "min"]
IndexReduce = Literal["prod", "mean", "amax", "amin"]
# What an index outside its dimension does (None and "error": PyTorch's rule); "fill" reads
# `fill_value` there, "drop" skips the write.
Bounds = Optional[Literal["error", "wrap", "clip", "fill", "drop"]]
# The target of an in-place form: a writable NumPy array, or a tensor that shares its memory
# through DLPack (a PyTorch CPU tensor); it is returned.
Target = TypeVar("Target")

class CudaArray:
    """A result on the GPU (when the caller's framework is not known): a DLPack producer."""

    @property
    def shape(self) -> list[int]: ...
    @property
    def dtype(self) -> str: ...
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

class ScatterPlan:
    """A 1-d row index checked and grouped by row once, then applied to many scatter_add /
    scatter_reduce calls along dim 0 (on the GPU of a CUDA index, or on the host)."""

    def __init__(self, index: Array, size: int) -> None: ...
    def __len__(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def device(self) -> str: ...
    def scatter_add(self, dst: Array, src: Array, *, dtype: DType = None) -> Out: ...
    def scatter_reduce(
        self,
        dst: Array,
        src: Array,
        reduce: Reduce,
        *,
        include_self: bool = True,
        dtype: DType = None,
    ) -> Out: ...

def gather(input: Array, dim: int, index: Array, *, sparse_grad: bool = False, out: Optional[Array] = None, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def scatter(
    input: Array,
    dim: int,
    index: Array,
    src: Union[Array, Scalar, None] = None,
    *,
    out: Optional[Array] = None,
    value: Optional[Scalar] = None,
    reduce: Optional[Literal["add", "multiply"]] = None,
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
    dtype: DType = None,
) -> Out: ...
def scatter_add(
    input: Array, dim: int, index: Array, src: Array, *, out: Optional[Array] = None, deterministic: bool = True, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None
) -> Out: ...
def scatter_reduce(
    input: Array,
    dim: int,
    index: Array,
    src: Array,
    reduce: Reduce,
    *,
    out: Optional[Array] = None,
    include_self: bool = True,
    deterministic: bool = True,
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
    dtype: DType = None,
) -> Out: ...
def index_select(input: Array, dim: int, index: Array, *, out: Optional[Array] = None, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def index_add(
    input: Array, dim: int, index: Array, source: Array, *, out: Optional[Array] = None, alpha: Optional[Scalar] = None, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None
) -> Out: ...
def index_copy(input: Array, dim: int, index: Array, source: Array, *, out: Optional[Array] = None, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def index_fill(input: Array, dim: int, index: Array, value: Scalar, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def index_reduce(
    input: Array,
    dim: int,
    index: Array,
    source: Array,
    reduce: IndexReduce,
    *,
    out: Optional[Array] = None,
    include_self: bool = True,
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
    dtype: DType = None,
) -> Out: ...
def take(input: Array, index: Array, *, out: Optional[Array] = None, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def take_along_dim(input: Array, indices: Array, dim: Optional[int] = None, *, out: Optional[Array] = None, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def put(input: Array, index: Array, source: Array, accumulate: bool = False, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...
def masked_select(input: Array, mask: Array, *, out: Optional[Array] = None, dtype: DType = None) -> Out: ...
def masked_scatter(input: Array, mask: Array, source: Array, *, dtype: DType = None) -> Out: ...
def sort(
    input: Array, dim: int = -1, descending: bool = False, *, out: Optional[Tuple[Array, Array]] = None, stable: bool = False, dtype: DType = None
) -> Tuple[Out, Out]: ...
def argsort(
    input: Array, dim: int = -1, descending: bool = False, *, stable: bool = False, dtype: DType = None
) -> Out: ...
def topk(
    input: Array, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, *, out: Optional[Tuple[Array, Array]] = None, dtype: DType = None
) -> Tuple[Out, Out]: ...
def repeat_interleave(
    input: Array,
    repeats: Union[int, Array, None] = None,
    dim: Optional[int] = None,
    *,
    output_size: Optional[int] = None,
    dtype: DType = None,
) -> Out: ...
def select_batched(input: Array, axis: int, index: Array, batch_dims: int = 0, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Out: ...

# In-place forms: they write into `input` and return it; on error `input` is unchanged.
def scatter_(
    input: Target,
    dim: int,
    index: Array,
    src: Union[Array, Scalar, None] = None,
    *,
    value: Optional[Scalar] = None,
    reduce: Optional[Literal["add", "multiply"]] = None,
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
    dtype: DType = None,
) -> Target: ...
def scatter_add_(
    input: Target, dim: int, index: Array, src: Array, *, deterministic: bool = True, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None
) -> Target: ...
def scatter_reduce_(
    input: Target,
    dim: int,
    index: Array,
    src: Array,
    reduce: Reduce,
    *,
    include_self: bool = True,
    deterministic: bool = True,
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
    dtype: DType = None,
) -> Target: ...
def index_add_(
    input: Target, dim: int, index: Array, source: Array, *, alpha: Optional[Scalar] = None, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None
) -> Target: ...
def index_copy_(input: Target, dim: int, index: Array, source: Array, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Target: ...
def index_fill_(input: Target, dim: int, index: Array, value: Scalar, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Target: ...
def index_reduce_(
    input: Target,
    dim: int,
    index: Array,
    source: Array,
    reduce: IndexReduce,
    *,
    include_self: bool = True,
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
    dtype: DType = None,
) -> Target: ...
def put_(input: Target, index: Array, source: Array, accumulate: bool = False, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None, dtype: DType = None) -> Target: ...
def masked_scatter_(input: Target, mask: Array, source: Array, *, dtype: DType = None) -> Target: ...

"""Type stubs of gather.dask (see dask.py)."""

from os import PathLike
from typing import Any, Literal, Optional, Union

import dask.array as da
import numpy.typing as npt

from . import Bounds, Scalar

ArrayLike = Union[da.Array, npt.ArrayLike]
Reduce = Literal["sum", "add", "prod", "mul", "mean", "amax", "max", "amin", "min"]

def take(x: ArrayLike, index: ArrayLike, axis: int = 0, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None) -> da.Array: ...
def index_select(
    input: ArrayLike, dim: int, index: ArrayLike, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None
) -> da.Array: ...
def gather(input: ArrayLike, dim: int, index: ArrayLike, *, bounds: Bounds = None, fill_value: Optional[Scalar] = None) -> da.Array: ...
def scatter(
    src: ArrayLike,
    index: ArrayLike,
    dim: int = 0,
    dim_size: Optional[int] = None,
    reduce: Reduce = "sum",
    split_every: Optional[int] = None,
) -> da.Array: ...
def scatter_add(
    input: ArrayLike,
    dim: int,
    index: ArrayLike,
    src: ArrayLike,
    split_every: Optional[int] = None,
    *,
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
) -> da.Array: ...
def scatter_reduce(
    input: ArrayLike,
    dim: int,
    index: ArrayLike,
    src: ArrayLike,
    reduce: Literal["sum", "prod", "mean", "amax", "amin"],
    include_self: bool = True,
    split_every: Optional[int] = None,
    *,
    bounds: Bounds = None,
    fill_value: Optional[Scalar] = None,
) -> da.Array: ...
def segment_coo(
    src: ArrayLike, index: ArrayLike, dim_size: Optional[int] = None, reduce: Reduce = "sum", split_every: Optional[int] = None
) -> da.Array: ...
def segment_csr(src: ArrayLike, indptr: npt.ArrayLike, reduce: Reduce = "sum", split_every: Optional[int] = None) -> da.Array: ...
def bincount(
    x: ArrayLike, weights: Optional[ArrayLike] = None, minlength: int = 0, split_every: Optional[int] = None
) -> da.Array: ...
def from_npy(path: Union[str, PathLike], chunks: Any = "auto") -> da.Array: ...
def progress(*collections: Any) -> Any: ...

"""PyTorch's gather/scatter family of indexing ops on NumPy arrays and other frameworks' tensors.

Every function has PyTorch's name, argument names and defaults, takes NumPy arrays of any dtype
and any strides (negative strides and ``np.broadcast_to`` views included) without copying them,
releases the GIL while it runs, and returns new arrays. Gradients are in :mod:`gather.grad`.

Tensors of other frameworks on the CPU (PyTorch, JAX: anything with ``__dlpack__``) are read
through DLPack without a copy, and results come back as the type of the first data argument
(``input``, ``src``): torch in, torch out. CUDA tensors (PyTorch, CuPy, JAX on an NVIDIA GPU)
run on their GPU: read through DLPack without a copy, on a stream the producer's pending work is
ordered before, and handed back to the same framework through DLPack (a :class:`CudaArray` when
the framework is not known). Every array of a call is then on that GPU, where the gradients
(:mod:`gather.grad`) run too. The in-place forms have PyTorch's trailing underscore
(``scatter_``, ``scatter_add_``, ``scatter_reduce_``, ``index_add_``, ``index_copy_``,
``index_fill_``, ``index_reduce_``, ``put_``, ``masked_scatter_``): they write into the caller's
own array or tensor, return it, and leave it unchanged when they fail (a torch tensor's version
counter moves on, as after torch's own in-place ops). The ops whose torch function has ``out=``
(all but ``index_fill``, ``put``, ``masked_scatter``, ``argsort``, ``repeat_interleave`` and
``select_batched``) take it with torch's rules: ``out`` gets the result and is returned, must
have its dtype (a torch ``out`` of another shape is resized, with torch's warning when it had
elements), and is never recorded by autograd (see :mod:`gather._out`).

Torch autograd records the ops: where a tensor argument requires grad, the op runs inside a
``torch.autograd.Function`` whose backward is its gradient in :mod:`gather.grad` (on the CPU or
the GPU), so ``loss.backward()`` reaches ``input``, ``src`` and ``source`` as it does through
PyTorch's own ops; under ``torch.no_grad()`` nothing is recorded. The in-place forms record
nothing: with grad mode on they refuse a tensor that requires grad, and say so. Under
``torch.compile`` every op, every in-place form and :class:`ScatterPlan`'s calls are torch
custom operators (``torch.ops.gather.*``) that stay in the compiled graph, gradients included
(``fullgraph=True`` works); ``masked_select`` and ``repeat_interleave`` without ``output_size``
give a length that torch learns at run time. Under ``torch.func``'s ``vmap``, ``grad``,
``vjp`` and ``jacrev`` (per-example gradients as ``vmap(grad(f))``) every op runs once per batch
element with its gradient. Gradients have gradients (``create_graph=True``) and forward mode
works (``torch.autograd.forward_ad``, ``torch.func.jvp``, ``jacfwd``, ``hessian``). Under JAX's ``jax.jit``, ``jax.grad``,
``jax.vmap``, ``jax.jvp`` and ``jax.hessian`` every op is a custom call of the compiled program
(an XLA FFI handler that runs the library on XLA's buffers, on the CPU or an NVIDIA GPU) with its
gradient from :mod:`gather.grad` and its derivatives made of the ops; an output whose length
depends on values is refused there with the fix.

Dask arrays (``dask.array.Array``) stay lazy: every op and every gradient in :mod:`gather.grad`,
and a host :class:`ScatterPlan`'s calls, build Dask graphs of :mod:`gather.dask`'s routed reads
and reduction trees and return Dask arrays. ``sort`` and ``argsort`` run per block with their dim
whole; ``topk`` along a dim of several blocks is a tree of each block's ``k`` best;
``masked_select`` and ``repeat_interleave`` without ``output_size`` give blocks of unknown size,
as Dask's boolean indexing does; ``dtype="bfloat16"`` bit patterns run as float32 blocks rounded
back. The in-place forms refuse a Dask array (it is immutable) with the fix.

Bounds policies: what PyTorch has no word for is a keyword. ``bounds=`` says what an index value
outside its dimension (size ``n``) does, on every indexing op (gather, take_along_dim,
index_select, take, select_batched; scatter with ``src``, scatter_add, scatter_reduce, index_add,
index_copy, index_fill, index_reduce, put; their in-place forms and their gradients in
:mod:`gather.grad`), on host and CUDA arrays alike::

    bounds          reads (gather, take ...)             writes (scatter, index_add ...)
    None, "error"   PyTorch's rule: an error naming      the same
                    the value and its position
    "wrap"          -n..n, negatives from the end        the same
    "clip"          clamped into 0..n                    the same
    "fill"          outside 0..n reads fill_value        an error
    "drop"          an error                             outside 0..n is skipped

Gradients flow to the element that was read or written (wrapped or clipped), and not at all from
filled positions or dropped writes.

>>> x = np.array([10, 20, 30])
>>> gather.take(x, np.array([-1, 1, 5]), bounds="clip")
array([10, 20, 30])
>>> gather.take(x, np.array([-1, 1, 5]), bounds="fill", fill_value=0)
array([ 0, 20,  0])
>>> gather.put(x, np.array([-1, 7]), np.array([1, 2]), True, bounds="drop")
array([10, 20, 30])

bfloat16: NumPy has no bfloat16 dtype, so bfloat16 data travels as its uint16 bit patterns
(``value == float32 of (bits << 16)``): pass ``dtype="bfloat16"`` and the uint16 data arrays
(``input``, ``src``, ``source``, ``grad_output``; never indices or masks) are read as bfloat16, and
bfloat16 results come back as uint16 bit patterns. float16 is NumPy's own ``np.float16``.

Errors are :class:`GatherError` subclasses, which derive from ``RuntimeError`` (as PyTorch's errors
of these ops do) and from ``IndexError``, ``ValueError`` or ``TypeError`` (see :mod:`gather._errors`).

>>> import numpy as np, gather
>>> x = np.array([[10, 20, 30], [40, 50, 60]])
>>> gather.gather(x, 1, np.array([[0, 2], [1, 0]]))
array([[10, 30],
       [50, 40]])
>>> gather.scatter_reduce(np.zeros(3), 0, np.array([0, 0, 2]), np.array([1., 5., 2.]), "amax",
...                       include_self=False)
array([5., 0., 2.])
"""

import sys as _sys

from . import _autograd, _native
from ._errors import (
    DimOutOfRangeError,
    DTypeError,
    GatherError,
    IndexOutOfBoundsError,
    InvalidArgumentError,
    RankMismatchError,
    ShapeMismatchError,
)
from ._native import CudaArray
from ._autograd import ScatterPlan, differentiable as _differentiable, in_place as _in_place

gather = _differentiable("gather")
scatter = _differentiable("scatter")
scatter_add = _differentiable("scatter_add")
scatter_reduce = _differentiable("scatter_reduce")
index_select = _differentiable("index_select")
index_add = _differentiable("index_add")
index_copy = _differentiable("index_copy")
index_fill = _differentiable("index_fill")
index_reduce = _differentiable("index_reduce")
take = _differentiable("take")
take_along_dim = _differentiable("take_along_dim")
put = _differentiable("put")
masked_select = _differentiable("masked_select")
masked_scatter = _differentiable("masked_scatter")
sort = _differentiable("sort")
argsort = _differentiable("argsort")
topk = _differentiable("topk")
repeat_interleave = _differentiable("repeat_interleave")
select_batched = _differentiable("select_batched")
scatter_ = _in_place("scatter_")
scatter_add_ = _in_place("scatter_add_")
scatter_reduce_ = _in_place("scatter_reduce_")
index_add_ = _in_place("index_add_")
index_copy_ = _in_place("index_copy_")
index_fill_ = _in_place("index_fill_")
index_reduce_ = _in_place("index_reduce_")
put_ = _in_place("put_")
masked_scatter_ = _in_place("masked_scatter_")
from . import grad
from . import torch_scatter

# torch.compile keeps the ops in its graph as torch custom operators, defined with Dynamo.
if "torch._dynamo" in _sys.modules:
    _autograd.define_torch_ops()
else:
    _sys.meta_path.insert(0, _autograd.AfterDynamoImport())

__all__ = [
    "gather",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index_select",
    "index_add",
    "index_copy",
    "index_fill",
    "index_reduce",
    "take",
    "take_along_dim",
    "put",
    "masked_select",
    "masked_scatter",
    "sort",
    "argsort",
    "topk",
    "repeat_interleave",
    "select_batched",
    "ScatterPlan",
    "scatter_",
    "scatter_add_",
    "scatter_reduce_",
    "index_add_",
    "index_copy_",
    "index_fill_",
    "index_reduce_",
    "put_",
    "masked_scatter_",
    "grad",
    "torch_scatter",
    "GatherError",
    "DimOutOfRangeError",
    "IndexOutOfBoundsError",
    "RankMismatchError",
    "ShapeMismatchError",
    "InvalidArgumentError",
    "DTypeError",
    "CudaArray",
]

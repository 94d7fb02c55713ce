"""Gradients (vector-Jacobian products) of the ops, by the same names as the ops.

Each function takes the gradient of the op's output first, then the op's own arguments, and
returns the gradient of every differentiable input: one array when the op has one
(``grad_input``), else a tuple ``(grad_input, grad_src)`` (scatter with ``src``, scatter_add,
scatter_reduce) or ``(grad_input, grad_source)`` (index_add, index_copy, index_reduce, put,
masked_scatter). For ``sort`` and ``topk`` the gradient is that of ``values``. Inputs must be
floating point (float16, float32, float64, or bfloat16 with ``dtype="bfloat16"``).

``scatter_reduce`` and ``index_reduce`` take ``parity="correct"`` (default: the mathematically
correct gradient) or ``parity="pytorch"`` (PyTorch's numbers, including its ``include_self=False``
amax/amin tie bug).

The gradients of the indexing ops take the forward's ``bounds=`` and ``fill_value=`` (see
:mod:`gather`): the gradient flows to the element each index reached (wrapped or clipped), and
filled positions and dropped writes get none.

>>> gather.grad.take(np.array([1., 10., 100.]), np.array([5., 6., 7.]), np.array([-1, 1, 9]),
...                  bounds="clip")
array([  1.,  10., 100.])

Torch users need not call these: ``gather.gather`` and the other ops are recorded by torch's
autograd, whose backward calls them. Called by hand (in a custom ``torch.autograd.Function``'s
backward, say) they read tensors that require grad as detached, and record no graph.

Gradients copy their inputs once (they go through the library's run-time typed layer). CUDA
arrays (PyTorch, CuPy, JAX) are differentiated on their GPU, without a copy, and the gradients come
back as the caller's type.

>>> import numpy as np, gather
>>> x = np.array([[1., 2., 3.]])
>>> gather.grad.gather(np.array([[1., 10.]]), x, 1, np.array([[2, 2]]))
array([[ 0.,  0., 11.]])
"""

from ._autograd import detaching as _detaching
from ._native import grad as _g

gather = _detaching(_g.gather)
scatter = _detaching(_g.scatter)
scatter_add = _detaching(_g.scatter_add)
scatter_reduce = _detaching(_g.scatter_reduce)
index_select = _detaching(_g.index_select)
index_add = _detaching(_g.index_add)
index_copy = _detaching(_g.index_copy)
index_fill = _detaching(_g.index_fill)
index_reduce = _detaching(_g.index_reduce)
take = _detaching(_g.take)
take_along_dim = _detaching(_g.take_along_dim)
put = _detaching(_g.put)
masked_select = _detaching(_g.masked_select)
masked_scatter = _detaching(_g.masked_scatter)
sort = _detaching(_g.sort)
topk = _detaching(_g.topk)
repeat_interleave = _detaching(_g.repeat_interleave)
select_batched = _detaching(_g.select_batched)

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
    "topk",
    "repeat_interleave",
    "select_batched",
]

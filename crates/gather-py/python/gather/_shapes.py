"""The output shapes of gather's ops from their arguments' shapes, without their values.

``torch.compile``'s fake kernels (``gather._torch_ops``) and JAX's traced calls
(``gather._jax_ops``) both need an op's output before it runs. Each function takes a context
(how to broadcast two shapes, and what a length that depends on values becomes: a size torch
learns at run time, an error under ``jax.jit``), then the op's own arguments, and returns one
shape per output. ``KINDS`` says each output's dtype: the input's, or int64 indices.
"""

import functools
import operator

KINDS = {"sort": ("input", "long"), "topk": ("input", "long"), "argsort": ("long",)}


def kinds(op):
    """The dtype of each output of ``op``: ``"input"`` (the input's) or ``"long"`` (indices)."""
    return KINDS.get(op, ("input",))


def _numel(shape):
    return functools.reduce(operator.mul, shape, 1)


def gather(ctx, input, dim, index, *_, **__):
    return (tuple(index.shape),)


def take(ctx, input, index, *_, **__):
    return (tuple(index.shape),)


def index_select(ctx, input, dim, index, *_, **__):
    n, shape = _numel(index.shape), tuple(input.shape)
    if not shape:
        return ((n,),)
    d = dim % len(shape)
    return (shape[:d] + (n,) + shape[d + 1:],)


def take_along_dim(ctx, input, indices, dim=None, *_, **__):
    """The index's length along ``dim``, the broadcast of both off it (with ``dim=None``, the
    flattened input read at the flattened index: one axis)."""
    if dim is None:
        return ((_numel(indices.shape),),)
    shape, along = tuple(input.shape), tuple(indices.shape)
    d = dim % len(shape)
    off = tuple(ctx.broadcast(shape[:d] + (1,) + shape[d + 1:], along[:d] + (1,) + along[d + 1:]))
    return (off[:d] + (along[d],) + off[d + 1:],)


def select_batched(ctx, input, axis, index, batch_dims=0, *_, **__):
    """``input`` with ``axis`` replaced by the index's dims after the batch."""
    shape, rows = tuple(input.shape), tuple(index.shape)
    a = axis % len(shape)
    b = batch_dims % len(rows) if batch_dims < 0 else batch_dims
    return (shape[:a] + rows[b:] + shape[a + 1:],)


def _same(ctx, input, *_, **__):
    return (tuple(input.shape),)


scatter = scatter_add = scatter_reduce = index_add = index_copy = index_fill = index_reduce = put = _same
argsort = _same


def sort(ctx, input, *_, **__):
    return (tuple(input.shape),) * 2


def masked_select(ctx, input, mask, *_, **__):
    return ((ctx.dynamic("masked_select", "index with a fixed count (gather.take of the positions), "
                         "or keep the shape with gather.masked_scatter or a where"),),)


def masked_scatter(ctx, input, mask, source, *_, **__):
    return (tuple(ctx.broadcast(tuple(input.shape), tuple(mask.shape))),)


def topk(ctx, input, k, dim=-1, *_, **__):
    shape = list(input.shape)
    if shape:
        shape[dim % len(shape)] = k
    return (tuple(shape),) * 2


def repeat_interleave(ctx, input, repeats=None, dim=None, *_, output_size=None, **__):
    """With an integer ``repeats`` the length is known; with a repeats array (or the repeats
    alone) it is ``output_size`` when given, else it depends on the repeats' values."""
    shape = list(input.shape)
    if repeats is not None and not hasattr(repeats, "shape"):  # an integer (torch: maybe symbolic)
        if dim is None:
            return ((_numel(shape) * repeats,),)
        shape[dim % len(shape)] *= repeats
        return (tuple(shape),)
    n = output_size if output_size is not None else ctx.dynamic("repeat_interleave", "pass output_size=")
    if dim is None:
        return ((n,),)
    shape[dim % len(shape)] = n
    return (tuple(shape),)

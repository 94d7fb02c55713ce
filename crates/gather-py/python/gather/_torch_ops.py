"""The ops that ``torch.compile`` keeps in its graph.

Under ``torch.compile`` the ops of :mod:`gather` named in ``_SPECS`` are called as torch custom
operators (``torch.ops.gather.<op>``), each with a fake kernel that gives its output's shape,
and with its gradient registered as another custom operator (``torch.ops.gather.<op>_backward``):
Dynamo puts them in the graph instead of breaking it, and AOTAutograd traces forward and
backward without calling the library. At run time they call the same functions as eager code.

Imported when torch is (see ``gather/__init__.py``), so that ``import gather`` alone never
imports torch. The fakes are C-contiguous, as every result of the library is, whatever the
layout of its arguments.
"""

import torch

from . import _native
from ._native import grad as _grad

_POLICY = "str? bounds=None, Scalar? fill_value=None, str? dtype=None"


def _same_shape(input, *_):
    """The fake of an op whose output has ``input``'s shape (the scatter and index writes)."""
    return input.new_empty(input.shape)


# op: (positional arguments, keyword-only ones before the policy, the differentiated arguments
# in the order gather.grad returns their gradients, the output's fake)
_SPECS = {
    "gather": (
        "Tensor input, SymInt dim, Tensor index", "", ("input",),
        lambda input, dim, index: input.new_empty(index.shape),
    ),
    "take": (
        "Tensor input, Tensor index", "", ("input",),
        lambda input, index: input.new_empty(index.shape),
    ),
    "index_select": (
        "Tensor input, SymInt dim, Tensor index", "", ("input",),
        lambda input, dim, index: input.new_empty(
            input.shape[:dim % input.dim()] + (index.numel(),) + input.shape[dim % input.dim() + 1:]
            if input.dim() else (index.numel(),)
        ),
    ),
    "scatter_add": (
        "Tensor input, SymInt dim, Tensor index, Tensor src", "bool deterministic=True, ", ("input", "src"),
        _same_shape,
    ),
    "scatter_reduce": (
        "Tensor input, SymInt dim, Tensor index, Tensor src, str reduce",
        "bool include_self=True, bool deterministic=True, ", ("input", "src"),
        _same_shape,
    ),
    "index_add": (
        "Tensor input, SymInt dim, Tensor index, Tensor source", "Scalar? alpha=None, ", ("input", "source"),
        _same_shape,
    ),
    "index_copy": (
        "Tensor input, SymInt dim, Tensor index, Tensor source", "", ("input", "source"),
        _same_shape,
    ),
    "index_fill": (
        "Tensor input, SymInt dim, Tensor index, Scalar value", "", ("input",),
        _same_shape,
    ),
    "index_reduce": (
        "Tensor input, SymInt dim, Tensor index, Tensor source, str reduce", "bool include_self=True, ",
        ("input", "source"),
        _same_shape,
    ),
    "put": (
        "Tensor input, Tensor index, Tensor source, bool accumulate=False", "", ("input", "source"),
        _same_shape,
    ),
    "take_along_dim": (
        "Tensor input, Tensor indices, SymInt? dim=None", "", ("input",),
        lambda input, indices, dim=None: input.new_empty(_along(input, indices, dim)),
    ),
}
COMPILED = frozenset(_SPECS)


def _along(input, indices, dim):
    """take_along_dim's output shape: the index's along ``dim``, the broadcast of both off it
    (the flattened input's with ``dim=None``: the index's)."""
    if dim is None:
        return indices.shape
    d = dim % input.dim()
    off = torch.broadcast_shapes(input.shape[:d] + (1,) + input.shape[d + 1:],
                                 indices.shape[:d] + (1,) + indices.shape[d + 1:])
    return off[:d] + (indices.shape[d],) + off[d + 1:]


def _names(args):
    return [a.split()[-1].split("=")[0] for a in args.split(", ")]


def _plain(a):
    return a.detach() if isinstance(a, torch.Tensor) else a


def _define(op):
    positional, keywords, diff, fake = _SPECS[op]
    names = _names(positional)
    forward = getattr(_native, op)
    backward = getattr(_grad, op)
    grad_keywords = keywords.replace("bool deterministic=True, ", "")
    outs = "Tensor" if len(diff) == 1 else "(" + ", ".join(["Tensor"] * len(diff)) + ")"

    def run(*args, **kwargs):
        return forward(*map(_plain, args), **kwargs)

    fwd = torch.library.custom_op(
        f"gather::{op}", run, mutates_args=(),
        schema=f"({positional}, *, {keywords}{_POLICY}) -> Tensor",
    )
    fwd.register_fake(lambda *args, **kwargs: fake(*args))

    def run_grad(*args, **kwargs):
        return backward(*map(_plain, args), **kwargs)

    def fake_grad(grad_output, *args, **kwargs):
        got = tuple(args[names.index(n)].new_empty(args[names.index(n)].shape) for n in diff)
        return got[0] if len(got) == 1 else got

    bwd = torch.library.custom_op(
        f"gather::{op}_backward", run_grad, mutates_args=(),
        schema=f"(Tensor grad_output, {positional}, *, {grad_keywords}{_POLICY}) -> {outs}",
    )
    bwd.register_fake(fake_grad)

    def setup_context(ctx, inputs, keyword_only_inputs, output):
        tensors = [i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)]
        ctx.save_for_backward(*(inputs[i] for i in tensors))
        ctx.tensors, ctx.inputs = tensors, list(inputs)
        ctx.keywords = {k: v for k, v in keyword_only_inputs.items() if k != "deterministic"}

    def backward_of(ctx, grad_output):
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensors, ctx.saved_tensors):
            inputs[i] = t
        grads = bwd(grad_output, *inputs, **ctx.keywords)
        by_name = dict(zip(diff, grads if isinstance(grads, tuple) else (grads,)))
        return tuple(by_name.get(n) for n in names)

    fwd.register_autograd(backward_of, setup_context=setup_context)
    return fwd


_OPS = {op: _define(op) for op in _SPECS}


def call(op, args, kwargs):
    """``gather.<op>(*args, **kwargs)`` as its custom operator."""
    return _OPS[op](*args, **kwargs)

"""The ops of :mod:`gather` as torch custom operators, which ``torch.compile`` keeps in its graph.

Under ``torch.compile`` every op of :mod:`gather` and every in-place form is called as a torch
custom operator (``torch.ops.gather.<op>``), with a fake kernel that gives its output's shape;
the gradient of each differentiable op is another custom operator
(``torch.ops.gather.<op>_backward``). Dynamo puts them in the graph instead of breaking it, and
AOTAutograd traces forward and backward without calling the library. At run time they call the
same functions as eager code.

A schema has no union of a tensor and a number, so ``scatter``'s number form is
``scatter_value`` and ``repeat_interleave``'s integer form ``repeat_interleave_int``; ``call``
picks the operator from the arguments. The in-place forms mutate ``input`` and return nothing
(a custom operator returns no alias of its argument); their wrappers return ``input``.

Imported when Dynamo (``torch._dynamo``) is (see ``gather/__init__.py``), so that neither
``import gather`` nor ``import torch`` pays for defining the operators. The fakes are
C-contiguous, as every result of the library is, whatever the layout of its arguments. Outputs whose length depends on values (``masked_select``,
``repeat_interleave`` without ``output_size``) get a size that torch learns at run time.
"""

from typing import NamedTuple

import torch

from . import _autograd, _native, _shapes
from ._native import grad as _grad

_POLICY = "str? bounds=None, Scalar? fill_value=None, "


class _Spec(NamedTuple):
    positional: str  # the schema's positional arguments
    keywords: str = ""  # keyword-only arguments before the bounds policy and dtype
    diff: tuple = ("input",)  # differentiated arguments, in the order gather.grad returns them
    returns: str = "Tensor"
    policy: bool = True  # takes bounds= and fill_value=
    native: str = ""  # the gather function called, where it is not the operator's name
    moved: tuple = ()  # positional arguments of the schema that the function takes by keyword


class _Sizes:
    """The shape context of the fakes (see gather._shapes): symbolic broadcasts, and lengths
    that torch learns once the op has run."""

    broadcast = staticmethod(torch.broadcast_shapes)

    @staticmethod
    def dynamic(op, hint):
        return torch.library.get_ctx().new_dynamic_size()


def _fake(op):
    """The fake kernel of ``op``: C-contiguous outputs of the shapes and dtypes of gather._shapes."""
    shapes, kinds = getattr(_shapes, op), _shapes.kinds(op)

    def fake(input, *args, **kwargs):
        outs = tuple(input.new_empty(s, dtype=input.dtype if k == "input" else torch.long)
                     for s, k in zip(shapes(_Sizes, input, *args, **kwargs), kinds))
        return outs if len(outs) > 1 else outs[0]

    return fake


_SPECS = {
    "gather": _Spec("Tensor input, SymInt dim, Tensor index"),
    "take": _Spec("Tensor input, Tensor index"),
    "index_select": _Spec("Tensor input, SymInt dim, Tensor index"),
    "take_along_dim": _Spec("Tensor input, Tensor indices, SymInt? dim=None"),
    "select_batched": _Spec("Tensor input, SymInt axis, Tensor index, SymInt batch_dims=0"),
    "scatter": _Spec("Tensor input, SymInt dim, Tensor index, Tensor src", "str? reduce=None, ", ("input", "src")),
    "scatter_value": _Spec("Tensor input, SymInt dim, Tensor index, Scalar value", "str? reduce=None, ",
                           native="scatter", moved=("value",)),
    "scatter_add": _Spec("Tensor input, SymInt dim, Tensor index, Tensor src", "bool deterministic=True, ",
                         ("input", "src")),
    "scatter_reduce": _Spec("Tensor input, SymInt dim, Tensor index, Tensor src, str reduce",
                            "bool include_self=True, bool deterministic=True, ", ("input", "src")),
    "index_add": _Spec("Tensor input, SymInt dim, Tensor index, Tensor source", "Scalar? alpha=None, ",
                       ("input", "source")),
    "index_copy": _Spec("Tensor input, SymInt dim, Tensor index, Tensor source", diff=("input", "source")),
    "index_fill": _Spec("Tensor input, SymInt dim, Tensor index, Scalar value"),
    "index_reduce": _Spec("Tensor input, SymInt dim, Tensor index, Tensor source, str reduce",
                          "bool include_self=True, ", ("input", "source")),
    "put": _Spec("Tensor input, Tensor index, Tensor source, bool accumulate=False", diff=("input", "source")),
    "masked_select": _Spec("Tensor input, Tensor mask", policy=False),
    "masked_scatter": _Spec("Tensor input, Tensor mask, Tensor source", diff=("input", "source"), policy=False),
    "sort": _Spec("Tensor input, SymInt dim=-1, bool descending=False", "bool stable=False, ",
                  returns="(Tensor, Tensor)", policy=False),
    "topk": _Spec("Tensor input, SymInt k, SymInt dim=-1, bool largest=True, bool sorted=True",
                  returns="(Tensor, Tensor)", policy=False),
    "argsort": _Spec("Tensor input, SymInt dim=-1, bool descending=False", "bool stable=False, ", diff=(),
                     policy=False),
    "repeat_interleave": _Spec("Tensor input, Tensor? repeats=None, SymInt? dim=None", "SymInt? output_size=None, ",
                               policy=False),
    "repeat_interleave_int": _Spec("Tensor input, SymInt repeats, SymInt? dim=None", "SymInt? output_size=None, ",
                                   policy=False, native="repeat_interleave"),
}

# The in-place forms: the writes above, mutating ``input`` and returning nothing.
for _op in ("scatter", "scatter_value", "scatter_add", "scatter_reduce", "index_add", "index_copy",
            "index_fill", "index_reduce", "put", "masked_scatter"):
    _s = _SPECS[_op]
    _SPECS[_op + "_"] = _s._replace(
        positional=_s.positional.replace("Tensor input", "Tensor(a!) input", 1),
        diff=None, returns="()", native=(_s.native or _op) + "_",
    )

# The functions of gather that run as these operators under torch.compile.
COMPILED = frozenset(s.native or op for op, s in _SPECS.items())


def _names(args):
    return [a.split()[-1].split("=")[0] for a in args.split(", ")]


def _plain(a):
    return a.detach() if isinstance(a, torch.Tensor) else a


def _caller(fn, names, moved):
    """``fn`` called with the schema's arguments, those in ``moved`` by keyword."""
    at = [names.index(n) for n in moved]

    def run(*args, **kwargs):
        args = [_plain(a) for a in args]
        for i in reversed(at):
            kwargs[names[i]] = args.pop(i)
        return fn(*args, **kwargs)

    return run


def _define(op):
    spec = _SPECS[op]
    names = _names(spec.positional)
    forward = getattr(_native, spec.native or op)
    tail = (_POLICY if spec.policy else "") + "str? dtype=None"
    run = _caller(forward, names, spec.moved)
    if spec.diff is None:  # an in-place form: the operator returns nothing, the wrapper `input`
        def run(*args, _run=run, **kwargs):
            _run(*args, **kwargs)

    fwd = torch.library.custom_op(
        f"gather::{op}", run, mutates_args=("input",) if spec.diff is None else (),
        schema=f"({spec.positional}, *, {spec.keywords}{tail}) -> {spec.returns}",
    )
    fwd.register_fake((lambda *_, **__: None) if spec.diff is None else _fake(spec.native or op))
    if spec.diff is None:  # it records no gradient
        return fwd
    outputs = spec.returns.count("Tensor")

    def setup_context(ctx, inputs, keyword_only_inputs, output):
        tensors = [i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)]
        ctx.save_for_backward(*(inputs[i] for i in tensors))
        ctx.tensors, ctx.inputs = tensors, list(inputs)
        ctx.keywords = {k: v for k, v in keyword_only_inputs.items() if k != "deterministic"}
        if not spec.diff:  # argsort: indices only
            ctx.mark_non_differentiable(output)
        elif outputs > 1:  # sort, topk: (values, indices)
            ctx.mark_non_differentiable(output[1])

    if not spec.diff:
        fwd.register_autograd(lambda ctx, *grads: (None,) * len(names), setup_context=setup_context)
        return fwd

    backward = getattr(_grad, spec.native or op)
    grad_keywords = spec.keywords.replace("bool deterministic=True, ", "")
    outs = "Tensor" if len(spec.diff) == 1 else "(" + ", ".join(["Tensor"] * len(spec.diff)) + ")"

    def fake_grad(grad_output, *args, **kwargs):
        got = tuple(args[names.index(n)].new_empty(args[names.index(n)].shape) for n in spec.diff)
        return got[0] if len(got) == 1 else got

    bwd = torch.library.custom_op(
        f"gather::{op}_backward", _caller(backward, ["grad_output"] + names, spec.moved), mutates_args=(),
        schema=f"(Tensor grad_output, {spec.positional}, *, {grad_keywords}{tail}) -> {outs}",
    )
    bwd.register_fake(fake_grad)

    def backward_of(ctx, grad_output, *_):  # sort and topk: no gradient reaches the indices
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensors, ctx.saved_tensors):
            inputs[i] = t
        grads = bwd(grad_output, *inputs, **ctx.keywords)
        by_name = dict(zip(spec.diff, grads if isinstance(grads, tuple) else (grads,)))
        return tuple(by_name.get(n) for n in names)

    fwd.register_autograd(backward_of, setup_context=setup_context)
    return fwd


_OPS = {op: _define(op) for op in _SPECS}


def call(op, args, kwargs):
    """``gather.<op>(*args, **kwargs)`` (``op`` may be an in-place form) as its custom operator,
    picking the number forms of scatter and repeat_interleave by their arguments."""
    if op in ("scatter", "scatter_"):
        src = args[3] if len(args) > 3 else kwargs.pop("src", None)
        value = kwargs.pop("value", None)
        if (src is None) == (value is None):  # neither or both: the library's own error
            return getattr(_native, op)(*args[:3], src, value=value, **kwargs)
        if isinstance(src, torch.Tensor):
            args = tuple(args[:3]) + (src,)
        else:  # a number, as src or as value=
            op = op.replace("scatter", "scatter_value")
            args = tuple(args[:3]) + (src if src is not None else value,)
    elif op == "repeat_interleave":
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        if isinstance(repeats, int):
            op = "repeat_interleave_int"
    return _OPS[op](*args, **kwargs)


# ScatterPlan's calls: the operator takes the plan's key in PLANS (a schema has no Python object).
def _plan_op(name, schema, fake, forward, backward, outs):
    def run(plan, *args, **kwargs):
        return forward(_autograd.PLANS[plan], *map(_plain, args), **kwargs)

    fwd = torch.library.custom_op(f"gather::{name}", run, mutates_args=(), schema=f"({schema}) -> Tensor")
    fwd.register_fake(fake)

    def run_grad(plan, *args, **kwargs):
        return backward(_autograd.PLANS[plan], *map(_plain, args), **kwargs)

    bwd = torch.library.custom_op(f"gather::{name}_backward", run_grad, mutates_args=(),
                                  schema=f"(int plan, Tensor grad_output, {schema[len('int plan, '):]}) -> {outs}")
    bwd.register_fake(lambda plan, g, dst, src, *_, **__: (dst.new_empty(dst.shape), src.new_empty(src.shape)))

    def setup_context(ctx, inputs, keyword_only_inputs, output):
        ctx.save_for_backward(inputs[1], inputs[2])
        ctx.plan, ctx.rest, ctx.keywords = inputs[0], inputs[3:], keyword_only_inputs

    def backward_of(ctx, grad_output):
        dst, src = ctx.saved_tensors
        return (None,) + bwd(ctx.plan, grad_output, dst, src, *ctx.rest, **ctx.keywords) + (None,) * len(ctx.rest)

    fwd.register_autograd(backward_of, setup_context=setup_context)
    return fwd


_PLAN_OPS = {
    "scatter_add": _plan_op(
        "plan_scatter_add", "int plan, Tensor dst, Tensor src, *, str? dtype=None",
        lambda plan, dst, src, **_: dst.new_empty(dst.shape),
        lambda p, dst, src, **kw: p._plan.scatter_add(dst, src, **kw),
        lambda p, g, dst, src, **kw: p._grad(g, dst, src, **kw), "(Tensor, Tensor)",
    ),
    "scatter_reduce": _plan_op(
        "plan_scatter_reduce", "int plan, Tensor dst, Tensor src, str reduce, *, bool include_self=True, str? dtype=None",
        lambda plan, dst, src, reduce, **_: dst.new_empty(dst.shape),
        lambda p, dst, src, reduce, **kw: p._plan.scatter_reduce(dst, src, reduce, **kw),
        lambda p, g, dst, src, reduce, **kw: p._grad(g, dst, src, reduce, **kw), "(Tensor, Tensor)",
    ),
}


def call_plan(key, values):
    """``plan.scatter_add(**values)`` or ``plan.scatter_reduce(**values)`` as its custom operator."""
    values = {k: (v.contiguous() if isinstance(v, torch.Tensor) else v) for k, v in values.items()}
    dst, src = values.pop("dst"), values.pop("src")
    if "reduce" in values:
        return _PLAN_OPS["scatter_reduce"](key, dst, src, values.pop("reduce"), **values)
    return _PLAN_OPS["scatter_add"](key, dst, src, **values)

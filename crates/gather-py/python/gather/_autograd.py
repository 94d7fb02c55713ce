"""Torch autograd for the ops of :mod:`gather`.

DLPack does not export a tensor that requires grad, so a torch tensor that does cannot reach the
library as it is. Each op of :mod:`gather` is therefore a thin wrapper: when no argument is a
torch tensor that requires grad (or carries a forward-mode tangent) it calls the op directly;
otherwise it runs the op on detached tensors inside a ``torch.autograd.Function`` whose backward
is the op's gradient in :mod:`gather.grad` (on the same device, CPU or CUDA), so that
``loss.backward()`` reaches ``input``, ``src`` and ``source``. With ``create_graph=True`` the
gradient is recorded as a Function too, whose own backward and forward-mode rules are made of
the ops (``gather._tangents``), so gradients have gradients. Under ``torch.no_grad()`` the op
runs on detached tensors and records nothing. The in-place forms do not record gradients: with grad mode on they refuse a
tensor that requires grad (with the fix), under ``torch.no_grad()`` they write into it.

Under ``torch.compile`` every op, every in-place form and ScatterPlan's calls become torch
custom operators (``gather._torch_ops``), which Dynamo keeps in its graph, forward and backward.

:class:`ScatterPlan` is a thin wrapper too: its ``scatter_add`` and ``scatter_reduce`` are
recorded with the gradients of the ops they equal, for the graph networks that scatter over the
same edges in every training step.
"""

import inspect
import sys
import weakref

import numpy as np

from . import _calls, _dask_ops, _native, _out, _shapes, _tangents
from ._errors import GatherError, refused, respell
from ._native import grad as _grad

# The arguments an op's gradient differentiates, in the order gather.grad returns them.
_DATA = ("input", "src", "source")
_FUNCTION = {}


# Argument types that are never torch tensors: skipped without isinstance, whose check against
# torch.Tensor's metaclass costs about 300 ns an argument.
_PLAIN = {np.ndarray, int, float, bool, str, type(None)}


def _plain(args, kwargs):
    """Whether every argument is a NumPy array or a Python scalar: the op is then the
    extension's call, with nothing to look for (torch, JAX tracers, Dask)."""
    for a in args:
        if type(a) not in _PLAIN:
            return False
    return not kwargs or all(type(a) in _PLAIN for a in kwargs.values())


def _torch_tensors(args, kwargs):
    """``(torch, whether one requires grad)`` where an argument is a torch tensor, else
    ``(None, False)``: the direct path, torch not even imported or no tensor of it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, False
    found = False
    for a in args:
        if type(a) not in _PLAIN and isinstance(a, torch.Tensor):
            if a.requires_grad:
                return torch, True
            found = True
    if kwargs:  # most calls pass none: no view of them to walk
        for a in kwargs.values():
            if type(a) not in _PLAIN and isinstance(a, torch.Tensor):
                if a.requires_grad:
                    return torch, True
                found = True
    return (torch if found else None), False


# gather._torch_ops once torch's custom operators are defined (None: torch.compile breaks its
# graphs at gather's ops).
_torch_ops = None


def define_torch_ops():
    """Defines ``torch.ops.gather.*`` (torch must be imported). Dynamo cannot trace
    torch.library's registration, so this runs when Dynamo is imported (``torch.compile`` and
    ``torch.export`` import it before they trace), not at the first compiled call nor with torch
    itself, which would cost every process that never compiles about 0.1 s. A failure leaves the
    ops to break torch.compile's graphs, with a warning."""
    global _torch_ops
    try:
        from . import _torch_ops as ops

        _torch_ops = ops
    except Exception as e:  # never fail the import of torch or gather over this
        import warnings

        warnings.warn(f"gather: torch.compile will break its graphs at gather's ops: {e!r}", stacklevel=2)


class _ThenDefine:
    """Dynamo's own loader, which defines gather's custom operators once Dynamo has loaded."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        define_torch_ops()


class AfterDynamoImport:
    """A one-shot import hook for ``import gather`` before Dynamo (``torch._dynamo``) is loaded:
    it hands Dynamo's spec back with a loader that defines gather's operators after Dynamo's."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _ThenDefine(spec.loader)
        return spec


def _numpy_views(torch, args, kwargs):
    """``args`` and ``kwargs`` with torch CPU tensors as NumPy views of their memory, or None
    where a tensor has none (CUDA, bfloat16, a negative bit), or where ``input`` is no torch
    tensor (the result's type is then another argument's): the library's own checks take
    those. The views skip them: the extension's DLPack path probes each tensor's attributes."""
    t = torch.Tensor
    if not isinstance(args[0] if args else kwargs.get("input"), t):
        return None
    try:
        args = [a.numpy() if type(a) not in _PLAIN and isinstance(a, t) else a for a in args]
        if kwargs:
            kwargs = {k: (a.numpy() if type(a) not in _PLAIN and isinstance(a, t) else a) for k, a in kwargs.items()}
        return args, kwargs
    except (TypeError, RuntimeError):
        return None


def _on_torch(torch, native, args, kwargs):
    """``native(*args, **kwargs)`` for torch tensors, through NumPy views of CPU tensors where
    ``input`` is one: the results come back as torch tensors sharing the library's arrays, as
    DLPack would hand them over."""
    views = _numpy_views(torch, args, kwargs)
    if views is None:
        return native(*args, **kwargs)
    args, kwargs = views
    try:
        out = native(*args, **kwargs) if kwargs else native(*args)
    except GatherError as e:
        respell(e, "torch")
        raise
    if type(out) is tuple:
        return tuple(torch.from_numpy(o) for o in out)
    return torch.from_numpy(out)


def _jax_traced(args, kwargs):
    """Whether an argument is a traced JAX array (inside jax.jit, jax.grad, jax.vmap): the op
    then runs as a custom call of the computation (gather._jax_ops)."""
    for group in (args, kwargs.values()):
        for a in group:
            if type(a) not in _PLAIN:
                jax = sys.modules.get("jax")
                if jax is not None and isinstance(a, jax.core.Tracer):
                    return True
    return False


def _each_tensor(torch, args, kwargs, method):
    """``args`` and ``kwargs`` with ``method`` (``"detach"``, ``"contiguous"``) applied to the
    torch tensors among them."""
    t = torch.Tensor
    args = [getattr(a, method)() if isinstance(a, t) else a for a in args]
    return args, {k: (getattr(a, method)() if isinstance(a, t) else a) for k, a in kwargs.items()}


def _dual(torch):
    """Whether a forward-mode level is open (``torch.autograd.forward_ad.dual_level``), where a
    tensor may carry a tangent without requiring grad."""
    return getattr(torch.autograd.forward_ad, "_current_level", -1) >= 0


def _differentiated(torch, given, data):
    """The names of the ``data`` arguments to differentiate (they require grad with grad mode
    on, or carry a forward-mode tangent), and the other arguments, with every tensor among them
    that requires grad or may carry a tangent detached."""
    grad_on, dual = torch.is_grad_enabled(), _dual(torch)
    t = torch.Tensor
    names, rest = [], {}
    for n, v in given.items():
        if type(v) in _PLAIN or not isinstance(v, t):
            rest[n] = v
        elif n in data and ((grad_on and v.requires_grad) or
                            (dual and torch.autograd.forward_ad.unpack_dual(v).tangent is not None)):
            names.append(n)
        else:
            rest[n] = v.detach() if dual or v.requires_grad else v
    return names, rest


def _detached(torch, values):
    """The names of the arguments that require grad, and the arguments with those detached."""
    names = [n for n, v in values.items() if isinstance(v, torch.Tensor) and v.requires_grad]
    return names, {n: (v.detach() if n in names else v) for n, v in values.items()}


def _functorch(torch, args, kwargs):
    """Whether a tensor argument is wrapped by a ``torch.func`` transform (vmap's batched
    tensors, grad's tracking tensors): it has no storage of its own, so the op goes through
    the transform's autograd.Function rules (:func:`_func_function`). Outside every transform
    (one C call tells) no argument is looked at: this runs on every call with torch tensors."""
    if torch._C._functorch.peek_interpreter_stack() is None:
        return False
    wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    return any(isinstance(a, torch.Tensor) and wrapped(a)
               for group in (args, kwargs.values()) for a in group if type(a) not in _PLAIN)


def _slices(tensors, dims, b):
    """Batch element ``b`` of each tensor (``select`` along its batch axis, or the tensor
    itself where it has none)."""
    return [t if d is None else t.select(d, b) for t, d in zip(tensors, dims)]


def _stack(torch, outs):
    """Per-element results stacked along a new batch axis 0 (sort, topk: each of the pair)."""
    if isinstance(outs[0], tuple):
        return tuple(torch.stack(o) for o in zip(*outs)), (0,) * len(outs[0])
    return torch.stack(outs), 0


class _Dynamic(Exception):
    """An output whose length depends on the values: no batched shape."""


class _Shapes:
    """The shape context of a batched call (see gather._shapes)."""

    broadcast = staticmethod(np.broadcast_shapes)

    @staticmethod
    def dynamic(op, hint):
        raise _Dynamic(op)


def _xla_codes(torch):
    """XLA's dtype codes (``XLA_FFI_DataType``), which ``_native._batched_cuda`` takes, by torch
    dtype (bfloat16 aside: its tensors take the loop)."""
    return {torch.bool: 1, torch.int8: 2, torch.int16: 3, torch.int32: 4, torch.int64: 5, torch.uint8: 6,
            torch.uint16: 7, torch.uint32: 8, torch.uint64: 9, torch.float16: 10, torch.float32: 11,
            torch.float64: 12}


def _vmapped(torch, call, values, names, tensors, dims, size, grad=None):
    """``torch.func.vmap``'s rule in one call of the library, which runs the op (or with
    ``grad``, ``(grad_output, its batch axis)``, its gradient) once per batch element on the
    arrays' memory (``_native._batched``, or ``_batched_cuda`` in torch's current stream): the
    batch axis first, of size 1 where a tensor has none. None where that cannot run (a plan,
    bfloat16 tensors, tensors on several devices, a tensor still wrapped by an outer transform,
    an output whose length depends on the values): the caller loops."""
    op = call["op"]
    every = tensors if grad is None else (grad[0],) + tensors
    wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    devices = {t.device for t in every}
    if not hasattr(_native, op) or size == 0 or len(devices) != 1 or any(
            t.dtype == torch.bfloat16 or wrapped(t) for t in every):
        return None
    device = devices.pop()
    if device.type not in ("cpu", "cuda"):
        return None
    one = dict(values, **{n: t if d is None else t.select(d, 0) for n, t, d in zip(names, tensors, dims)})
    described = _calls.describe(op, one, lambda v: isinstance(v, torch.Tensor))
    if described is None:
        return None
    lib_of, args = described

    def batched(t, d):
        t = t.detach()
        return (t.unsqueeze(0) if d is None else t.movedim(d, 0)).contiguous()

    operands = [(lib_of[n], batched(t, d)) for n, t, d in zip(names, tensors, dims)]
    ranks = [one[n].ndim for n in names]
    if grad is None:
        try:
            shapes = getattr(_shapes, op)(_Shapes, **one)
        except _Dynamic:
            return None
        results = [torch.empty((size,) + tuple(s), dtype=one["input"].dtype if k == "input" else torch.int64,
                               device=device) for s, k in zip(shapes, _shapes.kinds(op))]
        out_names, mode = _calls.output_names(len(results)), "call"
        if op in _calls.IN_PLACE:  # into the first result, which holds input first
            i = next(k for k, (lib, _) in enumerate(operands) if lib == "input")
            results[0].copy_(operands[i][1])  # a new tensor: never the caller's
            operands[i], mode = ("input", results[0]), "inplace"
    else:
        g, d = grad
        order = call["order"](one)
        results = [torch.empty((size,) + tuple(one[n].shape), dtype=one[n].dtype, device=device) for n in order]
        out_names, mode = ["grad_" + lib_of[n] for n in order], "grad"
        operands.insert(0, ("grad_output", batched(g, d)))
        ranks.insert(0, g.ndim - (d is not None))
    out_ranks = [r.ndim - 1 for r in results]
    if device.type == "cpu":
        _native._batched(op, mode, [(n, t.numpy()) for n, t in operands],
                         [(n, t.numpy()) for n, t in zip(out_names, results)], args, ranks, out_ranks)
    else:
        code = _xla_codes(torch)
        buffers = lambda pairs: [(n, t.data_ptr(), tuple(t.shape), code[t.dtype]) for n, t in pairs]  # noqa: E731
        _native._batched_cuda(op, mode, buffers(operands), buffers(zip(out_names, results)), args, ranks,
                              out_ranks, device.index, torch.cuda.current_stream(device).cuda_stream)
    if grad is not None or len(results) > 1:
        return tuple(results), (0,) * len(results)
    return results[0], 0


def _grads(torch, call, values, names, grad_output, tensors):
    """The op's gradient of each data argument, by name, run directly on the tensors' memory
    (outside the autograd graph)."""
    given = dict(values, **{n: t.detach() for n, t in zip(names, tensors)})
    back = {k: v for k, v in given.items() if k in call["grad_params"]}
    grads = _on_torch(torch, call["grad"], (grad_output.detach(),), back)
    return dict(zip(call["order"](given), grads if isinstance(grads, tuple) else (grads,)))


def _is_tensor(torch):
    return lambda v: isinstance(v, torch.Tensor)


def _one_forward_level(torch, op):
    """Refuses forward mode over forward mode (``jvp`` of ``jvp``, ``jacfwd`` of ``jacfwd``):
    torch.func drops what a custom Function's jvp rule computes from the outer level's view (its
    derivative would be zero, silently)."""
    try:  # torch's private view of the transforms' stack (torch 2.1 and later)
        from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters

        jvp = torch._C._functorch.TransformType.Jvp
    except (ImportError, AttributeError):
        return
    if sum(i.key() == jvp for i in retrieve_all_functorch_interpreters()) > 1:
        raise RuntimeError(
            f"gather.{op}: forward mode over forward mode (jvp of jvp, jacfwd of jacfwd) is not "
            "supported: torch.func does not differentiate a custom Function's jvp rule again\n"
            "hint: use reverse mode for the inner derivative: torch.func.hessian (jacfwd of "
            "jacrev), jacrev of jacrev, or jvp of grad")


def _func_function(torch):
    """The autograd.Functions of the ops (made on first use), for torch's autograd and for
    ``torch.func``'s transforms: the op, whose backward is its gradient as another Function,
    whose backward is in turn the op's derivative along a direction (``gather._tangents``),
    made of the ops, so that gradients have gradients. Both have a ``jvp`` rule (forward mode:
    ``torch.func.jvp``, ``jacfwd``, ``hessian``, ``torch.autograd.forward_ad``) and a ``vmap``
    rule that runs them once per batch element (so every op keeps its semantics, and
    transforms nest). A product's third derivative in its data is refused."""
    if "func" in _FUNCTION:
        return _FUNCTION["func"]
    is_tensor = _is_tensor(torch)
    curved = _tangents.curved

    def run_grad(call):
        def run(g, values):
            names = [n for n, v in values.items() if is_tensor(v)]
            rest = {n: v for n, v in values.items() if n not in names}
            tensors = [values[n] for n in names]
            if curved(values):  # the weights depend on the data: keep them differentiable
                return dict(zip(call["order"](values), GatherGrad.apply(call, rest, names, g, *tensors)))
            if _functorch(torch, (g,), values):
                grads = GatherGrad.apply(call, rest, names, g, *tensors)
                return dict(zip(call["order"](values), (t.detach() for t in grads)))
            return _grads(torch, call, rest, names, g, tensors)

        return run

    def keep(ctx, inputs, gradient, forward=True):
        """Saves the op's tensors (and a product's grad_output, for its curvature), for the
        backward and, unless ``forward`` is false, for the jvp rule."""
        call, values, names, *rest = inputs
        ctx.call, ctx.values, ctx.names = call, values, names
        ctx.offset = 1 if gradient and curved(values) else 0
        tensors = rest[1 - ctx.offset:] if gradient else rest
        ctx.save_for_backward(*tensors)
        if forward:
            ctx.save_for_forward(*tensors)

    def primal(ctx, detach=True):
        """The call's arguments with the saved tensors (detached, but for the products, whose
        derivatives depend on the data: their weights are GatherGrad's, which differentiates)."""
        saved = ctx.saved_tensors[ctx.offset:]
        if detach or not curved(ctx.values):
            saved = [t.detach() for t in saved]
        return dict(ctx.values, **dict(zip(ctx.names, saved)))

    def curvature(ctx, along):
        """A product's ``H v`` (gather._tangents.curvature) by data name; its own derivative
        in the data (a third derivative) is refused."""
        values = primal(ctx)
        hv = _tangents.curvature(ctx.call, values, ctx.saved_tensors[0].detach(), along, torch, is_tensor)
        data = [t for n, t in zip(ctx.names, ctx.saved_tensors[1:]) if n in hv]
        return {n: Third.apply(ctx.call["op"], h, *data) for n, h in hv.items()}

    class Third(torch.autograd.Function):
        """A product's curvature, whose derivative in the data is refused."""

        generate_vmap_rule = True

        @staticmethod
        def forward(op, hv, *data):
            return hv.clone()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.op, ctx.count = inputs[0], len(inputs) - 2

        @staticmethod
        def refuse(op):
            raise RuntimeError(f"gather.{op}: the third derivative of a product (reduce='prod', "
                               "'multiply') with respect to its data is not supported")

        @staticmethod
        def backward(ctx, g):
            if any(ctx.needs_input_grad[2:]):
                Third.refuse(ctx.op)
            return (None, g) + (None,) * ctx.count

        @staticmethod
        def jvp(ctx, _op, t, *data_ts):
            _one_forward_level(torch, ctx.op)
            if any(d is not None for d in data_ts):
                Third.refuse(ctx.op)
            return t

    class GatherGrad(torch.autograd.Function):
        @staticmethod
        def forward(call, values, names, grad_output, *tensors):
            by_name = _grads(torch, call, values, names, grad_output, tensors)
            return tuple(by_name[n] for n in call["order"](dict(values, **dict(zip(names, tensors)))))

        @staticmethod
        def setup_context(ctx, inputs, output):
            keep(ctx, inputs, True)

        @staticmethod
        def backward(ctx, *cotangents):
            # <grad(g, x), v> = <g, J(x) v>: the gradient of g is the derivative along v; that of
            # x is zero (selections, piecewise-constant weights) but for the products.
            values = primal(ctx, detach=False)
            along = dict(zip(ctx.call["order"](values), cotangents))
            g = _tangents.tangent(ctx.call, values, along, torch, run_grad(ctx.call), is_tensor)
            hv = curvature(ctx, along) if curved(ctx.values) else {}
            return (None, None, None, g) + tuple(hv.get(n) for n in ctx.names)

        @staticmethod
        def jvp(ctx, _call, _values, _names, grad_output_t, *tensor_ts):
            # Linear in grad_output, plus the products' curvature along the data's tangents.
            _one_forward_level(torch, ctx.call["op"])
            values = primal(ctx, detach=False)
            order = ctx.call["order"](values)
            tensors = [values[n] for n in ctx.names]
            out = tuple(torch.zeros_like(values[n]) for n in order) if grad_output_t is None else \
                GatherGrad.apply(ctx.call, ctx.values, ctx.names, grad_output_t, *tensors)
            along = {n: t for n, t in zip(ctx.names, tensor_ts) if n in _tangents.DATA and t is not None}
            if along and curved(ctx.values):
                hv = curvature(ctx, along)
                out = tuple(o + hv[n] for o, n in zip(out, order))
            return out

        @staticmethod
        def vmap(info, in_dims, call, values, names, grad_output, *tensors):
            dims = in_dims[3:]
            fast = _vmapped(torch, call, values, names, tensors, dims[1:], info.batch_size,
                            (grad_output, dims[0]))
            if fast is not None:
                return fast
            outs = [GatherGrad.apply(call, values, names, *_slices((grad_output,) + tensors, dims, b))
                    for b in range(info.batch_size)]
            return _stack(torch, outs)

    class GatherOp(torch.autograd.Function):
        @staticmethod
        def forward(call, values, names, *tensors):
            given = dict(values, **{n: t.detach() for n, t in zip(names, tensors)})
            return _on_torch(torch, call["forward"], (), given)

        @staticmethod
        def setup_context(ctx, inputs, output):
            keep(ctx, inputs, 0)
            if isinstance(output, tuple):  # sort, topk: (values, indices)
                ctx.mark_non_differentiable(output[1])

        @staticmethod
        def backward(ctx, grad_output, *_):
            tensors = ctx.saved_tensors
            if torch.is_grad_enabled():  # create_graph: record the gradient, to differentiate it
                grads = GatherGrad.apply(ctx.call, ctx.values, ctx.names, grad_output, *tensors)
                by_name = dict(zip(ctx.call["order"](primal(ctx)), grads))
            else:
                by_name = _grads(torch, ctx.call, ctx.values, ctx.names, grad_output, tensors)
            return (None, None, None) + tuple(by_name.get(n) for n in ctx.names)

        @staticmethod
        def jvp(ctx, _call, _values, _names, *tensor_ts):
            _one_forward_level(torch, ctx.call["op"])
            out = _tangents.tangent(ctx.call, primal(ctx, detach=False), dict(zip(ctx.names, tensor_ts)),
                                    torch, run_grad(ctx.call), is_tensor)
            return (out, None) if ctx.call["op"] in ("sort", "topk") else out

        @staticmethod
        def vmap(info, in_dims, call, values, names, *tensors):
            dims = in_dims[3:]
            fast = _vmapped(torch, call, values, names, tensors, dims, info.batch_size)
            if fast is not None:
                return fast
            outs = [GatherOp.apply(call, values, names, *_slices(tensors, dims, b))
                    for b in range(info.batch_size)]
            return _stack(torch, outs)

    class GatherEager(torch.autograd.Function):
        """GatherOp for torch's own autograd, with the same rules: a forward that takes ctx
        spares Function.apply's binding of forward's signature, a fifth of a tiny call's
        forward and backward. Its jvp rule runs only inside a forward-mode level (torch.func's
        transforms take GatherOp), so only there does it save its tensors for one."""

        @staticmethod
        def forward(ctx, *inputs):
            out = GatherOp.forward(*inputs)
            keep(ctx, inputs, 0, _dual(torch))
            if isinstance(out, tuple):  # sort, topk: (values, indices)
                ctx.mark_non_differentiable(out[1])
            return out

        backward = staticmethod(GatherOp.backward)
        jvp = staticmethod(GatherOp.jvp)

    _FUNCTION["func"], _FUNCTION["eager"] = GatherOp, GatherEager
    return GatherOp


def _eager_function(torch):
    """GatherOp's twin for torch's autograd outside torch.func's transforms."""
    _func_function(torch)
    return _FUNCTION["eager"]


def detaching(native):
    """A gradient of :mod:`gather.grad` that takes tensors that require grad (a custom
    Function's saved tensors do) by reading them detached: the result records no graph."""

    def run(*args, **kwargs):
        torch, grad = _torch_tensors(args, kwargs)
        if not grad:
            if torch is None and _dask_ops.given(args, kwargs):
                return _dask_ops.grad(native.__name__, args, kwargs)
            return native(*args, **kwargs)
        args, kwargs = _each_tensor(torch, args, kwargs, "detach")
        return native(*args, **kwargs)

    return _wrap(run, native.__name__, native, "gather.grad")


def _binder(signature):
    """``signature.bind(*args, **kwargs).arguments`` for the usual call, without its cost
    (inspect's binding walks every parameter's kind): the positional arguments by name, then
    the keywords. A call that binds otherwise or not at all (too many positional arguments, a
    name unknown, repeated or missing) goes to ``signature.bind``, which raises its TypeError."""
    kinds = inspect.Parameter
    params = signature.parameters.values()
    positional = tuple(p.name for p in params if p.kind == kinds.POSITIONAL_OR_KEYWORD)
    known = frozenset(p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY))
    required = frozenset(p.name for p in params if p.default is kinds.empty)

    def bind(args, kwargs):
        if len(args) <= len(positional):
            given = dict(zip(positional, args))
            if kwargs and given.keys().isdisjoint(kwargs) and known.issuperset(kwargs):
                given.update(kwargs)
            elif kwargs:
                return signature.bind(*args, **kwargs).arguments
            if given.keys() >= required:
                return given
        return signature.bind(*args, **kwargs).arguments

    return bind


def _wrap(fn, op, native, module="gather"):
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = native.__doc__
    fn.__module__ = module
    fn.__wrapped__ = native
    try:
        fn.__signature__ = inspect.signature(native)
    except ValueError:
        pass
    return fn


def _op_order(values):
    """gather.grad returns grad_input, then grad_src or grad_source where the op has one."""
    return ["input"] + [n for n in _DATA[1:] if n in values]


def differentiable(op):
    """``gather.<op>``, recorded by torch's autograd when a tensor argument requires grad."""
    native = getattr(_native, op)
    signature = inspect.signature(native)
    bind = _binder(signature)
    grad = getattr(_grad, op, None)  # None: an op whose outputs are indices (argsort)
    call = {"op": op, "forward": native, "grad": grad, "order": _op_order,
            "grad_params": set(inspect.signature(grad).parameters) if grad else set()}

    takes_out = op in _out.OPS

    def run(*args, **kwargs):
        if kwargs and takes_out and ("out" in kwargs or "sparse_grad" in kwargs):
            return _out.call(op, run, args, kwargs)
        if _plain(args, kwargs):
            return native(*args, **kwargs)
        torch, needs_grad = _torch_tensors(args, kwargs)
        if torch is None:
            if _jax_traced(args, kwargs):
                from . import _jax_ops

                return _jax_ops.call(op, args, kwargs)
            if _dask_ops.given(args, kwargs):
                return _dask_ops.call(op, args, kwargs)
            return native(*args, **kwargs)
        if _torch_ops is not None and torch.compiler.is_compiling():
            # Dynamo is tracing: the custom operator (defined when Dynamo was imported) goes
            # into the graph, on contiguous tensors. With a transposed input Inductor asserted
            # transposed strides on the op's output, whatever its fake said, while the library's
            # results are always C-contiguous.
            args, kwargs = _each_tensor(torch, args, kwargs, "contiguous")
            return _torch_ops.call(op, args, kwargs)
        if _functorch(torch, args, kwargs):
            given = bind(args, kwargs)
            names = [n for n, v in given.items() if isinstance(v, torch.Tensor)]
            values = {n: v for n, v in given.items() if n not in names}
            return _func_function(torch).apply(call, values, names, *(given[n] for n in names))
        if not needs_grad and not _dual(torch):
            return _on_torch(torch, native, args, kwargs)
        given = bind(args, kwargs)
        names, rest = _differentiated(torch, given, _DATA)
        if grad is None or not names:
            return _on_torch(torch, native, (), dict(rest, **{n: given[n].detach() for n in names}))
        return _eager_function(torch).apply(call, rest, names, *[given[n] for n in names])

    fn = _wrap(run, op, native)
    if takes_out:
        # PyTorch's keyword-only `sparse_grad` (gather) and `out`, first among the keywords.
        sig = fn.__signature__
        params = list(sig.parameters.values())
        at = next((i for i, p in enumerate(params) if p.kind is p.KEYWORD_ONLY), len(params))
        extra = [inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)]
        if op == "gather":
            extra.insert(0, inspect.Parameter("sparse_grad", inspect.Parameter.KEYWORD_ONLY, default=False))
        fn.__signature__ = sig.replace(parameters=params[:at] + extra + params[at:])
    return fn


def in_place(op):
    """``gather.<op>_``: writes into a tensor that requires grad only under ``torch.no_grad()``."""
    native = getattr(_native, op)
    bind = _binder(inspect.signature(native))

    def run(*args, **kwargs):
        if _plain(args, kwargs):
            return native(*args, **kwargs)
        torch, grad = _torch_tensors(args, kwargs)
        if torch is not None and not (grad and torch.is_grad_enabled()) and _torch_ops is not None \
                and torch.compiler.is_compiling():
            # The operator mutates the caller's `input` itself: no contiguous copies here.
            _torch_ops.call(op, args, kwargs)
            return args[0] if args else kwargs["input"]
        if torch is not None and _functorch(torch, args, kwargs):
            raise refused(f"{op}: under a torch.func transform (vmap, grad) the in-place forms "
                          "cannot write into the transform's tensors",
                          f"call gather.{op[:-1]} (out of place), which the transforms run")
        if torch is None and _dask_ops.given(args, kwargs):
            raise _dask_ops.refuse_in_place(op)
        if torch is None and _jax_traced(args, kwargs):
            raise refused(f"{op}: `input` is a traced JAX array, which cannot be written",
                          f"JAX arrays are immutable: call gather.{op[:-1]} (out of place), which returns the result")
        _out.not_inference(args[0] if args else kwargs.get("input"), f"{op}: `input`")
        if not grad:
            views = _numpy_views(torch, args, kwargs) if torch is not None else None
            if views is None:
                return native(*args, **kwargs)
            try:
                native(*views[0], **views[1])  # writes into the tensor's memory through its view
            except GatherError as e:
                respell(e, "torch")
                raise
            return _out.written(args[0] if args else kwargs["input"])
        given = bind(args, kwargs)
        names, values = _detached(torch, given)
        if torch.is_grad_enabled():
            verb = "requires" if len(names) == 1 else "require"
            raise refused(
                f"{op}: {' and '.join(names)} {verb} grad, and the in-place forms do not record gradients",
                f"use gather.{op[:-1]} (out of place), which torch's autograd records, or write under "
                f"`with torch.no_grad():`",
            )
        native(**values)
        return given["input"]

    return _wrap(run, op, native)


def _expanded(index, like):
    """The plan's 1-d row index as a view of ``like``'s shape (stride 0 off dim 0)."""
    shape = (-1,) + (1,) * (like.ndim - 1)
    if hasattr(index, "expand"):  # torch
        return index.reshape(shape).expand(like.shape)
    return np.broadcast_to(np.asarray(index).reshape(shape), like.shape)


# The live plans by key: a compiled graph names its plan by the key (a custom operator takes no
# Python object), and the operator finds the plan here when it runs.
PLANS = weakref.WeakValueDictionary()


class ScatterPlan:
    __doc__ = _native.ScatterPlan.__doc__.rstrip() + """

Torch's autograd records ``scatter_add`` and ``scatter_reduce`` where ``dst`` or ``src``
requires grad. Their backward reads the plan's index again, without a copy: a torch index
changed in place since the plan was built is an error there, as in torch's own autograd.
Under ``torch.compile`` both calls stay in the graph (custom operators that name the plan),
with their gradients; build the plan outside the compiled function and reuse it.
"""

    def __init__(self, index, size):
        self._plan = _native.ScatterPlan(index, size)
        self._index = index
        self._version = getattr(index, "_version", None)  # torch's count of in-place changes
        self._key = self._plan._key  # the extension's key, which JAX's handler reads too
        PLANS[self._key] = self

    def __len__(self):
        return len(self._plan)

    @property
    def size(self):
        """The number of rows a destination must have (the size the index was checked against)."""
        return self._plan.size

    @property
    def device(self):
        """Where the plan lives and applies: ``"cpu"`` or ``"cuda:N"``."""
        return self._plan.device

    def __repr__(self):
        return repr(self._plan)

    def _run(self, values):
        native = self._plan.scatter_add if "reduce" not in values else self._plan.scatter_reduce
        torch, grad = _torch_tensors((), values)
        if torch is not None and _torch_ops is not None and torch.compiler.is_compiling():
            return _torch_ops.call_plan(self._key, values)
        if torch is None and _jax_traced((), values):
            from . import _jax_ops

            return _jax_ops.call_plan(self, native, values)
        if torch is None and _dask_ops.given((), values):
            return _dask_ops.plan(self, values)
        call = {"op": f"ScatterPlan.{native.__name__}", "forward": native, "grad": self._grad, "plan": self,
                "order": lambda v: ["dst", "src"], "grad_params": {"dst", "src", "reduce", "include_self", "dtype"}}
        if torch is not None and _functorch(torch, (), values):
            names = [n for n in ("dst", "src") if isinstance(values[n], torch.Tensor)]
            rest = {n: v for n, v in values.items() if n not in names}
            return _func_function(torch).apply(call, rest, names, *(values[n] for n in names))
        if not grad and not (torch is not None and _dual(torch)):
            return native(**values)
        names, rest = _differentiated(torch, values, ("dst", "src"))
        if not names:
            return native(**rest)
        return _eager_function(torch).apply(call, rest, names, *(values[n] for n in names))

    def _grad(self, grad_output, dst, src, reduce=None, include_self=True, dtype=None):
        if getattr(self._index, "_version", None) != self._version:
            raise RuntimeError(
                "ScatterPlan: the index the plan was built from has been modified by an inplace "
                "operation since, so the gradient would not match the forward\nhint: build a new "
                "plan after changing the index, or change a clone of it"
            )
        index = _expanded(self._index, src)
        if reduce is None:
            return _grad.scatter_add(grad_output, dst, 0, index, src, dtype=dtype)
        return _grad.scatter_reduce(grad_output, dst, 0, index, src, reduce, include_self=include_self,
                                    dtype=dtype)

    def scatter_add(self, dst, src, *, dtype=None):
        return self._run({"dst": dst, "src": src, "dtype": dtype})

    def scatter_reduce(self, dst, src, reduce, *, include_self=True, dtype=None):
        return self._run({"dst": dst, "src": src, "reduce": reduce, "include_self": include_self,
                          "dtype": dtype})

    scatter_add.__doc__ = _native.ScatterPlan.scatter_add.__doc__
    scatter_reduce.__doc__ = _native.ScatterPlan.scatter_reduce.__doc__

"""JAX's transformations through gather's ops: ``jax.jit``, ``jax.grad``, ``jax.vmap``,
``jax.jvp``, ``jacfwd``, ``jacrev``, ``hessian``.

A traced JAX array (inside a transformation) has no DLPack and no values, so it cannot reach the
library when the op is called. With one among its arguments an op becomes a JAX primitive whose
compiled form is an XLA custom call (``jax.ffi.ffi_call``) that the program makes when it runs:
the extension's FFI handler runs the library on XLA's own buffers, in host memory on the CPU and
in device memory, in XLA's stream order, on an NVIDIA GPU. The output's shape comes from
``gather._shapes``. The primitive has JAX's rules: its derivative along tangents is made of the
ops (``gather._tangents``), that derivative's transpose is the op's gradient (:mod:`gather.grad`,
one more custom call), and the gradient's own derivative and transpose close the loop, so
forward and reverse mode compose to second order (every order but for the products). Under
``jax.vmap`` the handler gets the batch axes in front of the buffers and runs the op once per
batch element, so every op keeps its semantics.

A ``ScatterPlan``'s calls go to the handler too, which finds the plan by a key. What the
handler cannot take (``dtype="bfloat16"`` bit patterns, a traced scalar argument, a plan's
``"sum"`` without ``include_self``, another platform) runs as a ``jax.pure_callback`` instead,
on the host, inside a ``jax.custom_vjp`` (reverse mode, first order; the callbacks run
sequentially under vmap).
An output whose length depends on values (``masked_select``, ``repeat_interleave`` without
``output_size``) has no static shape and is refused when tracing, as ``jnp.repeat`` refuses one
without ``total_repeat_length``. An error of the library (a bad index) surfaces when the
computation runs, as JAX's runtime error with the library's message.

Imported only once a traced JAX array reaches an op, so that ``import gather`` never imports jax.
"""

import dataclasses
import functools
import inspect
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from . import _calls, _native, _shapes, _tangents
from ._errors import GatherError, refused, respell
from ._native import grad as _grad


class _Static:
    """The shape context of traced calls (see gather._shapes): JAX shapes are static."""

    broadcast = staticmethod(np.broadcast_shapes)

    @staticmethod
    def dynamic(op, hint):
        raise refused(
            f"{op}: under a JAX transformation the output's length must be known when tracing, "
            f"and {op}'s depends on the values",
            f"{hint}, or call {op} outside jax.jit",
        )


def _is_array(a):
    return isinstance(a, (jax.Array, np.ndarray))


def _index_dtype():
    return jax.dtypes.canonicalize_dtype(np.int64)  # int32 unless jax_enable_x64


def call(op, args, kwargs):
    """``gather.<op>(*args, **kwargs)`` on traced arrays."""
    native = getattr(_native, op)
    values = dict(inspect.signature(native).bind(*args, **kwargs).arguments)
    if op in _calls.CHECKED:
        # The library's errors when tracing, where JAX raises its own shape errors, rather than
        # from the compiled program's run.
        try:
            _calls.check(native, values, [n for n, v in values.items() if _is_array(v)])
        except GatherError as e:
            respell(e, "jax")
            raise
    dtype = jnp.result_type(values["input"])
    shapes = getattr(_shapes, op)(_Static, **values)
    kinds = _shapes.kinds(op)
    outputs = [jax.ShapeDtypeStruct(s, dtype if k == "input" else _index_dtype())
               for s, k in zip(shapes, kinds)]
    request = _describe(op, values) if _ffi_ready() else None
    if request is None:
        order = ["input"] + [n for n in ("src", "source") if _is_array(values.get(n))]  # as gather.grad returns them
        backward = getattr(_grad, op, None)
        names, diff = _operands(values, order, backward)
        runners = _callbacks(native, backward, values, names, outputs, order, diff)
        return apply(runners, values, names, diff, len(outputs) == 1)
    lib_of, attrs = request
    names = [n for n, v in values.items() if _is_array(v)]
    spec = _Spec(op=op, mode="inplace" if op in _calls.IN_PLACE else "call",
                 args=tuple((n, lib_of[n]) for n in names),
                 static=_frozen({n: v for n, v in values.items() if n not in names}),
                 attrs=_frozen(attrs), ranks=tuple(np.ndim(values[n]) for n in names),
                 outputs=tuple((tuple(o.shape), np.dtype(o.dtype)) for o in outputs),
                 out_names=tuple(_calls.output_names(len(outputs))),
                 diff=tuple(n for n in ("input", "src", "source") if n in names) if hasattr(_grad, op) else ())
    out = _op_p.bind(*(values[n] for n in names), spec=spec)
    return out[0] if len(out) == 1 else tuple(out)


def call_plan(plan, forward, values):
    """A ScatterPlan's call on traced arrays: its output has ``dst``'s shape and dtype. The FFI
    handler finds the plan by its key; the gradient is index_add's or index_reduce's with the
    plan's 1-d index (the same as scatter_add's and scatter_reduce's with it expanded)."""
    dst = values["dst"]
    outputs = [jax.ShapeDtypeStruct(dst.shape, jnp.result_type(dst))]
    reduce, include_self = values.get("reduce"), values.get("include_self", True)
    if values.get("dtype") is not None or not _ffi_ready() or (reduce == "sum" and not include_self):
        # index_add has no include_self: that gradient comes from scatter_reduce's, by callback.
        order = ["dst", "src"]
        names, diff = _operands(values, order, plan._grad)
        runners = _callbacks(forward, plan._grad, values, names, outputs, order, diff)
        return apply(runners, values, names, diff, True)
    attrs = {"_plan": np.int64(plan._key)}
    if reduce is not None:
        attrs.update(reduce=reduce, include_self=np.bool_(include_self))
    spec = _Spec(op="scatter_add" if reduce is None else "scatter_reduce", mode="plan",
                 args=(("dst", "dst"), ("src", "src")),
                 static=_frozen({n: v for n, v in values.items() if n not in ("dst", "src")}),
                 attrs=_frozen(attrs), ranks=(np.ndim(dst), np.ndim(values["src"])),
                 outputs=((tuple(dst.shape), np.dtype(outputs[0].dtype)),), out_names=("output",),
                 diff=("dst", "src"), plan=plan._key)
    return _op_p.bind(dst, values["src"], spec=spec)[0]


_TARGET = "gather_op"


@functools.cache
def _ffi_platforms():
    """Registers the extension's XLA handlers; returns JAX's backends that have one. A jaxlib
    whose FFI refuses the handler (its API version range, say) keeps the callbacks, and says so."""
    platforms = set()
    try:
        cuda = bool(jax.devices("cuda"))
    except RuntimeError:  # no CUDA backend in this jaxlib, or no NVIDIA GPU
        cuda = False
    # (the extension's platform, XLA's name for it, JAX's backend)
    for platform, xla, backend in [("cpu", "cpu", "cpu")] + ([("cuda", "CUDA", "gpu")] if cuda else []):
        try:
            jax.ffi.register_ffi_target(_TARGET, _native._xla_handler(platform), platform=xla)
        except Exception as e:  # noqa: BLE001 - any refusal leaves the callbacks, which work
            warnings.warn(f"gather: JAX's XLA FFI refused gather's {platform} handler ({e}); traced "
                          "calls run as host callbacks there", RuntimeWarning, stacklevel=3)
            continue
        platforms.add(backend)
    return frozenset(platforms)


def _ffi_ready():
    """Whether traced calls lower to the FFI handler: on JAX's CPU and NVIDIA backends."""
    return jax.default_backend() in _ffi_platforms()


def _attribute(v):
    """A non-array argument as an XLA attribute (None where it cannot be one)."""
    if isinstance(v, (bool, np.bool_)):
        return np.bool_(v)
    if isinstance(v, (int, np.integer)):
        return np.int64(v)
    if isinstance(v, (float, np.floating)):
        return np.float64(v)
    if isinstance(v, str):
        return v
    return None


def _describe(op, values):
    """The handler's view of the call: ``(library name of each array argument, attributes)``,
    or None where it needs the callback."""
    described = _calls.describe(op, values, _is_array)
    if described is None:
        return None
    arrays, args = described
    attrs = {k: _attribute(v) for k, v in args.items()}
    if any(a is None for a in attrs.values()):
        return None
    return arrays, attrs


def _operands(values, order, backward):
    """The names of the array arguments (the call's operands) and of those differentiated."""
    names = [n for n, v in values.items() if _is_array(v)]
    diff = [n for n in order if backward is not None and jnp.issubdtype(values[n].dtype, jnp.inexact)]
    return names, diff


def _callbacks(forward, backward, values, names, outputs, order, diff):
    """The forward and backward as host callbacks: ``forward(**values)`` with ``outputs``
    (shape-dtype structs), and ``backward(grad_output, **values)``, which returns the gradients
    of ``order``'s arguments. Arrays among ``values`` are the callback's operands; the rest stay
    Python values."""
    static = {n: v for n, v in values.items() if n not in names}

    def run(*arrays):
        return _host(forward(**static, **dict(zip(names, _numpy(arrays)))), outputs)

    def fwd(*arrays):
        return jax.pure_callback(run, tuple(outputs), *arrays, vmap_method="sequential")

    def bwd(grad_output, *arrays):
        wanted = [jax.ShapeDtypeStruct(arrays[names.index(n)].shape, arrays[names.index(n)].dtype) for n in diff]

        def run_grad(g, *arrays):
            g, *arrays = _numpy((g,) + arrays)
            grads = backward(g, **static, **dict(zip(names, arrays)))
            by_name = dict(zip(order, grads if isinstance(grads, tuple) else (grads,)))
            return _host(tuple(by_name[n] for n in diff), wanted)

        return jax.pure_callback(run_grad, tuple(wanted), grad_output, *arrays, vmap_method="sequential")

    return fwd, bwd


def _zero(a):
    """The cotangent of an argument that gets no gradient: float0 for integers and booleans."""
    if jnp.issubdtype(a.dtype, jnp.inexact):
        return jnp.zeros(a.shape, a.dtype)
    return np.zeros(a.shape, jax.dtypes.float0)


def _numpy(arrays):
    """The callback's operands as NumPy arrays (JAX hands over its own CPU arrays, which the
    library would import and export through DLPack, at about 60 µs a result); bfloat16, which
    NumPy lacks, stays JAX's."""
    return [a if a.dtype == jnp.bfloat16 else np.asarray(a) for a in arrays]


def _host(outs, structs):
    """The callback's results as NumPy arrays of the dtypes JAX was promised."""
    outs = outs if isinstance(outs, tuple) else (outs,)
    return tuple(np.asarray(o).astype(s.dtype, copy=False) for o, s in zip(outs, structs))


def apply(runners, values, names, diff, single):
    """The op on ``values``' arrays (``names``) through ``runners``' forward, differentiable
    through their backward, which gives the gradients of ``diff``'s arguments."""
    forward, backward = runners

    @jax.custom_vjp
    def op(*arrays):
        out = forward(*arrays)
        return out[0] if single else tuple(out)

    def op_fwd(*arrays):
        return op(*arrays), arrays

    def op_bwd(arrays, grad_output):
        if not single:  # sort, topk: no gradient reaches the indices
            grad_output = grad_output[0]
        got = dict(zip(diff, backward(grad_output, *arrays))) if diff else {}
        return tuple(got[n] if n in got else _zero(a) for n, a in zip(names, arrays))

    op.defvjp(op_fwd, op_bwd)
    return op(*(values[n] for n in names))


# ---------------------------------------------------------------------------------------------
# The primitive: what the handler runs, with JAX's rules for it. Forward mode binds the op's
# derivative along the tangents ("lin", made of the ops: gather._tangents), whose transpose is
# the op's gradient ("grad"), whose own derivative is the gradient of the tangents plus, for the
# products, their curvature, and whose transpose is "lin" again: so jax.grad, jax.jvp, jacfwd,
# jacrev and hessian compose (a product's third derivative aside).
#
# Under vmap the operands get leading batch axes (size 1 where an operand has none), which the
# handler loops over; the rules made of the ops run per batch element (jax.vmap again).


def _frozen(d):
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in d.items()))


@dataclasses.dataclass(frozen=True)
class _Spec:
    """One call of the primitive, without its arrays (the primitive's parameter)."""

    op: str  # the handler's op
    mode: str  # "call", "inplace", "plan": the op; "grad": its gradient; "lin": its derivative
    args: tuple  # (Python name, library name) of each array operand
    static: tuple  # the op's other arguments, (name, value) pairs
    attrs: tuple  # the handler's attributes
    ranks: tuple  # each operand's rank, batch axes aside
    outputs: tuple  # (shape, dtype) of each result, batch axes aside
    out_names: tuple  # the handler's names of the results
    diff: tuple = ()  # the data arguments the gradient differentiates, in gather.grad's order
    plan: int = None  # a plan's key
    forward: "_Spec" = None  # "grad" and "lin": the op's own call

    @property
    def names(self):
        return [n for n, _ in self.args]

    def values(self, arrays):
        """The op's arguments by name, with ``arrays`` as its array operands."""
        return dict(self.static, **dict(zip(self.names, arrays)))


def _prefix(shapes, ranks):
    """The length of the operands' leading batch axes (the longest)."""
    return max((len(s) - r for s, r in zip(shapes, ranks)), default=0)


def _batch_shape(shapes, ranks):
    k = _prefix(shapes, ranks)
    return tuple(np.broadcast_shapes(*[(1,) * (k - len(s) + r) + tuple(s[:len(s) - r])
                                       for s, r in zip(shapes, ranks)]))


def _abstract(*avals, spec):
    batch = _batch_shape([a.shape for a in avals], spec.ranks)
    return [jax.core.ShapedArray(batch + tuple(shape), dtype) for shape, dtype in spec.outputs]


def _handler(spec, arrays):
    """The handler's custom call on ``arrays``, their batch axes in front."""
    k = _prefix([a.shape for a in arrays], spec.ranks)
    arrays = [jnp.reshape(a, (1,) * (k - a.ndim + r) + a.shape) for a, r in zip(arrays, spec.ranks)]
    batch = _batch_shape([a.shape for a in arrays], spec.ranks)
    libs = [lib for _, lib in spec.args]
    aliases = None
    if spec.mode == "inplace":  # the result aliases input, so input has every batch axis
        i = libs.index("input")
        arrays[i] = jnp.broadcast_to(arrays[i], batch + arrays[i].shape[k:])
        aliases = {i: 0}
    kinds = _shapes.kinds(spec.op) if spec.mode in ("call", "inplace") else ("input",) * len(spec.outputs)
    pairs = _index_dtype() == np.int32
    declared = []
    for (shape, dtype), kind in zip(spec.outputs, kinds):
        shape = batch + tuple(shape)
        # An index output under JAX's int32 is int32 pairs holding the library's int64 values.
        declared.append(jax.ShapeDtypeStruct(shape + (2,), np.int32) if kind == "long" and pairs
                        else jax.ShapeDtypeStruct(shape, np.int64) if kind == "long"
                        else jax.ShapeDtypeStruct(shape, dtype))
    got = jax.ffi.ffi_call(_TARGET, declared, input_output_aliases=aliases)(
        *arrays, _op=spec.op, _mode=spec.mode, _inputs=",".join(libs), _outputs=",".join(spec.out_names),
        _ranks=",".join(map(str, spec.ranks)), _out_ranks=",".join(str(len(d.shape) - k) for d in declared),
        **dict(spec.attrs))
    got = [g[..., 0] if g.ndim != k + len(s) else g for g, (s, _) in zip(got, spec.outputs)]
    return [g.astype(d) if g.dtype != d else g for g, (_, d) in zip(got, spec.outputs)]


def _per_batch(fn, arrays, ranks):
    """``fn`` (which returns a list) on each batch element of ``arrays`` (leading batch axes
    beyond ``ranks``, of size 1 where an operand has none), through jax.vmap."""
    k = _prefix([np.shape(a) for a in arrays], ranks)
    if k == 0:
        return fn(*arrays)
    arrays = [jnp.reshape(a, (1,) * (k - np.ndim(a) + r) + np.shape(a)) for a, r in zip(arrays, ranks)]
    size = max(a.shape[0] for a in arrays)
    axes = [0 if size == 1 or a.shape[0] != 1 else None for a in arrays]
    arrays = [a if x == 0 else a[0] for a, x in zip(arrays, axes)]
    return jax.vmap(lambda *a: _per_batch(fn, a, ranks), in_axes=axes)(*arrays)


def _plan(key):
    from . import _autograd

    plan = _autograd.PLANS.get(key)
    if plan is None:
        raise refused("ScatterPlan: the plan this computation was traced with has been dropped",
                      "keep the plan alive (a reference to it) as long as the computation runs")
    return plan


def _grad_spec(fwd, values, g):
    """The spec of ``fwd``'s gradient at ``values`` (unbatched) with output gradient ``g``."""
    diff = tuple(_grad_spec_diff(fwd, [values[n] for n in fwd.names]))
    outputs = tuple((tuple(np.shape(values[n])), np.dtype(jnp.result_type(values[n]))) for n in diff)
    if fwd.plan is not None:  # index_add's or index_reduce's, with the plan's 1-d index
        reduce, include_self = values.get("reduce"), values.get("include_self", True)
        op = "index_add" if reduce in (None, "sum") else "index_reduce"
        attrs = {"dim": np.int64(0)} | ({} if op == "index_add" else
                                        {"reduce": reduce, "include_self": np.bool_(include_self)})
        lib = {"dst": "input", "src": "source"}
        return _Spec(op=op, mode="grad", args=(("grad_output", "grad_output"), ("dst", "input"), ("index", "index"),
                                               ("src", "source")),
                     static=(), attrs=_frozen(attrs),
                     ranks=(np.ndim(g), np.ndim(values["dst"]), 1, np.ndim(values["src"])),
                     outputs=outputs, out_names=tuple("grad_" + lib[n] for n in diff), diff=diff, forward=fwd)
    lib_of = dict(fwd.args)
    return _Spec(op=fwd.op, mode="grad", args=(("grad_output", "grad_output"),) + fwd.args, static=fwd.static,
                 attrs=fwd.attrs, ranks=(np.ndim(g),) + fwd.ranks, outputs=outputs,
                 out_names=tuple("grad_" + lib_of[n] for n in diff), diff=diff, forward=fwd)


def _grads_of(fwd, values, g):
    """``fwd``'s gradient at ``values`` (unbatched) by data name, as the primitive."""
    spec = _grad_spec(fwd, values, g)
    arrays = [g] + [values[n] for n in fwd.names]
    if fwd.plan is not None:
        arrays = [g, values["dst"], jnp.asarray(_plan(fwd.plan)._index), values["src"]]
    return dict(zip(spec.diff, _op_p.bind(*arrays, spec=spec)))


def _call_of(fwd):
    """The call description gather._tangents takes."""
    return {"op": fwd.op} | ({"plan": _plan(fwd.plan)} if fwd.plan is not None else {})


def _lin_spec(fwd, diff):
    return _Spec(op=fwd.op, mode="lin", args=fwd.args + tuple(("d_" + n, "d_" + n) for n in diff),
                 static=fwd.static, attrs=(), ranks=fwd.ranks + tuple(fwd.ranks[fwd.names.index(n)] for n in diff),
                 outputs=fwd.outputs[:1], out_names=("output",), diff=diff, forward=fwd)


def _lin(spec, arrays):
    """The op's derivative along tangents (unbatched): ``spec.forward``'s operands, then a
    tangent of each of ``spec.diff``."""
    fwd = spec.forward
    n = len(fwd.args)
    values = fwd.values(arrays[:n])
    out = _tangents.tangent(_call_of(fwd), values, dict(zip(spec.diff, arrays[n:])), jnp,
                            lambda g, v: _grads_of(fwd, v, g), _is_array)
    return [out]


def _curvature(spec, arrays, along):
    """A product's gradient's derivative in its data (unbatched): gather._tangents.curvature."""
    fwd = spec.forward
    given = dict(zip(spec.names, arrays))
    values = fwd.values([given[n] for n in fwd.names])
    hv = _tangents.curvature(_call_of(fwd), values, arrays[0], dict(zip(spec.diff, along)), jnp, _is_array)
    return [hv[n] for n in spec.diff]


def _curv_spec(grad):
    """A product's curvature: ``grad``'s operands, then a direction for each of its data."""
    return dataclasses.replace(grad, mode="curv", args=grad.args + tuple(("v_" + n, "v_" + n) for n in grad.diff),
                               ranks=grad.ranks + tuple(grad.ranks[grad.names.index(n)] for n in grad.diff))


def _run(*arrays, spec):
    """What the compiled program runs for the primitive."""
    if spec.mode == "lin":
        return _per_batch(lambda *a: _lin(spec, a), arrays, spec.ranks)
    if spec.mode == "curv":
        n = len(spec.args) - len(spec.diff)
        return _per_batch(lambda *a: _curvature(spec, a[:n], a[n:]), arrays, spec.ranks)
    return _handler(spec, arrays)


@functools.lru_cache(maxsize=256)
def _compiled(spec):
    """The primitive applied outside a traced program (a concrete jax.jvp, say), compiled once
    per call description."""
    return jax.jit(functools.partial(_run, spec=spec))


def _batch(args, dims, *, spec):
    """vmap: the batch axis in front of each operand (size 1 where it has none)."""
    k = max(np.ndim(a) - (d is not None) - r for a, d, r in zip(args, dims, spec.ranks))
    moved = []
    for a, d, r in zip(args, dims, spec.ranks):
        if d is None:
            a = jnp.reshape(a, (1,) * (k + 1 - a.ndim + r) + a.shape)
        else:
            a = jnp.moveaxis(a, d, 0)
            a = jnp.reshape(a, a.shape[:1] + (1,) * (k + 1 - a.ndim + r) + a.shape[1:])
        moved.append(a)
    return _op_p.bind(*moved, spec=spec), [0] * len(spec.outputs)


def _zero_like(x):
    return ad.Zero(jax.core.ShapedArray(np.shape(x), jnp.result_type(x)).to_tangent_aval())


def _jvp(primals, tangents, *, spec):
    if spec.mode == "lin":  # its derivative is that of its definition, made of the ops
        tangents = [ad.instantiate_zeros(t) for t in tangents]
        return jax.jvp(lambda *a: _run(*a, spec=spec), list(primals), tangents)
    out = _op_p.bind(*primals, spec=spec)
    if spec.mode == "curv":  # linear in grad_output and in the direction; refused in the data
        n = len(spec.args) - len(spec.diff)
        if any(not isinstance(t, ad.Zero) for t, name in zip(tangents[1:n], spec.names[1:n]) if name in spec.diff):
            _third_derivative(spec)
        parts = []
        if not isinstance(tangents[0], ad.Zero):
            parts.append(_op_p.bind(tangents[0], *primals[1:], spec=spec))
        if any(not isinstance(t, ad.Zero) for t in tangents[n:]):
            parts.append(_op_p.bind(*primals[:n], *[ad.instantiate_zeros(t) for t in tangents[n:]], spec=spec))
        if not parts:
            return out, [_zero_like(o) for o in out]
        return out, [sum(p[i] for p in parts) for i in range(len(out))]
    if spec.mode == "grad":
        fwd, parts = spec.forward, []
        if not isinstance(tangents[0], ad.Zero):  # linear in grad_output
            parts.append(_op_p.bind(tangents[0], *primals[1:], spec=spec))
        along = {n: t for n, t in zip(spec.names, tangents) if n in spec.diff and not isinstance(t, ad.Zero)}
        if along and _tangents.curved(dict(fwd.static)):
            along = [ad.instantiate_zeros(tangents[spec.names.index(n)]) if n in along else jnp.zeros_like(
                primals[spec.names.index(n)]) for n in spec.diff]
            parts.append(_op_p.bind(*primals, *along, spec=_curv_spec(spec)))
        if not parts:
            return out, [_zero_like(o) for o in out]
        return out, [sum(p[i] for p in parts) for i in range(len(out))]
    diff = _grad_spec_diff(spec, primals)
    if not diff or all(isinstance(tangents[spec.names.index(n)], ad.Zero) for n in diff):
        return out, [_zero_like(o) for o in out]
    ts = [ad.instantiate_zeros(tangents[spec.names.index(n)]) for n in diff]
    derivative = _op_p.bind(*primals, *ts, spec=_lin_spec(spec, tuple(diff)))
    return out, derivative + [_zero_like(o) for o in out[1:]]  # sort, topk: no tangent for indices


def _transpose(cts, *args, spec):
    undefined = [ad.is_undefined_primal(a) for a in args]
    if spec.mode == "lin":  # linear in the tangents: the op's gradient
        fwd, n = spec.forward, len(spec.forward.args)
        if any(undefined[:n]) or isinstance(cts[0], ad.Zero):
            return [None] * len(args)
        grads = _per_batch(lambda *a: list(_grads_of(fwd, fwd.values(a[:-1]), a[-1]).values()),
                           list(args[:n]) + [cts[0]], list(fwd.ranks) + [len(fwd.outputs[0][0])])
        by_name = dict(zip(_grad_spec_diff(fwd, args[:n]), grads))
        return [None] * n + [by_name.get(d) if u else None for d, u in zip(spec.diff, undefined[n:])]
    if spec.mode == "curv":  # symmetric in the direction (a Hessian)
        n = len(spec.args) - len(spec.diff)
        if any(undefined[:n]):
            _third_derivative(spec)
        if all(isinstance(c, ad.Zero) for c in cts):
            return [None] * len(args)
        got = _op_p.bind(*args[:n], *[ad.instantiate_zeros(c) for c in cts], spec=spec)
        by_name = dict(zip(spec.diff, got))
        return [None] * n + [by_name[d] if u else None for d, u in zip(spec.diff, undefined[n:])]
    if spec.mode == "grad":  # linear in grad_output: the op's derivative along the cotangents
        if any(undefined[1:]) or all(isinstance(c, ad.Zero) for c in cts):
            return [None] * len(args)
        fwd = spec.forward
        primals = list(args[1:]) if fwd.plan is None else [args[1], args[3]]
        cts = [ad.instantiate_zeros(c) for c in cts]
        ct = _op_p.bind(*primals, *cts, spec=_lin_spec(fwd, spec.diff))[0]
        return [ct] + [None] * (len(args) - 1)
    # The op in its data, where it is linear (jax.linear_transpose, the products' curvature).
    ct = cts[0]
    if isinstance(ct, ad.Zero):
        return [None] * len(args)
    arrays = [jnp.zeros(a.aval.shape, a.aval.dtype) if u else a for a, u in zip(args, undefined)]
    grads = _per_batch(lambda *a: list(_grads_of(spec, spec.values(a[:-1]), a[-1]).values()),
                       arrays + [ct], list(spec.ranks) + [len(spec.outputs[0][0])])
    by_name = dict(zip(_grad_spec_diff(spec, arrays), grads))
    return [by_name.get(n) if u else None for n, u in zip(spec.names, undefined)]


def _third_derivative(spec):
    raise refused(f"{spec.forward.op}: the third derivative of a product (reduce='prod', 'multiply') with "
                  "respect to its data is not supported",
                  "stop at the second derivative (jax.hessian), or differentiate the product's inputs "
                  "by another path")


def _grad_spec_diff(fwd, arrays):
    """The data arguments ``fwd``'s gradient gives, for operands ``arrays`` (or their avals)."""
    dtypes = {n: (a.aval.dtype if ad.is_undefined_primal(a) else jnp.result_type(a)) for n, a in zip(fwd.names, arrays)}
    return [n for n in fwd.diff if jnp.issubdtype(dtypes[n], jnp.inexact)]


_op_p = Primitive("gather_op")
_op_p.multiple_results = True
_op_p.def_impl(lambda *arrays, spec: _compiled(spec)(*arrays))
_op_p.def_abstract_eval(_abstract)
mlir.register_lowering(_op_p, mlir.lower_fun(_run, multiple_results=True))
batching.primitive_batchers[_op_p] = _batch
ad.primitive_jvps[_op_p] = _jvp
ad.primitive_transposes[_op_p] = _transpose

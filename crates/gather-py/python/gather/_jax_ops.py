"""JAX's transformations through gather's ops: ``jax.jit``, ``jax.grad``, ``jax.vmap``.

A traced JAX array (inside ``jax.jit``, ``jax.grad`` or ``jax.vmap``) has no DLPack and no
values, so it cannot reach the library when the op is called. With one among its arguments an op
becomes an XLA custom call (``jax.ffi.ffi_call``) that the compiled program makes when it runs:
the extension's FFI handler runs the library on XLA's own buffers, in host memory on the CPU and
in device memory, in XLA's stream order, on an NVIDIA GPU. The output's shape comes from
``gather._shapes``; the call sits inside a ``jax.custom_vjp`` whose backward is the op's gradient
(:mod:`gather.grad`), called the same way. Under ``jax.vmap`` the handler gets the batch axes
in front of the buffers and runs the op once per batch element, so every op keeps its
semantics (the callbacks run sequentially).

A ``ScatterPlan``'s calls go to the handler too, which finds the plan by a key. What the
handler cannot take (``dtype="bfloat16"`` bit patterns, a traced scalar argument, a plan's
``"sum"`` without ``include_self``, another platform) runs as a ``jax.pure_callback`` instead,
on the host.
An output whose length depends on values (``masked_select``, ``repeat_interleave`` without
``output_size``) has no static shape and is refused when tracing, as ``jnp.repeat`` refuses one
without ``total_repeat_length``. An error of the library (a bad index) surfaces when the
computation runs, as JAX's runtime error with the library's message.

Imported only once a traced JAX array reaches an op, so that ``import gather`` never imports jax.
"""

import functools
import inspect
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from . import _calls, _native, _shapes
from ._errors import refused
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
    dtype = jnp.result_type(values["input"])
    shapes = getattr(_shapes, op)(_Static, **values)
    kinds = _shapes.kinds(op)
    outputs = [jax.ShapeDtypeStruct(s, dtype if k == "input" else _index_dtype())
               for s, k in zip(shapes, kinds)]
    order = ["input"] + [n for n in ("src", "source") if _is_array(values.get(n))]  # as gather.grad returns them
    backward = getattr(_grad, op, None)
    names, diff = _operands(values, order, backward)
    request = _describe(op, values) if _ffi_ready() else None
    if request is None:
        runners = _callbacks(native, backward, values, names, outputs, order, diff)
    else:
        runners = _ffi(op, request, names, outputs, kinds, diff)
    return apply(runners, values, names, diff, len(outputs) == 1)


def call_plan(plan, forward, values):
    """A ScatterPlan's call on traced arrays: its output has ``dst``'s shape and dtype. The FFI
    handler finds the plan by its key; the gradient is index_add's or index_reduce's with the
    plan's 1-d index (the same as scatter_add's and scatter_reduce's with it expanded)."""
    dst = values["dst"]
    outputs = [jax.ShapeDtypeStruct(dst.shape, jnp.result_type(dst))]
    order = ["dst", "src"]
    names, diff = _operands(values, order, plan._grad)
    reduce, include_self = values.get("reduce"), values.get("include_self", True)
    if values.get("dtype") is not None or not _ffi_ready() or (reduce == "sum" and not include_self):
        # index_add has no include_self: that gradient comes from scatter_reduce's, by callback.
        runners = _callbacks(forward, plan._grad, values, names, outputs, order, diff)
        return apply(runners, values, names, diff, True)
    attrs = {"_plan": np.int64(plan._key)}
    if reduce is not None:
        attrs.update(reduce=reduce, include_self=np.bool_(include_self))
    op = "scatter_add" if reduce is None else "scatter_reduce"
    index = jnp.asarray(plan._index)
    grad_op = "index_add" if reduce in (None, "sum") else "index_reduce"
    grad_attrs = {"dim": np.int64(0)} | ({} if grad_op == "index_add" else
                                         {"reduce": reduce, "include_self": np.bool_(include_self)})
    grad_names = {"dst": "grad_input", "src": "grad_source"}

    def forward_(dst, src):
        return jax.ffi.ffi_call(_TARGET, outputs, vmap_method="expand_dims")(
            dst, src, _op=op, _mode="plan", _inputs="dst,src", _outputs="output",
            **_ranks((dst, src), outputs), **attrs)

    def backward_(grad_output, dst, src):
        wanted = [jax.ShapeDtypeStruct(values[n].shape, values[n].dtype) for n in diff]
        return jax.ffi.ffi_call(_TARGET, wanted, vmap_method="expand_dims")(
            grad_output, dst, index, src, _op=grad_op, _mode="grad",
            _inputs="grad_output,input,index,source", _outputs=",".join(grad_names[n] for n in diff),
            **_ranks((grad_output, dst, index, src), wanted), **grad_attrs)

    return apply((forward_, backward_), values, names, diff, True)


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


def _ranks(operands, results):
    """The ranks of an unbatched call's operands and results, as attributes: under ``jax.vmap``
    the handler finds the batch axes beyond them and runs the op once per batch element."""
    return {"_ranks": ",".join(str(np.ndim(a)) for a in operands),
            "_out_ranks": ",".join(str(len(r.shape)) for r in results)}


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


def _ffi(op, request, names, outputs, kinds, diff):
    """The forward and backward of ``op`` as calls of the FFI handler."""
    lib_of, attrs = request
    libs = [lib_of[n] for n in names]
    pairs = _index_dtype() == np.int32
    # An index output under JAX's int32 is int32 pairs holding the library's int64 values.
    declared = [jax.ShapeDtypeStruct(s.shape + (2,), np.int32) if k == "long" and pairs
                else jax.ShapeDtypeStruct(s.shape, np.int64) if k == "long" else s
                for s, k in zip(outputs, kinds)]
    out_names = _calls.output_names(len(outputs))
    in_place = op in _calls.IN_PLACE
    aliases = {libs.index("input"): 0} if in_place else None

    def forward(*arrays):
        # vmap: the handler loops over the leading batch axes; an in-place call's result aliases
        # input, so every operand gets them (broadcast_all), else only the batched ones.
        got = jax.ffi.ffi_call(_TARGET, declared, vmap_method="broadcast_all" if in_place else "expand_dims",
                               input_output_aliases=aliases)(
            *arrays, _op=op, _mode="inplace" if in_place else "call", _inputs=",".join(libs),
            _outputs=",".join(out_names), **_ranks(arrays, declared), **attrs)
        got = [g[..., 0] if d.shape != s.shape else g for g, d, s in zip(got, declared, outputs)]
        return tuple(g.astype(s.dtype) if g.dtype != s.dtype else g for g, s in zip(got, outputs))

    def backward(grad_output, *arrays):
        wanted = [jax.ShapeDtypeStruct(arrays[names.index(n)].shape, arrays[names.index(n)].dtype) for n in diff]
        return jax.ffi.ffi_call(_TARGET, wanted, vmap_method="expand_dims")(
            grad_output, *arrays, _op=op, _mode="grad", _inputs=",".join(["grad_output"] + libs),
            _outputs=",".join("grad_" + lib_of[n] for n in diff), **_ranks((grad_output,) + arrays, wanted),
            **attrs)

    return forward, backward


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

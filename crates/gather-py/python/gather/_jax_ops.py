"""JAX's transformations through gather's ops: ``jax.jit``, ``jax.grad``, ``jax.vmap``.

A traced JAX array (inside ``jax.jit``, ``jax.grad`` or ``jax.vmap``) has no DLPack and no
values, so it cannot reach the library. With one among its arguments an op becomes a
``jax.pure_callback`` that calls the library on the concrete arrays when the computation runs,
with the output's shape from ``gather._shapes``, inside a ``jax.custom_vjp`` whose backward is
the op's gradient in :mod:`gather.grad`, called back the same way. ``jax.vmap`` runs the op once
per batch element (``vmap_method="sequential"``), so every op keeps its semantics.

The callback runs on the host: arrays on a GPU are copied to the host and back. An output whose
length depends on values (``masked_select``, ``repeat_interleave`` without ``output_size``) has
no static shape and is refused when tracing, as ``jnp.repeat`` refuses one without
``total_repeat_length``. An error of the library (a bad index) surfaces when the computation
runs, as JAX's runtime error with the library's message.

Imported only once a traced JAX array reaches an op, so that ``import gather`` never imports jax.
"""

import inspect

import jax
import jax.numpy as jnp
import numpy as np

from . import _native, _shapes
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
    outputs = [jax.ShapeDtypeStruct(s, dtype if k == "input" else _index_dtype())
               for s, k in zip(shapes, _shapes.kinds(op))]
    order = ["input"] + [n for n in ("src", "source") if _is_array(values.get(n))]  # as gather.grad returns them
    return apply(native, getattr(_grad, op, None), values, outputs, order)


def call_plan(forward, backward, values):
    """A ScatterPlan's call on traced arrays: its output has ``dst``'s shape and dtype."""
    dst = values["dst"]
    outputs = [jax.ShapeDtypeStruct(dst.shape, jnp.result_type(dst))]
    return apply(forward, backward, values, outputs, ["dst", "src"])


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


def apply(forward, backward, values, outputs, order):
    """``forward(**values)`` as a callback with ``outputs`` (shape-dtype structs), differentiable
    through ``backward(grad_output, **values)``, which returns the gradients of ``order``'s
    arguments. Arrays among ``values`` are the callback's operands; the rest stay Python values."""
    names = [n for n, v in values.items() if _is_array(v)]
    static = {n: v for n, v in values.items() if n not in names}
    diff = [n for n in order if backward is not None and jnp.issubdtype(values[n].dtype, jnp.inexact)]
    single = len(outputs) == 1

    def run(*arrays):
        return _host(forward(**static, **dict(zip(names, _numpy(arrays)))), outputs)

    @jax.custom_vjp
    def op(*arrays):
        out = jax.pure_callback(run, tuple(outputs), *arrays, vmap_method="sequential")
        return out[0] if single else out

    def op_fwd(*arrays):
        return op(*arrays), arrays

    def op_bwd(arrays, grad_output):
        if not single:  # sort, topk: no gradient reaches the indices
            grad_output = grad_output[0]
        got = {}
        if diff:
            wanted = [jax.ShapeDtypeStruct(arrays[names.index(n)].shape, arrays[names.index(n)].dtype) for n in diff]

            def run_grad(g, *arrays):
                g, *arrays = _numpy((g,) + arrays)
                grads = backward(g, **static, **dict(zip(names, arrays)))
                by_name = dict(zip(order, grads if isinstance(grads, tuple) else (grads,)))
                return _host(tuple(by_name[n] for n in diff), wanted)

            got = dict(zip(diff, jax.pure_callback(run_grad, tuple(wanted), grad_output, *arrays,
                                                   vmap_method="sequential")))
        return tuple(got[n] if n in got else _zero(a) for n, a in zip(names, arrays))

    op.defvjp(op_fwd, op_bwd)
    return op(*(values[n] for n in names))

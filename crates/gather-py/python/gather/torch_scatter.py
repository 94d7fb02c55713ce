"""A drop-in for pytorch_scatter 2.1: the same functions, signatures and defaults.

PyG-style code switches by changing one import::

    from gather import torch_scatter            # instead of: import torch_scatter
    out = torch_scatter.scatter(src, index, dim=0, dim_size=n, reduce="sum")

Every function takes NumPy arrays, PyTorch tensors, CuPy arrays or JAX arrays and returns the
type of ``src``; the kernels are the library's (deterministic: every group is reduced in index
order, on any number of threads, and on the GPU). GPU arrays stay on their GPU: every step runs
there, with the framework's own array operations between the library's kernels, and nothing is
copied to the host but the largest index value where ``dim_size`` is not given (pytorch_scatter
reads it too). A 1-D ``index`` is broadcast against ``src`` along ``dim``, as pytorch_scatter
does.

Differences from pytorch_scatter, and why:

- ``max``/``min`` of a group whose extreme is ``-inf`` (``inf``) or the dtype's lowest (highest)
  value give that value here, as ``torch.scatter_reduce(..., include_self=False)`` does;
  pytorch_scatter's kernel starts from the lowest finite value and turns such groups into 0.
  Every other group, and every empty group (0), agree.
- ``scatter_log_softmax`` has no ``eps`` in its result: the library computes ``x - logsumexp``
  exactly (``eps`` is accepted and ignored). pytorch_scatter adds ``eps`` to the sum, which moves
  every result by about ``eps / sum``.
- ``scatter_logsumexp`` follows pytorch_scatter in adding ``eps`` only for empty groups, which
  hold ``log(eps)`` in both; non-empty groups are exact here (pytorch_scatter's differ by about
  ``eps / sum``).
- Gradients: a torch ``src`` that requires grad gets pytorch_scatter's gradients (max/min to the
  arg position; mul divides by ``src``), computed by the library, except through ``out=``, which
  is then an error (write ``out + scatter(...)`` instead). With ``create_graph=True`` they are
  made of differentiable ops, so they have gradients too (a gradient penalty through a GNN).
- ``indptr`` of ``segment_csr``/``gather_csr`` and ``index`` of ``segment_coo``/``gather_coo`` are
  1-D (pytorch_scatter also takes batched ones); a batched one is an error, not a wrong result.
- Errors are the library's (:class:`gather.GatherError` subclasses with the numbers and a hint),
  where pytorch_scatter raises ``RuntimeError`` or reads out of bounds.
- Dask arrays: every function builds a graph of :mod:`gather.dask`'s reduction trees and reads
  and returns Dask arrays (the args of min and max are a second tree of the first position that
  holds the group's extreme; the softmaxes, ``scatter_logsumexp`` and ``scatter_std`` read each
  group's maximum or mean back and reduce again); ``out=`` is refused (Dask arrays are
  immutable).

The arg of ``scatter_max``/``scatter_min``/``segment_*`` is pytorch_scatter's: the position along
``dim`` of the winning element, or ``src.shape[dim]`` for a group no element reached (the
library's own ``scatter_reduce_arg`` says -1 there; it is mapped).
"""

import inspect
import math
import sys

import numpy as np

from . import _dask_ops, _native
from ._errors import GatherError, respell
from ._out import not_inference, written

__all__ = [
    "scatter",
    "scatter_sum",
    "scatter_add",
    "scatter_mul",
    "scatter_mean",
    "scatter_min",
    "scatter_max",
    "segment_csr",
    "segment_coo",
    "gather_csr",
    "gather_coo",
    "scatter_softmax",
    "scatter_log_softmax",
    "scatter_logsumexp",
    "scatter_std",
]


def _ndim(x):
    return len(x.shape)


def _dim(dim, src):
    return dim + _ndim(src) if dim < 0 else dim


_GPU_KINDS = (2, 3, 13)  # DLPack device types: CUDA, CUDA host, CUDA managed


def _on_device(x):
    """Whether ``x`` is a GPU array (a torch CUDA tensor, CuPy, JAX on a GPU): its steps then use
    its framework's array operations, not NumPy's."""
    if isinstance(x, np.ndarray):
        return False
    is_cuda = getattr(x, "is_cuda", None)  # torch's answer, without its __dlpack_device__ (5 µs)
    if isinstance(is_cuda, bool):
        return is_cuda
    f = getattr(x, "__dlpack_device__", None)
    if f is None:
        return False
    try:
        return f()[0] in _GPU_KINDS
    except Exception:
        return False


def _xp(x):
    """The array namespace of a GPU array: torch, cupy or jax.numpy."""
    root = type(x).__module__.split(".")[0]
    if root == "torch":
        import torch

        return torch
    if root == "cupy":
        import cupy

        return cupy
    import jax.numpy as jnp

    return jnp


def _device_full(like, shape, fill, dtype=None):
    """A new array on ``like``'s GPU, of ``dtype`` (default ``like``'s), filled with ``fill``."""
    xp = _xp(like)
    dtype = like.dtype if dtype is None else dtype
    if xp.__name__ == "torch":
        return xp.full(tuple(shape), fill, dtype=dtype, device=like.device)
    return xp.full(tuple(shape), fill, dtype=dtype)


def _index(index, src):
    """The index as the kernels take it: the GPU array itself beside a GPU ``src``, else NumPy."""
    return index if _on_device(src) else _index_np(index)


def _numel(x):
    return math.prod(x.shape)


def _index_np(index):
    """The index as a NumPy array (borrowed through DLPack for tensors)."""
    if isinstance(index, np.ndarray):
        return index
    if hasattr(index, "__dlpack__"):
        return _np(index)
    return np.asarray(index)


def _broadcast(index, src, dim):
    """pytorch_scatter's broadcast of ``index`` against ``src`` (a view, never a copy)."""
    index = _index(index, src)
    dim = _dim(dim, src)
    xp = _xp(src) if _on_device(src) else np
    if index.ndim == 1:
        index = xp.reshape(index, (1,) * dim + (-1,))
    index = xp.reshape(index, tuple(index.shape) + (1,) * (_ndim(src) - index.ndim))
    return xp.broadcast_to(index, tuple(src.shape))


def _call(op, data, plain, **args):
    return _native._call(op, data, plain, args)


def _groups(src, index, dim, dim_size, reduce, fill, **extra):
    dim = _dim(dim, src)
    return _call(
        "scatter_groups", {"src": src}, {"index": _index(index, src)},
        dim=dim, reduce=reduce, dim_size=dim_size, fill=fill, **extra,
    )[0]


def _arg_sentinel(arg, n):
    """pytorch_scatter's arg: ``n`` (the size of ``dim``) where no element of ``src`` won."""
    if isinstance(arg, np.ndarray):
        arg[arg < 0] = n
        return arg
    if hasattr(arg, "masked_fill_"):  # torch
        return arg.masked_fill_(arg < 0, n)
    if type(arg).__module__.split(".")[0] == "cupy":
        arg[arg < 0] = n
        return arg
    import jax.numpy as jnp

    return jnp.where(arg < 0, n, arg)


def _np(x):
    """``x`` as a NumPy array sharing its memory: a torch tensor's own ``numpy()`` is the same
    view as DLPack's at a tenth of its cost, where it has one (not bfloat16: DLPack's error)."""
    if isinstance(x, np.ndarray):
        return x
    if type(x).__module__.startswith("torch"):
        try:
            return x.numpy()
        except (TypeError, RuntimeError):
            pass
    return np.from_dlpack(x)


def _np_dtype(src):
    """``src``'s dtype as NumPy's, or None for a dtype NumPy lacks (bfloat16)."""
    try:
        return _np(src).dtype
    except (BufferError, TypeError, RuntimeError, ValueError):
        return None


def _fresh(src, shape, fill):
    """A new array of ``src``'s dtype filled with ``fill``: a NumPy one where NumPy has the dtype
    (zeros then come from fresh zero pages, not a memset), else one of ``src``'s framework (on its
    GPU for a GPU ``src``)."""
    if _on_device(src):
        return _device_full(src, shape, fill)
    dt = _np_dtype(src)
    if dt is not None:
        return np.zeros(shape, dt) if fill == 0 else np.full(shape, fill, dt)
    if hasattr(src, "new_full"):  # torch
        return src.new_full(shape, fill)
    import jax.numpy as jnp

    return jnp.full(shape, fill, src.dtype)


def _like(src, out):
    """A NumPy result ``out`` as ``src``'s type (no copy)."""
    if isinstance(out, np.ndarray) and not isinstance(src, np.ndarray):
        root = type(src).__module__.split(".")[0]
        if root == "torch":
            import torch

            return torch.from_numpy(out)
        if root in ("jax", "jaxlib"):
            import jax.numpy as jnp

            return jnp.from_dlpack(out)
    return out


def _zeros(src, shape):
    return _fresh(src, shape, 0)


def _size(src, index, dim, dim_size):
    dim = _dim(dim, src)
    shape = list(src.shape)
    if dim_size is not None:
        shape[dim] = dim_size
    else:
        idx = _index(index, src)
        shape[dim] = int(idx.max()) + 1 if _numel(idx) else 0
    return tuple(shape)


def _inplace(name, out, *args, **kwargs):
    """``gather.<name>_`` into ``out`` (NumPy, torch); JAX arrays are immutable, so a JAX ``out``
    gets the out-of-place result instead."""
    not_inference(out, f"{name}: `out`")
    try:
        return getattr(_native, name + "_")(out, *args, **kwargs)
    except Exception:
        if type(out).__module__.split(".")[0] in ("jax", "jaxlib"):
            return getattr(_native, name)(out, *args, **kwargs)
        raise


def scatter_sum(src, index, dim=-1, out=None, dim_size=None):
    """Sums ``src`` into the groups ``index`` names along ``dim``: ``out[..., i, ...] += src[..., j, ...]``
    for ``index[..., j, ...] == i``. Empty groups are 0."""
    d = _dim(dim, src)
    if out is None:
        # Out of place: the library copies the fresh zeros and scatters in one pass.
        zeros = _zeros(src, _size(src, index, d, dim_size))
        return _like(src, _native.scatter_add(zeros, d, _broadcast(index, src, d), src))
    index = _broadcast(index, src, d)
    return _inplace("scatter_add", out, d, index, src)


scatter_add = scatter_sum


def scatter_mul(src, index, dim=-1, out=None, dim_size=None):
    """The product of each group of ``src``; empty groups are 1 (and ``out``'s values are
    multiplied in when it is given)."""
    d = _dim(dim, src)
    if out is None:
        ones = _fresh(src, _size(src, index, d, dim_size), 1)
        return _like(src, _native.scatter_reduce(ones, d, _broadcast(index, src, d), src, "prod"))
    index = _broadcast(index, src, d)
    return _inplace("scatter_reduce", out, d, index, src, "prod")


def scatter_mean(src, index, dim=-1, out=None, dim_size=None):
    """The mean of each group of ``src`` (integers: rounded toward negative infinity); empty groups
    are 0. With ``out``, its values are added to the sums and divided by the counts, as in
    pytorch_scatter."""
    d = _dim(dim, src)
    out = scatter_sum(src, index, d, out, dim_size)
    if _on_device(src):
        return _divide(out, _at_least_one(_counts(src, index, d, out.shape[d])))
    count = np.maximum(_counts(src, index, d, out.shape[d]), 1)
    o = _np(out)
    if np.issubdtype(o.dtype, np.floating):
        o /= count
    else:
        o //= count
    return out


def _at_least_one(count):
    if isinstance(count, np.ndarray):
        return np.maximum(count, 1)
    if hasattr(count, "clamp"):  # torch
        return count.clamp(min=1)
    return _xp(count).maximum(count, 1)


def _is_float(x):
    if hasattr(x, "is_floating_point"):  # torch
        return x.is_floating_point()
    return np.issubdtype(np.dtype(x.dtype), np.floating)


def _divide(out, count):
    """``out`` divided by ``count`` (integers: rounded toward negative infinity), in place where
    the framework writes in place (torch, CuPy), as the NumPy path does."""
    float_ = _is_float(out)
    if hasattr(out, "div_"):  # torch
        return out.div_(count.to(out.dtype)) if float_ else out.floor_divide_(count)
    if type(out).__module__.split(".")[0] == "cupy":
        if float_:
            out /= count
        else:
            out //= count
        return out
    return (out / count if float_ else out // count).astype(out.dtype)


def _counts(src, index, dim, dim_size):
    """How many elements of ``src`` each group has, shaped to broadcast against the output."""
    if _on_device(src):
        xp = _xp(src)
        shape = _size(src, index, dim, dim_size)
        ones = xp.broadcast_to(_device_full(src, (1,), 1, xp.int64), tuple(src.shape))
        zeros = _device_full(src, shape, 0, xp.int64)
        return _native.scatter_add(zeros, dim, _broadcast(index, src, dim), ones)
    idx = _index_np(index)
    if idx.ndim == 1:
        # One group per position along dim, the same for every lane: a bincount.
        c = np.bincount(idx, minlength=dim_size)[:dim_size]
        return c.reshape((1,) * dim + (-1,) + (1,) * (_ndim(src) - dim - 1))
    ones = np.broadcast_to(np.ones(1, np.int64), tuple(src.shape))
    return _native.scatter_add(np.zeros(_size(src, idx, dim, dim_size), np.int64), dim, _broadcast(idx, src, dim), ones)


def _scatter_arg(src, index, dim, out, dim_size, reduce):
    """scatter_max/min: the extreme of each group and its position. With ``out``, its values take
    part (pytorch_scatter's rule); without, empty groups are 0 and the others reduce ``src`` alone
    (``torch.scatter_reduce(zeros, ..., include_self=False)``)."""
    d = _dim(dim, src)
    given = out is not None
    if not given:
        out = _zeros(src, _size(src, index, d, dim_size))
    values, arg = _call(
        "scatter_reduce_arg", {"input": out, "src": src}, {"index": _broadcast(index, src, d)},
        dim=d, reduce=reduce, include_self=given,
    )
    arg = _arg_sentinel(arg, src.shape[d])
    if given and _on_device(out):
        return _write(out, values), _like(src, arg)
    if given:
        o = _np(not_inference(out, "`out`"))
        if o.flags.writeable:
            o[...] = _np(values)
            return written(out), _like(src, arg)
    return _like(src, values), _like(src, arg)


def _scatter_values(src, index, dim, out, dim_size, reduce):
    """The values of :func:`_scatter_arg` alone: the library's scatter_reduce into zeros, in place
    (fresh zero pages, no copy)."""
    d = _dim(dim, src)
    if out is not None:
        return _inplace("scatter_reduce", out, d, _broadcast(index, src, d), src, reduce)
    zeros = _zeros(src, _size(src, index, d, dim_size))
    index = _broadcast(index, src, d)
    return _like(src, _native.scatter_reduce_(zeros, d, index, src, reduce, include_self=False))


def scatter_min(src, index, dim=-1, out=None, dim_size=None):
    """``(values, arg)``: the minimum of each group of ``src`` and the position along ``dim`` of the
    element that gave it (``src.shape[dim]`` for an empty group, whose value is 0)."""
    return _scatter_arg(src, index, dim, out, dim_size, "amin")


def scatter_max(src, index, dim=-1, out=None, dim_size=None):
    """``(values, arg)``: the maximum of each group of ``src`` and the position along ``dim`` of the
    element that gave it (``src.shape[dim]`` for an empty group, whose value is 0)."""
    return _scatter_arg(src, index, dim, out, dim_size, "amax")


def scatter(src, index, dim=-1, out=None, dim_size=None, reduce="sum"):
    """pytorch_scatter's ``scatter``: ``reduce`` is ``"sum"``/``"add"``, ``"mul"``, ``"mean"``,
    ``"min"`` or ``"max"`` (min and max return the values only).

    >>> from gather.torch_scatter import scatter
    >>> src = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> scatter(src, np.array([0, 2, 0]), dim=0, reduce="max")
    array([[5., 6.],
           [0., 0.],
           [3., 4.]])
    >>> scatter(src, np.array([0, 2, 0]), dim=0, dim_size=4, reduce="mean")
    array([[3., 4.],
           [0., 0.],
           [3., 4.],
           [0., 0.]])
    """
    if reduce in ("min", "max") and _grad_needed(src):
        fn = scatter_min if reduce == "min" else scatter_max
        return fn(src, index, dim, out, dim_size)[0]
    if reduce in ("sum", "add"):
        return scatter_sum(src, index, dim, out, dim_size)
    if reduce == "mul":
        return scatter_mul(src, index, dim, out, dim_size)
    if reduce == "mean":
        return scatter_mean(src, index, dim, out, dim_size)
    if reduce == "min":
        return _scatter_values(src, index, dim, out, dim_size, "amin")
    if reduce == "max":
        return _scatter_values(src, index, dim, out, dim_size, "amax")
    raise ValueError(f'scatter: reduce must be "sum", "add", "mul", "mean", "min" or "max", got {reduce!r}')


def _segment(src, kind, seg, reduce, dim, num_segments=None):
    seg = _index(seg, src)
    if seg.ndim != 1:
        raise ValueError(f"gather.torch_scatter: {kind} must be 1-D here, got shape {seg.shape} (see the module docs)")
    if reduce in ("sum", "add", "mean"):
        r = "sum" if reduce == "add" else reduce
        return _call("segment_reduce", {"src": src}, {kind: seg}, dim=dim, reduce=r, fill="zero",
                     num_segments=num_segments)[0]
    if reduce in ("min", "max"):
        values, arg = _call("segment_arg_reduce", {"src": src}, {kind: seg}, dim=dim,
                            reduce="amin" if reduce == "min" else "amax", fill="zero", num_segments=num_segments)
        return values, _arg_sentinel(arg, src.shape[dim])
    raise ValueError(f'segment: reduce must be "sum", "add", "mean", "min" or "max", got {reduce!r}')


def segment_csr(src, indptr, out=None, reduce="sum"):
    """Reduces ``src`` over the segments ``indptr[i]:indptr[i + 1]`` of its first axis (a CSR
    pointer array). min and max return ``(values, arg)``."""
    if _grad_needed(src):
        _no_out("segment_csr", out)
        ptr = _index(indptr, src)
        if ptr.ndim != 1:
            raise ValueError(f"gather.torch_scatter: offsets must be 1-D here, got shape {tuple(ptr.shape)} (see the module docs)")
        return _segment_grad(src, _ids(ptr[1:] - ptr[:-1], src), ptr.shape[0] - 1, reduce)
    result = _segment(src, "offsets", indptr, reduce, 0)
    return _into(out, result)


def _ids(counts, src):
    """``[0] * counts[0] + [1] * counts[1] + ...``: the group id of every element of ``src``."""
    if _on_device(src):
        # The repeats-only form has no data array to take the type from: it returns the library's
        # own array, which the framework takes through DLPack (no copy).
        ids = _native.repeat_interleave(counts)
        return ids if type(ids) is type(counts) else _xp(src).from_dlpack(ids)
    return np.repeat(np.arange(counts.size), counts)


def _segment_grad(src, ids, n, reduce):
    """A segment reduction that torch's autograd tracks: the scatter over the segments' ids."""
    kind = {"sum": "sum", "add": "sum", "mean": "mean", "min": "min", "max": "max"}.get(reduce)
    if kind is None:
        raise ValueError(f'segment: reduce must be "sum", "add", "mean", "min" or "max", got {reduce!r}')
    return _with_grad(kind, src, ids, 0, n)


def segment_coo(src, index, out=None, dim_size=None, reduce="sum"):
    """Reduces ``src`` over the runs of equal, sorted ``index`` values along its first axis; the
    output has ``dim_size`` (default ``index.max() + 1``) segments. min and max return
    ``(values, arg)``."""
    idx = _index(index, src)
    n = dim_size if dim_size is not None else (int(idx.max()) + 1 if _numel(idx) else 0)
    if out is not None:
        n = out.shape[0]
    if _grad_needed(src):
        _no_out("segment_coo", out)
        if idx.ndim != 1:
            raise ValueError(f"gather.torch_scatter: ids must be 1-D here, got shape {tuple(idx.shape)} (see the module docs)")
        return _segment_grad(src, idx, n, reduce)
    return _into(out, _segment(src, "ids", idx, reduce, 0, num_segments=n))


def _write(out, values):
    """``values`` written into the GPU array ``out`` (torch, CuPy); ``values`` itself for an
    immutable ``out`` (JAX)."""
    if hasattr(out, "copy_"):  # torch
        return out.copy_(values)
    if type(out).__module__.split(".")[0] == "cupy":
        out[...] = values
        return out
    return values


def _into(out, result):
    if out is None:
        return result
    values = result[0] if isinstance(result, tuple) else result
    if _on_device(out):
        out = _write(out, values)
    else:
        _np(not_inference(out, "`out`"))[...] = _np(values)
        written(out)
    return (out, result[1]) if isinstance(result, tuple) else out


def gather_csr(src, indptr, out=None):
    """Row ``i`` of ``src`` repeated ``indptr[i + 1] - indptr[i]`` times along the first axis (the
    inverse of ``segment_csr``)."""
    ptr = _index(indptr, src)
    counts = ptr[1:] - ptr[:-1]
    if _grad_needed(src):
        _no_out("gather_csr", out)
        return _with_grad("gather_coo", src, _ids(counts, src))
    result = _native.repeat_interleave(src, counts, 0)
    return _into(out, result)


def gather_coo(src, index, out=None):
    """``src[index]`` along the first axis (the inverse of ``segment_coo``)."""
    if _grad_needed(src):
        _no_out("gather_coo", out)
        return _with_grad("gather_coo", src, index)
    return _into(out, _native.index_select(src, 0, _index(index, src)))


def scatter_softmax(src, index, dim=-1, dim_size=None):
    """The softmax of each group of ``src`` (float ``src``), in ``src``'s shape."""
    if _grad_needed(src):
        return _with_grad("softmax", src, index, dim)
    return _call("scatter_softmax", {"src": src}, {"index": _index(index, src)}, dim=_dim(dim, src))[0]


def scatter_log_softmax(src, index, dim=-1, eps=1e-12, dim_size=None):
    """The log-softmax of each group of ``src`` (float ``src``), in ``src``'s shape. ``eps`` is
    accepted for pytorch_scatter's signature; the result is exact (see the module docs)."""
    if _grad_needed(src):
        return _with_grad("log_softmax", src, index, dim)
    return _call("scatter_log_softmax", {"src": src}, {"index": _index(index, src)}, dim=_dim(dim, src))[0]


def scatter_logsumexp(src, index, dim=-1, out=None, dim_size=None, eps=1e-12):
    """``log(sum(exp(x)))`` of each group of ``src``; empty groups hold ``log(eps)`` as in
    pytorch_scatter."""
    if out is not None:
        dim_size = out.shape[_dim(dim, src)]
    result = _groups(src, index, dim, dim_size, "logsumexp", math.log(eps))
    return _into(out, result)


def scatter_std(src, index, dim=-1, out=None, dim_size=None, unbiased=True):
    """The standard deviation of each group of ``src`` (``unbiased``: divided by count - 1, but
    never by less than 1, so one-element and empty groups are 0, as in pytorch_scatter)."""
    if out is not None:
        dim_size = out.shape[_dim(dim, src)]
    result = _groups(src, index, dim, dim_size, "std", "zero", correction=1 if unbiased else 0)
    if unbiased:
        # pytorch_scatter divides by max(count - 1, 1): a one-element group has std 0, not NaN.
        count = _counts(src, index, dim, result.shape[_dim(dim, src)])
        if _on_device(result):
            xp = _xp(result)
            alone = xp.broadcast_to(count <= 1, tuple(result.shape))
            result = xp.where(alone, xp.zeros_like(result), result)
        else:
            r = _np(result)
            r[np.broadcast_to(count <= 1, r.shape)] = 0
    return _into(out, result)


# ---------------------------------------------------------------------------------------------
# Autograd: torch tensors that require grad go through a torch.autograd.Function whose forward
# is the function above (on detached tensors: DLPack does not export tensors that require grad)
# and whose backward is pytorch_scatter's gradient, computed with the library's ops (with
# create_graph, with differentiable ones on the saved tensors, so that it differentiates again).

_AUTOGRAD = {}


def _grad_needed(*xs):
    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return False
    return any(isinstance(x, torch.Tensor) and x.requires_grad for x in xs)


def _no_out(name, out):
    if out is not None:
        raise TypeError(
            f"gather.torch_scatter.{name}: out= with tensors that require grad is not supported; "
            "leave out= out and add the result to your tensor"
        )


def _function():
    """The autograd Function, made on first use (torch is imported only then)."""
    if "fn" in _AUTOGRAD:
        return _AUTOGRAD["fn"]
    import torch

    class ScatterFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, src, kind, index, dim, dim_size, extra):
            s = src.detach()
            d = _dim(dim, s)
            ctx.kind, ctx.dim = kind, d
            ctx.ib = _broadcast(index, s, d) if kind not in ("gather_coo",) else None
            ctx.index = _index(index, s)
            arg = None
            if kind == "sum":
                out = scatter_sum(s, index, d, None, dim_size)
            elif kind == "mean":
                out = scatter_mean(s, index, d, None, dim_size)
                ctx.count = _at_least_one(_counts(s, index, d, out.shape[d]))
            elif kind == "mul":
                out = scatter_mul(s, index, d, None, dim_size)
            elif kind in ("max", "min"):
                out, arg = _scatter_arg(s, index, d, None, dim_size, "amax" if kind == "max" else "amin")
            elif kind == "softmax":
                out = scatter_softmax(s, index, d)
            elif kind == "log_softmax":
                out = scatter_log_softmax(s, index, d)
            elif kind == "logsumexp":
                out = scatter_logsumexp(s, index, d, None, dim_size, extra)
            elif kind == "std":
                out = scatter_std(s, index, d, None, dim_size, extra)
                ctx.mean = scatter_mean(s, index, d, None, out.shape[d])
                count = _counts(s, index, d, out.shape[d])
                ctx.n = _at_least_one(count - (1 if extra else 0))
            elif kind == "gather_coo":
                out = gather_coo(s, index)
            else:
                raise AssertionError(kind)
            ctx.src_shape = tuple(s.shape)
            ctx.save_for_backward(src, out, *(() if arg is None else (arg,)))  # src: differentiable again
            if arg is not None:
                ctx.mark_non_differentiable(arg)
                return out, arg
            return out

        @staticmethod
        def backward(ctx, g, *_):
            kind, d, ib = ctx.kind, ctx.dim, ctx.ib
            s, out = ctx.saved_tensors[:2]
            if torch.is_grad_enabled():
                # create_graph: the gradient is made of differentiable ops (gather's and torch's),
                # on the saved tensors themselves, so that it differentiates again.
                import gather

                def spread(t):  # a per-group tensor read back at every source position
                    return gather.gather(t, d, ib)
            else:
                # Saved outputs still require grad, and DLPack does not export those.
                s, out, g = s.detach(), out.detach(), g.detach()

                def spread(t):
                    return _native.gather(t, d, ib)

            if kind == "sum":
                gs = spread(g)
            elif kind == "mean":
                gs = spread(g / _as_torch(ctx.count, g))
            elif kind == "mul":
                gs = spread(g * out) / s
            elif kind in ("max", "min"):
                arg = ctx.saved_tensors[2]
                shape = list(ctx.src_shape)
                shape[d] += 1
                gs = g.new_zeros(shape).scatter_(d, arg, g).narrow(d, 0, ctx.src_shape[d])
            elif kind == "softmax":
                gs = out * (g - spread(scatter_sum(g * out, ctx.index, d)))
            elif kind == "log_softmax":
                gs = g - torch.exp(out) * spread(scatter_sum(g, ctx.index, d))
            elif kind == "logsumexp":
                gs = spread(g) * torch.exp(s - spread(out))
            elif kind == "std":
                # The mean depends on src: with create_graph, recomputed where autograd sees it.
                mean = scatter_mean(s, ctx.index, d, None, out.shape[d]) if torch.is_grad_enabled() else ctx.mean
                n = _as_torch(ctx.n, g)
                # A safe divisor, not just a where: with create_graph the unpicked branch's
                # derivative is 0 / 0 in empty groups.
                divisor = torch.where(out > 0, n * out, torch.ones_like(out))
                per = torch.where(out > 0, g / divisor, torch.zeros_like(out))
                gs = spread(per) * (s - spread(mean))
            elif kind == "gather_coo":
                gs = scatter_sum(g, ctx.index, 0, None, ctx.src_shape[0])
            return gs, None, None, None, None, None

    _AUTOGRAD["fn"] = ScatterFunction
    return ScatterFunction


def _as_torch(a, like):
    """A NumPy array (the CPU path) or a torch tensor (the GPU path) as ``like``'s dtype."""
    import torch

    t = a if isinstance(a, torch.Tensor) else torch.from_numpy(a)
    return t.to(like.dtype)


def _with_grad(kind, src, index, dim=0, dim_size=None, extra=None):
    return _function().apply(src, kind, index, dim, dim_size, extra)


def _differentiable(kind, name, pos_out=None):
    """Wraps a public function so that torch tensors that require grad get a gradient."""

    def wrap(fn):
        def inner(src, index, dim=-1, out=None, dim_size=None, *rest, **kw):
            if not _grad_needed(src):
                return fn(src, index, dim, out, dim_size, *rest, **kw)
            _no_out(name, out)
            extra = (rest[0] if rest else kw.get(pos_out)) if pos_out else None
            if extra is None and pos_out == "unbiased":
                extra = True
            if extra is None and pos_out == "eps":
                extra = 1e-12
            return _with_grad(kind, src, index, dim, dim_size, extra)

        inner.__name__, inner.__qualname__, inner.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
        inner.__wrapped__ = fn
        return inner

    return wrap


scatter_sum = _differentiable("sum", "scatter_sum")(scatter_sum)
scatter_add = scatter_sum
scatter_mul = _differentiable("mul", "scatter_mul")(scatter_mul)
scatter_mean = _differentiable("mean", "scatter_mean")(scatter_mean)
scatter_max = _differentiable("max", "scatter_max")(scatter_max)
scatter_min = _differentiable("min", "scatter_min")(scatter_min)
scatter_logsumexp = _differentiable("logsumexp", "scatter_logsumexp", "eps")(scatter_logsumexp)
scatter_std = _differentiable("std", "scatter_std", "unbiased")(scatter_std)


def _resolving_neg_out(fn):
    """Wraps a public function with ``out=`` for a torch ``out`` whose negative bit is set (a view
    such as ``z.conj().imag``: its memory holds the values negated). NumPy and DLPack views of
    it drop the bit, so the function runs on a resolved copy, written back with torch's
    ``copy_``, which honours it."""
    pos = list(inspect.signature(fn).parameters).index("out")

    def inner(*args, **kwargs):
        out = args[pos] if len(args) > pos else kwargs.get("out")
        if out is None or not type(out).__module__.startswith("torch") or not out.is_neg():
            return fn(*args, **kwargs)
        resolved = out.resolve_neg()  # a copy holding the values
        if len(args) > pos:
            args = args[:pos] + (resolved,) + args[pos + 1:]
        else:
            kwargs["out"] = resolved
        result = fn(*args, **kwargs)
        out.copy_(result[0] if isinstance(result, tuple) else result)
        return (out,) + tuple(result[1:]) if isinstance(result, tuple) else out

    inner.__name__, inner.__qualname__, inner.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    inner.__wrapped__ = fn
    return inner


def _speaking(fn):
    """Wraps a public function so that the library's errors write their fix in the framework
    of ``src``: its tensors reach the library as NumPy views, whose errors speak NumPy."""

    def inner(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except GatherError as e:
            src = args[0] if args else kwargs.get("src")
            root = type(src).__module__.split(".")[0]
            if root in ("torch", "cupy", "jax", "jaxlib"):
                respell(e, "jax" if root == "jaxlib" else root)
            raise

    inner.__name__, inner.__qualname__, inner.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    inner.__wrapped__ = fn
    return inner


def _dask_aware(name, fn):
    """Wraps a public function so that Dask arrays get a Dask graph (gather.dask's trees) or a
    refusal with the fix, never a silent compute."""

    def inner(*args, **kwargs):
        if _dask_ops.given(args, kwargs):
            return _dask_ops.torch_scatter(name, fn, args, kwargs)
        return fn(*args, **kwargs)

    inner.__name__, inner.__qualname__, inner.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    inner.__wrapped__ = fn
    return inner


for _name in __all__:
    _f = globals()[_name]
    if "out" in inspect.signature(_f).parameters:
        _f = _resolving_neg_out(_f)
    globals()[_name] = _dask_aware(_name, _speaking(_f))
del _name, _f

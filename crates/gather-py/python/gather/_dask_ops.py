"""``gather.<op>`` and ``gather.grad.<op>`` called with a Dask array: the call builds a Dask graph
(Dask in, Dask out) from :mod:`gather.dask`'s routed reads and reduction trees, so an array
larger than memory is never pulled into one process.

Every op of the family has a graph, and every gradient:

- the reads ``gather``, ``take``, ``index_select``, ``take_along_dim`` and ``select_batched`` route
  the index by the table's blocks;
- the writes ``scatter_add``, ``scatter_reduce``, ``index_add``, ``index_reduce``, ``scatter``,
  ``index_copy``, ``index_fill`` and ``put`` are reduction trees (the plain writes keep the last
  write in index order);
- ``sort`` and ``argsort`` run per block with the dim whole, and ``topk`` along a dim of several
  blocks is a tree of each block's ``k`` best;
- the masked ops read by the rank of each true position (a cumulative sum of the mask), and
  ``repeat_interleave`` by the segment of each output position (a search of the repeats'
  cumulative sum) where the output's size is known, per block where it is not: ``masked_select``
  and ``repeat_interleave`` without ``output_size`` give chunks of unknown size, as Dask's
  boolean indexing does;
- the gradients are graphs of the same reads and trees, as the library composes them.

Errors come as the in-memory call gives them: the library's own checks of dims, shapes, dtypes
and arguments run when the graph is built (on stand-ins, see :func:`gather._calls.check`); a bad
index value, a negative repeat or a count that the values decide (a mask's true positions, the
repeats' sum) is reported at compute time, with its value and its position in the whole array."""

import inspect
import itertools
import math
import re
import sys

import numpy as np

from . import _calls, _native, _shapes
from ._errors import GatherError, IndexOutOfBoundsError, refused

# Ops along one dim, run per block with that dim whole.
ALONG = ("sort", "argsort", "topk")
_ARRAYS = {"input", "src", "source", "index", "indices", "grad_output", "mask", "repeats"}
# A write's gradient reads where the write went: a dropped write is read as a 0.
_READ_OF = {None: None, "error": None, "wrap": "wrap", "clip": "clip", "drop": "fill"}
# A read's gradient writes where the read came from: a filled position writes nothing.
_WRITE_OF = {None: None, "error": None, "wrap": "wrap", "clip": "clip", "fill": "drop"}


def given(args, kwargs):
    """Whether an argument is a Dask array (without importing Dask)."""
    da = sys.modules.get("dask.array")
    if da is None:
        return False
    return any(isinstance(v, da.Array) for group in (args, kwargs.values()) for v in group)


def call(op, args, kwargs):
    """``gather.<op>(*args, **kwargs)`` with a Dask array among the arguments."""
    return _run(getattr(_native, op), op, args, kwargs, "_")


def grad(op, args, kwargs):
    """``gather.grad.<op>(*args, **kwargs)`` with a Dask array among the arguments."""
    return _run(getattr(_native.grad, op), op, args, kwargs, "_grad_")


def _run(native, op, args, kwargs, prefix):
    """``native`` as the graph its function here (``prefix`` + ``op``) builds, after the
    library's checks."""
    v = _bind(native, op, args, kwargs)
    _check(native, op, v)
    if v.get("dtype") is not None:  # "bfloat16": any other the check has refused
        return _in_bfloat16(native, op, v, prefix)
    return _graph(native, op, v, prefix)


def _graph(native, op, v, prefix):
    if op == "topk" and _split_along(v):
        return _topk_tree(v, prefix == "_grad_")
    if op in ALONG:
        return _along_blocks(native, v, op)
    return globals()[prefix + op](v)


def refuse_in_place(op):
    return refused(
        f"{op}: Dask arrays are immutable, so the in-place forms cannot write into one",
        f"call gather.{op[:-1]} (out of place), which returns a Dask array",
    )


def plan(plan, values):
    """A host ScatterPlan's call with Dask arrays: the same sums as index_add (index_reduce, or
    scatter_reduce with the index spread over src's rows) along dim 0 with the plan's index, as
    gather.dask's trees, which group the rows themselves."""
    import dask.array as da

    if plan.device != "cpu":
        raise refused(f"ScatterPlan: a plan on {plan.device} applies to arrays on that GPU, not Dask arrays",
                      "build the plan from a host index to apply it to Dask arrays")
    dst, src, index = values["dst"], values["src"], np.asarray(plan._index).reshape(-1)
    reduce, include_self = values.get("reduce"), values.get("include_self", True)
    dtype = {"dtype": values.get("dtype")}
    if reduce is None or (reduce == "sum" and include_self):
        return call("index_add", (dst, 0, index, src), dtype)
    if reduce != "sum":
        return call("index_reduce", (dst, 0, index, src, reduce), dict(include_self=include_self, **dtype))
    src = _dask(src)
    spread = _dask(index).reshape((-1,) + (1,) * (src.ndim - 1))
    return call("scatter_reduce", (dst, 0, da.broadcast_to(spread, src.shape), src, "sum"),
                dict(include_self=False, **dtype))


# pytorch_scatter's functions that are one of gather.dask's trees: one value per group.
_TS_REDUCE = {"scatter": None, "scatter_sum": "sum", "scatter_add": "sum", "scatter_mul": "mul",
              "scatter_mean": "mean"}


def torch_scatter(name, fn, args, kwargs):
    """``gather.torch_scatter.<name>(*args, **kwargs)`` with a Dask array among the arguments."""
    import dask.array as da

    from . import dask as gd

    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    v = bound.arguments
    if v.get("out") is not None:
        raise refused(f"{name}: `out` would be written in place, and Dask arrays are immutable",
                      f"add the result to it instead: `out + torch_scatter.{name}(...)`")
    if name in _TS_REDUCE:
        return gd.scatter(v["src"], v["index"], v["dim"], v["dim_size"], _TS_REDUCE[name] or v["reduce"])
    if name in ("scatter_min", "scatter_max"):
        return _ts_arg(v["src"], v["index"], v["dim"], v["dim_size"], "amin" if name == "scatter_min" else "amax")
    if name in ("segment_coo", "segment_csr"):
        src = _dask(v["src"])
        if name == "segment_csr":
            indptr = np.asarray(v["indptr"])
            if v["reduce"] not in ("min", "max"):
                return gd.segment_csr(src, indptr, v["reduce"])
            gd.segment_csr(src, indptr, "sum")  # its checks of indptr, when the graph is built
            ids = da.arange(src.shape[0], chunks=(src.chunks[0],)).map_blocks(gd._ids_of, indptr, dtype=np.int64)
            n = indptr.size - 1
        else:
            if v["reduce"] not in ("min", "max"):
                return gd.segment_coo(src, v["index"], v["dim_size"], v["reduce"])
            ids, n = v["index"], v["dim_size"]
        return _ts_arg(src, ids, 0, n, "amin" if v["reduce"] == "min" else "amax")
    if name == "gather_coo":
        return call("index_select", (v["src"], 0, _dask(v["index"]).reshape(-1)), {})
    if name == "gather_csr":
        indptr = v["indptr"]
        counts = indptr[1:] - indptr[:-1]
        size = None if isinstance(indptr, da.Array) else int(np.asarray(indptr)[-1]) if np.size(indptr) else 0
        return call("repeat_interleave", (v["src"], counts, 0), {"output_size": size})
    if name in ("scatter_softmax", "scatter_log_softmax"):
        return _ts_softmax(v["src"], v["index"], v["dim"], v["dim_size"], name == "scatter_log_softmax")
    if name == "scatter_logsumexp":
        return _ts_logsumexp(v["src"], v["index"], v["dim"], v["dim_size"], v["eps"])
    if name == "scatter_std":
        return _ts_std(v["src"], v["index"], v["dim"], v["dim_size"], v["unbiased"])
    raise AssertionError(f"gather.torch_scatter.{name} has no Dask graph")


def _ts_prepare(src, index, dim, dim_size):
    """pytorch_scatter's operands as gather.dask's: src, its index (1-D along dim or of src's
    shape), dim and the number of groups (the largest index + 1 unless given, as gather.dask.scatter
    computes it)."""
    from . import dask as gd

    src, index = _dask(src), _dask(index)
    d = dim % max(src.ndim, 1)
    src, index, d, n = gd._prepare(src, index, d, dim_size, "scatter")
    return src, index, d, n


def _ts_read(values, index, d):
    """Each element's group value: ``values`` read back at src's positions."""
    from . import dask as gd

    if index.ndim == 1 and values.ndim != 1:
        return gd.index_select(values, d, index)
    return gd.gather(values, d, index)


def _ts_arg(src, index, dim, dim_size, reduce):
    """scatter_max/min on Dask arrays: ``(values, arg)``, the extreme of each group (0 for an
    empty one) and the first position along ``dim`` that holds it (``src.shape[dim]`` for an
    empty group). The values are one tree; the positions a second (the least position whose
    element equals its group's extreme, NaN matching NaN)."""
    import dask.array as da

    from . import dask as gd

    src, index, d, n = _ts_prepare(src, index, dim, dim_size)
    values = gd.scatter(src, index, d, n, reduce)
    extreme = _ts_read(values, index, d)  # no element's group is empty
    size = src.shape[d]
    shape = (1,) * d + (size,) + (1,) * (src.ndim - d - 1)
    pos = da.broadcast_to(da.arange(size, chunks=(src.chunks[d],)).reshape(shape), src.shape, chunks=src.chunks)
    same = src == extreme
    if np.issubdtype(src.dtype, np.floating):
        same = same | (da.isnan(src) & da.isnan(extreme))
    first = da.where(same, pos, size)
    out = list(src.shape)
    out[d] = n
    arg = gd.scatter_reduce(da.full(out, size, dtype=np.int64, chunks=values.chunks), d, index, first, "amin")
    return values, arg


def _ts_softmax(src, index, dim, dim_size, log):
    """scatter_softmax (or log_softmax) on Dask arrays: each element less its group's maximum,
    exponentiated, over its group's sum."""
    import dask.array as da

    from . import dask as gd

    src, index, d, n = _ts_prepare(src, index, dim, dim_size)
    top = _ts_read(gd.scatter(src, index, d, n, "amax"), index, d)
    shifted = src - top
    e = da.exp(shifted)
    total = _ts_read(gd.scatter(e, index, d, n, "sum"), index, d)
    return (shifted - da.log(total)).astype(src.dtype) if log else (e / total).astype(src.dtype)


def _ts_logsumexp(src, index, dim, dim_size, eps):
    """scatter_logsumexp on Dask arrays: each group's maximum plus the log of its shifted sum;
    ``log(eps)`` for an empty group."""
    import dask.array as da

    from . import dask as gd

    src, index, d, n = _ts_prepare(src, index, dim, dim_size)
    top, counts = gd._tree(src, index, d, n, "amax", None)  # the maxima and the groups' sizes
    counts = gd._counts_like(counts, top, d)
    top = da.where(counts > 0, top, 0).astype(src.dtype)  # as gather.dask.scatter's "amax"
    total = gd.scatter(da.exp(src - _ts_read(top, index, d)), index, d, n, "sum")
    return da.where(counts > 0, top + da.log(da.where(counts > 0, total, 1)), np.log(eps)).astype(src.dtype)


def _ts_std(src, index, dim, dim_size, unbiased):
    """scatter_std on Dask arrays: the root of each group's squared deviations from its mean, over
    its count (less one when ``unbiased``, and 0 for groups of fewer than two)."""
    import dask.array as da

    from . import dask as gd

    src, index, d, n = _ts_prepare(src, index, dim, dim_size)
    sums, counts = gd._tree(src, index, d, n, "mean", None)  # the sums and the groups' sizes
    counts = gd._counts_like(counts, sums, d)
    mean = gd._mean(sums, counts).astype(src.dtype)  # as gather.dask.scatter's "mean"
    dev = src - _ts_read(mean, index, d)
    squares = gd.scatter(dev * dev, index, d, n, "sum")
    c = counts - 1 if unbiased else counts
    std = da.sqrt(squares / da.maximum(c, 1))
    return da.where(counts > (1 if unbiased else 0), std, 0).astype(src.dtype)


# The arguments that hold data: bfloat16 bit patterns under dtype="bfloat16".
_DATA = ("input", "src", "source", "grad_output")


def _in_bfloat16(native, op, v, prefix):
    """The call on bfloat16 bit patterns: its graph on float32 blocks (each pattern widened exactly)
    whose float32 results are rounded back to bit patterns (to nearest, ties to even, as the
    library rounds): moves give the patterns themselves, and sums are reduced in float32 and
    rounded once, as the library's kernels accumulate bfloat16."""
    v = dict(v, dtype=None)
    for name in _DATA:
        a = v.get(name)
        if a is not None and getattr(a, "dtype", None) == np.uint16:
            v[name] = a.map_blocks(_widen, dtype=np.float32) if hasattr(a, "map_blocks") else _widen(a)
    for name in ("value", "src"):  # a number is rounded to bfloat16 first, as the library does
        if isinstance(v.get(name), (int, float, np.number)) and not isinstance(v[name], bool):
            bits = _native.index_fill(np.zeros(1, np.uint16), 0, np.zeros(1, np.int64), v[name], dtype="bfloat16")
            v[name] = float(_widen(bits)[0])
    out = _graph(native, op, v, prefix)
    return tuple(map(_narrowed, out)) if isinstance(out, tuple) else _narrowed(out)


def _widen(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def _narrowed(a):
    return a.map_blocks(_narrow, dtype=np.uint16) if a.dtype == np.float32 else a


def _narrow(block):
    """float32 to bfloat16 bit patterns, to nearest with ties to even; a NaN keeps its pattern's
    top half (a quiet bit where that half alone would read as an infinity)."""
    u = np.ascontiguousarray(block, np.float32).view(np.uint32)
    top = (u >> 16).astype(np.uint16)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.where(top & 0x7F, top, top | 0x40)
    return np.where(np.isnan(block), nan, rounded)


def _bind(native, op, args, kwargs):
    import dask.array as da

    bound = inspect.signature(native).bind(*args, **kwargs)
    bound.apply_defaults()
    v = dict(bound.arguments)
    for name in _ARRAYS & v.keys():
        if v[name] is not None and not isinstance(v[name], da.Array) and not np.isscalar(v[name]):
            v[name] = np.asarray(v[name])
    return v


def _check(native, op, v):
    """The library's checks of the call, when the graph is built (see gather._calls.check). Its
    stand-ins keep sizes' order, not their products nor the values that decide some counts, so
    those are compared here: put's index and source by their element counts, and a gradient of
    masked_select or repeat_interleave by the forward call's checks and grad_output's dtype and
    the sizes that do not wait for the values (the rest is checked at compute time)."""
    names = [n for n in _ARRAYS & v.keys() if hasattr(v[n], "shape")]
    if op == "put":
        if _count(v["index"]) != _count(v["source"]):
            _raise_real(native, v, names)
        v = {**v, **{n: _stand(v[n], (_count(v[n]),)) for n in ("index", "source")}}
    elif op == "repeat_interleave":
        v = {**v, "output_size": None}  # checked against the repeats' sum at compute time
        r = v["repeats"]
        if v["dim"] is None and r is not None and hasattr(r, "shape") and _count(r) != 1:
            if _count(v["input"]) != _count(r):  # flattened: one count per element
                _raise_real(native, v, names)
            v = {**v, "input": _stand(v["input"], (_count(v["input"]),))}
    if "grad_output" in v and op in ("masked_select", "repeat_interleave"):
        g, x = v["grad_output"], v["input"]
        forward = {k: val for k, val in v.items() if k != "grad_output"}
        _calls.check(getattr(_native, op), forward, [n for n in names if n != "grad_output"])
        shape = _forward_shape(op, forward)
        if g.dtype != x.dtype or len(g.shape) != len(shape) or any(
                a != b for a, b in zip(g.shape, shape) if a == a and b is not None):
            _raise_real(native, v, names, shape)
        return
    _calls.check(native, v, names)


def _count(a):
    return int(np.prod(np.shape(a), dtype=np.int64))


def _stand(a, shape=None):
    """A stride-0 stand-in of ``a``'s dtype (and shape; an unknown size, NaN, as 0)."""
    shape = np.shape(a) if shape is None else shape
    return np.broadcast_to(np.zeros((), a.dtype), tuple(0 if s != s else int(s) for s in shape))


def _forward_shape(op, v):
    """The output shape of masked_select or repeat_interleave where it follows from shapes alone,
    with None for the size that the values decide."""
    if op == "masked_select":
        return (None,)
    x, r, dim = v["input"], v["repeats"], v["dim"]
    shape = list(x.shape) if dim is not None else [_count(x)]
    d = 0 if dim is None else dim % len(shape)
    k = _scalar(r)
    shape[d] = shape[d] * k if k is not None else None
    return tuple(shape)


def _scalar(r):
    """The repeats' one number where the graph can read it (a Python int or a NumPy array of one
    element), else None."""
    if isinstance(r, (int, np.integer)):
        return int(r)
    if isinstance(r, np.ndarray) and r.size == 1 and r.ndim <= 1:
        return int(r.reshape(-1)[0])
    return None


def _raise_real(native, v, names, shape=None):
    """The library's error for the call, from stride-0 stand-ins of the real shapes (it checks
    before it reads or allocates); for a gradient of an op whose output size the values decide,
    stand-ins of the mask or repeats that make the forward output ``shape``'s size wait for
    grad_output's (so that only what is wrong shows)."""
    stand = {n: _stand(v[n]) for n in names}
    if shape is not None and None in shape:
        g = v["grad_output"]
        size = g.shape[shape.index(None)] if len(g.shape) == len(shape) else 0
        size = 0 if size != size else int(size)
        stand.update(_sized(v, size))
    native(**{**v, **stand})
    raise AssertionError(f"{native.__name__} took a call that its checks refused")


def _sized(v, size):
    """A mask (or repeats) of the real shape whose true positions (or sum) make ``size``."""
    if "mask" in v:
        m = np.zeros(v["mask"].shape, bool)
        m.reshape(-1)[:size] = True
        return {"mask": m}
    r = np.zeros(np.shape(v["repeats"]), np.int64)
    if r.size:
        r.reshape(-1)[0] = size
    return {"repeats": r}


def _dask(a):
    import dask.array as da

    return a if isinstance(a, da.Array) else da.asarray(a)


def _lifted(*arrays):
    """0-d arrays as 1-element 1-d ones (gather.dask's graphs walk axes)."""
    return [a.reshape(1) if a.ndim == 0 else a for a in map(_dask, arrays)]


class _Ctx:
    broadcast = staticmethod(np.broadcast_shapes)

    @staticmethod
    def dynamic(op, hint):  # the ops here have static shapes
        raise AssertionError(op)


def _out_shape(op, v):
    values = {k: val for k, val in v.items() if k not in ("bounds", "fill_value", "dtype")}
    return _shapes.__dict__[op](_Ctx, **values)[0]


def _table(shape):
    """A stride-0 table of ``shape``: what an index check reads, at no memory."""
    return np.broadcast_to(np.zeros((), np.int8), tuple(shape))


def _validated(index, name, read, args_of, policy):
    """``index`` with each block's values checked by the library's ``read`` (called with
    ``args_of(block)``, a stride-0 table and the block), so that a bad value raises the library's
    error under ``name``, at its position in the whole index, before a task writes with it."""
    from .dask import _in_whole, _reworded

    if policy == "fill":
        return index  # no value is an error

    def block(ib, block_info=None):
        origin = tuple(s for s, _ in block_info[0]["array-location"]) if block_info else (0,) * ib.ndim
        try:
            _in_whole(lambda: getattr(_native, read)(*args_of(ib), bounds=policy), origin)
        except IndexOutOfBoundsError as e:
            if read == name:
                raise
            text = re.sub(rf"(^|hint: ){re.escape(read)}\b", lambda m: m.group(1) + name, str(e), flags=re.M)
            raise _reworded(e, text, e.coordinate) from None
        return ib

    return index.map_blocks(block, dtype=index.dtype)


def _after(a, index):
    """``a``, computed only after every block of the checked ``index`` (a gradient that passes
    ``grad_output`` through raises a bad value as the in-memory call does)."""
    import dask.array as da

    return da.map_blocks(_keep, a, index.min(), dtype=a.dtype)


def _keep(block, _):
    return block


def _along_dim(d, n):
    """The check of a gather-like index along ``d`` of size ``n``."""
    return lambda ib: (_table(ib.shape[:d] + (n,) + ib.shape[d + 1:]), d, ib)


def _select_along(d, n, ndim):
    """The check of index_select's 1-d index along ``d`` of size ``n`` in ``ndim`` dims."""
    return lambda ib: (_table((1,) * d + (n,) + (1,) * (ndim - d - 1)), d, ib)


# ---------------------------------------------------------------------------------------------
# The ops


def _gather(v):
    from . import dask as gd

    x, index = _lifted(v["input"], v["index"])
    out = gd.gather(x, v["dim"], index, bounds=v["bounds"], fill_value=v["fill_value"])
    return out.reshape(_out_shape("gather", v))


def _take(v):
    from . import dask as gd

    x = _dask(v["input"])
    index = v["index"]
    if isinstance(index, np.ndarray):
        _native.take(_table(x.shape), index, bounds=v["bounds"])  # a bad value's error names x's shape
    else:
        index = _validated(index, "take", "take", lambda ib: (_table(x.shape), ib), v["bounds"])
    return gd.take(x.reshape(-1), index, 0, bounds=v["bounds"], fill_value=v["fill_value"])


def _index_select(v):
    from . import dask as gd

    (x,) = _lifted(v["input"])
    out = gd.index_select(x, v["dim"], _dask(v["index"]).reshape(-1), bounds=v["bounds"],
                          fill_value=v["fill_value"])
    return out.reshape(_out_shape("index_select", v))


def _along(v, name):
    """take_along_dim's operands as a gather's, its index checked under ``name``: with ``dim``,
    the input and index broadcast off it, and the index wrapped modulo the dim's size under the
    default policy, as PyTorch 2.15 does; with ``dim=None``, both flattened."""
    import dask.array as da

    x, index, dim = _dask(v["input"]), _dask(v["indices"]), v["dim"]
    if dim is None:
        index = _validated(index, name, "take_along_dim", lambda ib: (_table(x.shape), ib, None), v["bounds"])
        return x.reshape(-1), index.reshape(-1), 0, None
    d = dim % x.ndim
    shape = _out_shape("take_along_dim", v)
    x = da.broadcast_to(x, shape[:d] + (x.shape[d],) + shape[d + 1:])
    index = da.broadcast_to(index, shape)
    n = x.shape[d]
    if v["bounds"] is None and n > 0:
        index = index % n
    check = lambda ib: (_table((1,) * d + (n,) + (1,) * (ib.ndim - d - 1)), ib, d)  # noqa: E731
    return x, _validated(index, name, "take_along_dim", check, v["bounds"]), d, shape


def _take_along_dim(v):
    from . import dask as gd

    x, index, d, shape = _along(v, "take_along_dim")
    out = gd.gather(x, d, index, bounds=v["bounds"], fill_value=v["fill_value"])
    return out if shape is not None else out.reshape(_out_shape("take_along_dim", v))


def _scatter_add(v):
    from . import dask as gd

    x, index, src = _lifted(v["input"], v["index"], v["src"])
    if index.size == 0:
        return x.reshape(np.shape(v["input"]))
    out = gd.scatter_add(x, v["dim"], index, src, bounds=v["bounds"], fill_value=v["fill_value"])
    return out.reshape(np.shape(v["input"]))


def _scatter_reduce(v):
    from . import dask as gd

    x, index, src = _lifted(v["input"], v["index"], v["src"])
    if index.size == 0:
        return x.reshape(np.shape(v["input"]))
    out = gd.scatter_reduce(x, v["dim"], index, src, v["reduce"], v["include_self"], bounds=v["bounds"],
                            fill_value=v["fill_value"])
    return out.reshape(np.shape(v["input"]))


def _index_operands(v, name):
    """index_add's and index_reduce's input, 1-d index (validated under ``name``), source and dim."""
    x, source = _lifted(v["input"], v["source"])
    index = _dask(v["index"]).reshape(-1)
    d = v["dim"] % x.ndim
    index = _validated(index, name, "index_select", _select_along(d, x.shape[d], x.ndim), _READ_OF[v["bounds"]])
    return x, index, source, d


def _index_add(v):
    from . import dask as gd

    x, index, source, d = _index_operands(v, "index_add")
    if index.size == 0:
        return x.reshape(np.shape(v["input"]))
    if v["alpha"] is not None:
        source = (source * v["alpha"]).astype(source.dtype)
    out = gd.scatter_add(x, d, index, source, bounds=v["bounds"], fill_value=v["fill_value"])
    return out.reshape(np.shape(v["input"]))


def _index_reduce(v):
    from . import dask as gd

    x, index, source, d = _index_operands(v, "index_reduce")
    if index.size == 0:
        return x.reshape(np.shape(v["input"]))
    out = gd.scatter_reduce(x, d, index, source, v["reduce"], v["include_self"], bounds=v["bounds"],
                            fill_value=v["fill_value"])
    return out.reshape(np.shape(v["input"]))


def _split_along(v):
    """Whether the input is a Dask array of more than one block along ``dim``."""
    x = v["input"]
    return hasattr(x, "numblocks") and x.ndim > 0 and x.numblocks[v["dim"] % x.ndim] > 1


def _topk_tree(v, grad, split_every=8):
    """topk (or its gradient) along a dim of several blocks, as a tree: each block's ``k`` best
    with their positions in the whole dim, then ``split_every`` such lists at a time concatenated
    in block order and cut to the ``k`` best by the library's topk, whose ties keep the lowest
    position: a tie's candidates stand in position order in every concatenation, so the root is
    the in-memory call's result. No task holds more than ``split_every * k`` candidates of a lane;
    the gradient scatters ``grad_output`` to the root's positions."""
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    from . import dask as gd

    x = _dask(v["input"])
    d, k, largest = v["dim"] % x.ndim, v["k"], v["largest"]
    edges = np.concatenate([[0], np.cumsum(x.chunks[d])])
    token = tokenize(x, d, k, largest, split_every)
    dsk = {}
    roots = {}
    others = [range(nb) for a, nb in enumerate(x.numblocks) if a != d]
    for j in itertools.product(*others):
        level = []
        for b in range(x.numblocks[d]):
            key = (f"gather-topk-leaf-{token}", b) + j
            dsk[key] = (_topk_leaf, (x.name,) + j[:d] + (b,) + j[d:], k, d, largest, int(edges[b]))
            level.append(key)
        depth = 0
        while len(level) > 1:
            depth += 1
            nxt = []
            for g in range(math.ceil(len(level) / split_every)):
                key = (f"gather-topk-merge-{depth}-{token}", g) + j
                dsk[key] = (_topk_merge, level[g * split_every:(g + 1) * split_every], k, d, largest)
                nxt.append(key)
            level = nxt
        roots[j] = level[0]
    chunks = x.chunks[:d] + ((k,),) + x.chunks[d + 1:]
    outs = []
    for part, dtype in ((0, x.dtype), (1, np.dtype(np.int64))):
        name = f"gather-topk-{part}-{token}"
        for j, root in roots.items():
            dsk[(name,) + j[:d] + (0,) + j[d:]] = (_part, root, part)
        graph = HighLevelGraph.from_collections(name, dict(dsk), dependencies=[x])
        outs.append(da.Array(graph, name, chunks, meta=np.empty((0,) * x.ndim, dtype)))
    values, indices = outs
    if not grad:
        return values, indices
    w = _wide(x.dtype)
    g = _dask(v["grad_output"]).astype(w)
    return gd.scatter_add(_zeros(x.shape, w, x), d, indices, g).astype(x.dtype)


def _topk_leaf(block, k, d, largest, start):
    values, at = _native.topk(block, min(k, block.shape[d]), d, largest, True)
    return values, at + start


def _topk_merge(pairs, k, d, largest):
    values = np.concatenate([p[0] for p in pairs], axis=d)
    at = np.concatenate([p[1] for p in pairs], axis=d)
    best, pos = _native.topk(values, min(k, values.shape[d]), d, largest, True)
    return best, np.take_along_axis(at, pos, d)


def _along_blocks(native, v, op):
    """sort, argsort, topk or one of their gradients, per block of the arrays with ``dim`` whole
    (rechunked to one block along it): one task per block, whose results are the outputs'
    blocks."""
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    names = [n for n in ("grad_output", "input") if v.get(n) is not None]
    x = _dask(v["input"])
    if x.ndim == 0:
        return native(**{**v, **{n: np.asarray(_dask(v[n]).compute()) for n in names}})  # one element
    d = v["dim"] % x.ndim
    arrays = [_dask(v[n]).rechunk({d: -1}) for n in names]
    if len(arrays) == 2:  # the gradient and the input in the same blocks off dim
        off = {a: x.chunks[a] for a in range(x.ndim) if a != d}
        arrays = [a.rechunk(off) for a in arrays]
    lead = arrays[-1]
    fixed = {k: val for k, val in v.items() if k not in names}
    token = tokenize(op, *arrays, sorted(fixed.items(), key=str))
    name = f"gather-{op}-" + token
    dsk = {}
    for b in np.ndindex(*lead.numblocks):
        dsk[(name,) + b] = (_call_block, native, names, fixed) + tuple((a.name,) + b for a in arrays)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=arrays)
    pieces = da.Array(graph, name, lead.chunks, meta=np.empty((0,) * lead.ndim, object))
    n_out = _shapes.kinds(op) if not names[0] == "grad_output" else ("input",)
    shape = _out_shape(op, v) if names[0] != "grad_output" else x.shape
    chunks = tuple((shape[d],) if a == d else lead.chunks[a] for a in range(x.ndim))
    outs = []
    for k, kind in enumerate(n_out):
        dtype = x.dtype if kind == "input" else np.dtype(np.int64)
        outs.append(pieces.map_blocks(_part, k, chunks=chunks, dtype=dtype, meta=np.empty((0,) * x.ndim, dtype)))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _call_block(native, names, fixed, *blocks):
    out = native(**fixed, **dict(zip(names, blocks)))
    return out if isinstance(out, tuple) else (out,)


def _part(pieces, k):
    return pieces[k]


def _scatter(v):
    from . import dask as gd

    x, index = _lifted(v["input"], v["index"])
    (src,) = _lifted(_scatter_src(v, x, index))
    if index.size == 0:
        return x.reshape(np.shape(v["input"]))
    d = v["dim"] % x.ndim
    index = _validated(index, "scatter", "gather", _along_dim(d, x.shape[d]), _READ_OF[v["bounds"]])
    if v["reduce"] is not None:  # the legacy reduce= of scatter: into self
        how = {"add": "sum", "multiply": "prod"}[v["reduce"]]
        out = gd.scatter_reduce(x, d, index, src, how, True, bounds=v["bounds"], fill_value=v["fill_value"])
    else:
        out = gd._scatter_reduce(x, d, index, src, None, True, None, v["bounds"], v["fill_value"], "scatter")
    return out.reshape(np.shape(v["input"]))


def _scatter_src(v, x, index):
    """scatter's src: the array, or for the number form the number in index's shape."""
    import dask.array as da

    src = v["src"]
    if src is not None and hasattr(src, "shape"):
        return src
    return da.full(index.shape, v["value"] if src is None else src, dtype=x.dtype, chunks=index.chunks)


def _index_copy(v):
    from . import dask as gd

    x, index, source, d = _index_operands(v, "index_copy")
    if index.size == 0:
        return x.reshape(np.shape(v["input"]))
    out = gd._scatter_reduce(x, d, index, source, None, True, None, v["bounds"], v["fill_value"], "scatter")
    return out.reshape(np.shape(v["input"]))


def _index_fill(v):
    import dask.array as da

    from . import dask as gd

    (x,) = _lifted(v["input"])
    d = v["dim"] % x.ndim
    index = _fill_index(v, x, d, "index_fill")
    if index.size == 0:
        return x.reshape(np.shape(v["input"]))
    shape = x.shape[:d] + (index.size,) + x.shape[d + 1:]
    source = da.full(shape, v["value"], dtype=x.dtype)
    out = gd._scatter_reduce(x, d, index, source, None, True, None, v["bounds"], v["fill_value"], "scatter")
    return out.reshape(np.shape(v["input"]))


def _fill_index(v, x, d, name):
    """index_fill's 1-D index, checked under ``name`` by index_fill itself (which, unlike
    index_copy, counts negative values from the end) and wrapped under the default policy."""
    import dask.array as da

    n = x.shape[d]
    table = _table((1,) * d + (n,) + (1,) * (x.ndim - d - 1))
    index = _validated(_dask(v["index"]).reshape(-1), name, "index_fill", lambda ib: (table, d, ib, 0), v["bounds"])
    return da.where(index < 0, index + n, index) if v["bounds"] is None and n else index


def _put(v):
    from . import dask as gd

    x = _dask(v["input"])
    index, src = _put_index(v, x, "put"), _dask(v["source"]).reshape(-1)
    if index.size == 0:
        return x
    flat = x.reshape(-1)
    if v["accumulate"]:
        out = gd.scatter_add(flat, 0, index, src, bounds=v["bounds"], fill_value=v["fill_value"])
    else:
        out = gd._scatter_reduce(flat, 0, index, src, None, True, None, v["bounds"], v["fill_value"], "scatter")
    return out.reshape(x.shape)


def _put_index(v, x, name):
    """put's index flattened, checked under ``name`` (as take reads: negative values count from the
    end) and wrapped under the default policy."""
    index = _validated(_dask(v["index"]), name, "take", lambda ib: (_table(x.shape), ib), _READ_OF[v["bounds"]])
    index = index.reshape(-1)
    return index % x.size if v["bounds"] is None and x.size else index


def _select_batched(v):
    from . import dask as gd

    x = _dask(v["input"])
    axis = v["axis"] % x.ndim
    return gd._select_batched(x, axis, _dask(v["index"]), v["batch_dims"], v["bounds"], v["fill_value"])


def _masked(x, mask):
    """The mask broadcast to ``x``'s shape and flattened in x's flattened blocks, the flattened x, and
    each true position's rank among them (-1 off the mask): the order in which masked_select
    reads and masked_scatter writes."""
    import dask.array as da

    flat = x.reshape(-1)
    m = da.broadcast_to(_dask(mask), x.shape).reshape(-1).rechunk(flat.chunks)
    rank = da.where(m, da.cumsum(m.astype(np.int64)) - 1, -1)
    return flat, m, rank


def _counted(out, mask, check):
    """``out``, computed after ``check(count)`` has passed on the mask's true positions."""
    import dask.array as da

    count = _dask(mask).astype(np.int64).sum()
    return da.map_blocks(_keep, out, count.map_blocks(check, dtype=np.int64), dtype=out.dtype)


def _masked_select(v):
    import dask.array as da

    x, mask = _dask(v["input"]), _dask(v["mask"])
    flat, m, _ = _masked(da.broadcast_to(x, np.broadcast_shapes(x.shape, mask.shape)), mask)
    # As Dask's boolean indexing: the blocks' sizes are known once computed.
    return da.map_blocks(_select_block, flat, m, chunks=((np.nan,) * flat.numblocks[0],), dtype=x.dtype)


def _select_block(block, mask):
    return _native.masked_select(block, mask)


def _masked_scatter(v):
    import dask.array as da

    from . import dask as gd

    x, source = _dask(v["input"]), _dask(v["source"])
    flat, m, rank = _masked(x, v["mask"])
    if source.size == 0:
        out = flat
    else:
        taken = gd.take(source.reshape(-1), rank, bounds="fill", fill_value=0)
        out = da.where(m, taken, flat)
    return _counted(out.reshape(x.shape), m, _enough(v, "masked_scatter", x, source))


def _enough(v, name, x, source):
    """The check that the mask has no more true positions than ``source`` has elements, raising the
    in-memory call's error (from stand-ins with as many true positions)."""
    native = getattr(_native.grad if name.startswith("grad::") else _native, "masked_scatter")

    def check(count):
        if int(count) > _count(source):
            args = {**v, "input": _stand(x), "source": _stand(source), **_sized(v, int(count))}
            if "grad_output" in v:
                args["grad_output"] = _stand(x)
            native(**args)
        return count

    return check


def _repeat_interleave(v):
    import dask.array as da

    r, dim, size = v["repeats"], v["dim"], v["output_size"]
    if r is None:  # the positions form: the input holds the repeats
        r = _dask(v["input"])
        n = r.shape[0] if r.ndim else 1
        return _segments_of(r.reshape(-1), size, np.int64, da.arange(n, chunks=r.reshape(-1).chunks), None)
    x = _dask(v["input"])
    if dim is None:
        x, d = x.reshape(-1), 0
    else:
        d = dim % max(x.ndim, 1)
    if x.ndim == 0:
        x = x.reshape(1)
    k = _scalar(r)
    if k is not None:  # one count for every slice: every block's output size is known
        out = x.map_blocks(_repeat_block, k, d, chunks=tuple(
            tuple(c * k for c in cs) if a == d else cs for a, cs in enumerate(x.chunks)), dtype=x.dtype)
        return _sized_check(out, v, k * x.shape[d]) if size is not None else out
    r = _dask(r).reshape(-1)
    if r.shape[0] == 1 and x.shape[d] != 1:
        r = da.broadcast_to(r, (x.shape[d],))
    return _segments_of(r, size, x.dtype, x, d)


def _repeat_block(block, k, d):
    return _native.repeat_interleave(block, k, d)


def _segments_of(r, size, dtype, x, d):
    """repeat_interleave of ``x`` along ``d`` by the 1-D repeats ``r`` (``d`` None: the positions
    form, ``x`` the positions): with ``output_size``, an index_select of the segment of each output
    position (a search of the repeats' cumulative sum, which each task reads whole); without it,
    block by block, in blocks of sizes the repeats decide."""
    import dask.array as da

    from . import dask as gd

    axis = 0 if d is None else d
    r = _repeats_checked(r.rechunk((x.chunks[axis],)))
    if size is None:
        chunks = tuple((np.nan,) * len(cs) if a == axis else cs for a, cs in enumerate(x.chunks))
        if d is None:
            return da.map_blocks(_positions_block, r, x, chunks=chunks, dtype=dtype)
        if x.ndim == 1:
            return da.map_blocks(_repeat_block, x, r, axis, chunks=chunks, dtype=dtype)
        spread = r.reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
        return da.map_blocks(_repeat_spread, x, spread, axis, chunks=chunks, dtype=dtype)
    cum = da.cumsum(r.astype(np.int64))
    ids = _ids(cum, da.arange(size, chunks=max(1, *x.chunks[axis])))
    ids = _after(ids, _sum_check(cum, size, lambda total: _size_error(total, size)))
    if d is None:
        return ids
    return gd.index_select(x, axis, ids)


def _positions_block(r, first):
    return _native.repeat_interleave(r) + (first[0] if first.size else 0)


def _repeat_spread(block, spread, axis):
    return _native.repeat_interleave(block, spread.reshape(-1), axis)


def _ids(cum, positions):
    """The segment of each position: how many of the cumulative sums ``cum`` (read whole by each
    task) are at most the position."""
    import dask.array as da

    return da.blockwise(_ids_block, "i", positions, "i", cum.rechunk(-1), "j", concatenate=True,
                        dtype=np.int64)


def _ids_block(positions, cum):
    return np.searchsorted(cum, positions, side="right")


def _repeats_checked(r, name="repeat_interleave"):
    """The repeats, each block checked for a negative count (the library's error under ``name``, at
    the count's position in the whole repeats)."""

    from .dask import _reworded

    def block(rb, block_info=None):
        start = block_info[0]["array-location"][0][0] if block_info else 0
        try:
            _native.repeat_interleave(rb, output_size=None) if rb.size else None
        except GatherError as e:
            text = re.sub(r"repeats\[(\d+)\]", lambda m: f"repeats[{int(m.group(1)) + start}]", str(e), count=1)
            raise _reworded(e, re.sub(r"^repeat_interleave:", f"{name}:", text), None) from None
        return rb

    return r.map_blocks(block, dtype=r.dtype)


def _sum_check(cum, size, error):
    """A 1-element array that calls ``error(total)`` (which raises the library's error) where the
    repeats, whose cumulative sum is ``cum``, sum to a ``total`` other than ``size``."""

    def check(c):
        total = int(c[-1]) if c.size else 0
        if total != size:
            error(total)
        return np.zeros(1, np.int64)

    return cum.rechunk(-1).map_blocks(check, chunks=((1,),), dtype=np.int64)


def _size_error(total, size):
    """The library's error for repeats that sum to ``total`` and an output_size of ``size``."""
    _native.repeat_interleave(np.array([total], np.int64), output_size=size)


def _sized_check(out, v, total):
    """``out`` for an output_size that the graph can check now."""
    if total != v["output_size"]:
        _size_error(total, v["output_size"])
    return out


# ---------------------------------------------------------------------------------------------
# Their gradients, in the wide float type (float16 in float32) and narrowed at the end, as the
# library computes them.


def _wide(dtype):
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)


def _pad_to(a, shape):
    """``a`` with zeros after its end up to ``shape`` (a gradient of the block an index covers)."""
    import dask.array as da

    if a.shape == tuple(shape):
        return a
    return da.pad(a, [(0, n - s) for n, s in zip(shape, a.shape)], constant_values=0)


def _zeros(shape, dtype, like=None):
    import dask.array as da

    return da.zeros(shape, dtype=dtype, chunks=like.chunks if like is not None and like.shape == tuple(shape) else "auto")


def _grad_gather(v):
    from . import dask as gd

    x, index, g = _lifted(v["input"], v["index"], v["grad_output"])
    d = v["dim"] % x.ndim
    index = _validated(index, "grad::gather", "gather", _along_dim(d, x.shape[d]), v["bounds"])
    w = _wide(x.dtype)
    base = _zeros(index.shape[:d] + (x.shape[d],) + index.shape[d + 1:], w)
    gi = _pad_to(gd.scatter_add(base, d, index, g.astype(w), bounds=_WRITE_OF[v["bounds"]]), x.shape)
    return gi.astype(x.dtype).reshape(np.shape(v["input"]))


def _flat_grad(x, index, g, policy):
    """The gradient of a read of the flattened ``x`` at the flattened, checked ``index``."""
    from . import dask as gd

    w = _wide(x.dtype)
    gi = gd.scatter_add(_zeros((x.size,), w), 0, index.reshape(-1), g.reshape(-1).astype(w),
                        bounds=_WRITE_OF[policy])
    return gi.reshape(x.shape).astype(x.dtype)


def _grad_take(v):
    x, index, g = _dask(v["input"]), _dask(v["index"]), _dask(v["grad_output"])
    if index.size == 0:
        return _zeros(x.shape, x.dtype)
    index = _validated(index, "grad::take", "take", lambda ib: (_table(x.shape), ib), v["bounds"])
    if v["bounds"] is None:
        index = index % max(x.size, 1)  # take counts negative values from the end
    return _flat_grad(x, index, g, v["bounds"])


def _grad_index_select(v):
    from . import dask as gd

    (x,) = _lifted(v["input"])
    g = _dask(v["grad_output"])
    g = g.reshape(g.shape if x.ndim == np.ndim(v["input"]) else (-1,))
    d = v["dim"] % x.ndim
    index = _validated(_dask(v["index"]).reshape(-1), "grad::index_select", "index_select",
                       _select_along(d, x.shape[d], x.ndim), v["bounds"])
    if index.size == 0:
        return _zeros(np.shape(v["input"]), x.dtype)
    w = _wide(x.dtype)
    gi = gd.scatter_add(_zeros(x.shape, w, x), d, index, g.astype(w), bounds=_WRITE_OF[v["bounds"]])
    return gi.astype(x.dtype).reshape(np.shape(v["input"]))


def _grad_take_along_dim(v):
    from . import dask as gd

    x = _dask(v["input"])
    g = _dask(v["grad_output"])
    _, index, d, shape = _along(v, "grad::take_along_dim")
    if shape is None:
        return _flat_grad(x, index, g, v["bounds"])
    w = _wide(x.dtype)
    base = _zeros(shape[:d] + (x.shape[d],) + shape[d + 1:], w)
    gi = gd.scatter_add(base, d, index, g.astype(w), bounds=_WRITE_OF[v["bounds"]])
    # The gradient of the broadcast: summed over the axes input was broadcast along.
    spread = tuple(a for a in range(x.ndim) if x.shape[a] == 1 and gi.shape[a] != 1)
    if spread:
        gi = gi.sum(axis=spread, keepdims=True)
    return gi.astype(x.dtype)


def _grad_scatter_add(v):
    from . import dask as gd

    x, index, src, g = _lifted(v["input"], v["index"], v["src"], v["grad_output"])
    d = v["dim"] % x.ndim
    shape_x, shape_s = np.shape(v["input"]), np.shape(v["src"])
    if index.size == 0:
        return g.reshape(shape_x).astype(x.dtype), _zeros(shape_s, src.dtype)
    index = _validated(index, "grad::scatter_add", "gather", _along_dim(d, x.shape[d]), _READ_OF[v["bounds"]])
    policy = _READ_OF[v["bounds"]]
    gs = gd.gather(g, d, index, bounds=policy, fill_value=0 if policy == "fill" else None)
    return _after(g.astype(x.dtype), index).reshape(shape_x), _pad_to(gs, src.shape).astype(src.dtype).reshape(shape_s)


def _grad_index_add(v):
    from . import dask as gd

    x, index, source, d = _index_operands(v, "grad::index_add")
    g = _dask(v["grad_output"]).reshape(x.shape)
    shape_x, shape_s = np.shape(v["input"]), np.shape(v["source"])
    if index.size == 0:
        return g.reshape(shape_x).astype(x.dtype), _zeros(shape_s, source.dtype)
    policy = _READ_OF[v["bounds"]]
    gs = gd.index_select(g, d, index, bounds=policy, fill_value=0 if policy == "fill" else None)
    if v["alpha"] is not None:
        gs = gs * v["alpha"]
    return _after(g.astype(x.dtype), index).reshape(shape_x), gs.astype(source.dtype).reshape(shape_s)


def _grad_scatter_reduce(v):
    x, index, src, g = _lifted(v["input"], v["index"], v["src"], v["grad_output"])
    d = v["dim"] % x.ndim
    index = _validated(index, "grad::scatter_reduce", "gather", _along_dim(d, x.shape[d]), _READ_OF[v["bounds"]])
    block = src[tuple(slice(0, n) for n in index.shape)]
    gi, gs = _reduce_grads(g, x, d, index, block, v, one_d=False)
    return (gi.astype(x.dtype).reshape(np.shape(v["input"])),
            _pad_to(gs, src.shape).astype(src.dtype).reshape(np.shape(v["src"])))


def _grad_index_reduce(v):
    x, index, source, d = _index_operands(v, "grad::index_reduce")
    g = _dask(v["grad_output"]).reshape(x.shape)
    gi, gs = _reduce_grads(g, x, d, index, source, v, one_d=True)
    return (gi.astype(x.dtype).reshape(np.shape(v["input"])),
            gs.astype(source.dtype).reshape(np.shape(v["source"])))


def _reduce_grads(g, x, d, index, s, v, one_d):
    """The gradients of scatter_reduce (``one_d``: index_reduce's 1-d index along ``d``) as the
    library's ``reduce_core`` composes them, each gather, scatter and reduction a graph of
    gather.dask's: ``(d input, d src block)`` in the wide type."""
    import dask.array as da

    from . import dask as gd

    reduce, include_self, parity = v["reduce"], v["include_self"], v["parity"]
    write, read = v["bounds"], _READ_OF[v["bounds"]]
    w = _wide(x.dtype)
    g, x, s = g.astype(w), x.astype(w), s.astype(w)
    fill = 0 if read == "fill" else None

    def gat(a):
        if one_d:
            return gd.index_select(a, d, index, bounds=read, fill_value=fill)
        return gd.gather(a, d, index, bounds=read, fill_value=fill)

    def add(base, vals):
        return gd.scatter_add(base, d, index, vals, bounds=write)

    def red(base, vals, how):
        return gd.scatter_reduce(base, d, index, vals, how, include_self, bounds=write)

    def hit():
        return add(_zeros(x.shape, np.int64, x), da.ones(s.shape, dtype=np.int64, chunks=s.chunks)) > 0

    if index.size == 0:
        if parity == "correct" or reduce in ("sum", "mean"):
            return g, _zeros(s.shape, w)
        if reduce in ("amax", "amin"):
            e = (x == x).astype(w)  # the result is x itself
            return e * (g / e), _zeros(s.shape, w)
        m = da.where(x == 0, 1, x)
        return g * m / m, _zeros(s.shape, w)
    ones = da.ones(s.shape, dtype=w, chunks=s.chunks)
    if reduce == "sum":
        gi, gs = g, gat(g)
    elif reduce == "mean":
        n = add(da.full(x.shape, float(include_self), dtype=w, chunks=x.chunks), ones)
        gi = g / da.maximum(n, 1)
        gs = gat(gi)
    elif reduce in ("amax", "amin"):
        r = red(x, s, reduce)
        value = gat(r)
        self_is = (x == r).astype(w)
        if not include_self and parity == "correct":
            self_is = da.where(hit(), 0, self_is)  # an excluded self takes no share
        src_is = (s == value).astype(w)
        share = g / add(self_is, src_is)
        gi = self_is * share
        gs = gat(share) * src_is
    else:  # prod
        r = red(x, s, "prod")
        masked_self = da.where(x == 0, 1, x)
        gi = g * red(masked_self, s, "prod") / masked_self
        zeros_seen = gat(add(_zeros(x.shape, w, x), (s == 0).astype(w)))
        single = (s == 0) & (zeros_seen == 1)
        with_zero = gat(g * red(x, da.where(single, 1, s), "prod"))
        plain = gat(g * r)
        gs = da.where(single, with_zero, plain / da.where(s == 0, 1, s))
    if not include_self:
        gi = da.where(hit(), 0, gi)
    if parity == "correct" and reduce in ("amax", "amin", "prod"):
        gi = da.where(hit(), gi, g)  # untouched positions are x itself
    return _after(gi, index), gs


def _grad_select_batched(v):
    import dask.array as da

    from . import dask as gd

    x, g, index = _dask(v["input"]), _dask(v["grad_output"]), _dask(v["index"])
    axis, b = v["axis"] % x.ndim, v["batch_dims"]
    n, w = x.shape[axis], _wide(x.dtype)
    table = lambda ib: _table(ib.shape[:b] + (1,) * (axis - b) + (n,) + (1,) * (x.ndim - axis - 1))  # noqa: E731
    index = _validated(index, "grad::select_batched", "select_batched", lambda ib: (table(ib), axis, ib, b),
                       v["bounds"])
    picks = int(np.prod(index.shape[b:], dtype=np.int64))
    if picks == 0 or x.size == 0:
        return _after(_zeros(x.shape, x.dtype, x), index)
    # A gather's gradient: the index's trailing dims as one along axis, the index spread (stride 0)
    # over the dims between the batch and axis and after axis.
    shape = x.shape[:axis] + (picks,) + x.shape[axis + 1:]
    g = g.reshape(shape)
    spread = index.reshape(index.shape[:b] + (1,) * (axis - b) + (picks,) + (1,) * (x.ndim - axis - 1))
    spread = spread.rechunk(tuple(g.chunks[a] if spread.shape[a] != 1 else (1,) for a in range(x.ndim)))
    spread = da.broadcast_to(spread, shape, chunks=g.chunks)
    gi = gd.scatter_add(_zeros(x.shape, w, x), axis, spread, g.astype(w), bounds=_WRITE_OF[v["bounds"]])
    return gi.astype(x.dtype)


def _hit(x, d, index, bounds):
    """Where the writes of a 1-D index along ``d`` (or of an index of x's rank) land in ``x``, as
    a mask that broadcasts against it."""
    import dask.array as da

    from . import dask as gd

    ones = da.ones(index.shape, dtype=np.int64, chunks=index.chunks)
    if index.ndim == 1 and x.ndim != 1 or d is None:
        n = x.shape[d] if d is not None else x.size
        hit = gd.scatter_add(_zeros((n,), np.int64), 0, index, ones, bounds=bounds) > 0
        return hit if d is None else hit.reshape((1,) * d + (n,) + (1,) * (x.ndim - d - 1))
    return gd.scatter_add(_zeros(x.shape, np.int64, x), d, index, ones, bounds=bounds) > 0


def _grad_scatter(v):
    import dask.array as da

    x, index, g = _lifted(v["input"], v["index"], v["grad_output"])
    src = v["src"]
    value_form = src is None or not hasattr(src, "shape")
    name = "grad::scatter_value" if value_form else "grad::scatter"
    d = v["dim"] % x.ndim
    shape_x = np.shape(v["input"])
    if index.size == 0:
        gi = g.reshape(shape_x)
        return gi if value_form else (gi, _zeros(np.shape(src), _dask(src).dtype))
    index = _validated(index, name, "gather", _along_dim(d, x.shape[d]), _READ_OF[v["bounds"]])
    src = _scatter_src(v, x, index)
    if v["reduce"] is not None:  # the legacy reduce= of scatter: into self
        how = {"add": "sum", "multiply": "prod"}[v["reduce"]]
        gi, gs = _grad_scatter_reduce({**v, "index": index, "src": src, "reduce": how, "include_self": True,
                                       "parity": "correct"})  # as the library's grad.scatter
        return gi if value_form else (gi, gs)
    gi = da.where(_hit(x, d, index, v["bounds"]), 0, g).reshape(shape_x)
    if value_form:
        return gi
    return gi, _grad_plain_src(g, d, index, _dask(src), v)


def _grad_plain_src(g, d, index, src, v):
    """A plain write's gradient for its source: the read of grad_output where each element went."""
    from . import dask as gd

    policy = _READ_OF[v["bounds"]]
    gs = gd.gather(g, d, index, bounds=policy, fill_value=0 if policy == "fill" else None)
    return _pad_to(gs, src.shape).astype(src.dtype).reshape(np.shape(v["src"]))


def _grad_index_copy(v):
    import dask.array as da

    from . import dask as gd

    x, index, source, d = _index_operands(v, "grad::index_copy")
    g = _dask(v["grad_output"]).reshape(x.shape)
    shape_x, shape_s = np.shape(v["input"]), np.shape(v["source"])
    if index.size == 0:
        return _after(g, index).reshape(shape_x), _zeros(shape_s, source.dtype)
    policy = _READ_OF[v["bounds"]]
    gs = gd.index_select(g, d, index, bounds=policy, fill_value=0 if policy == "fill" else None)
    return da.where(_hit(x, d, index, v["bounds"]), 0, g).reshape(shape_x), gs.astype(source.dtype).reshape(shape_s)


def _grad_index_fill(v):
    import dask.array as da

    (x,) = _lifted(v["input"])
    g = _dask(v["grad_output"]).reshape(x.shape)
    d = v["dim"] % x.ndim
    index = _fill_index(v, x, d, "grad::index_fill")
    if index.size == 0:
        return _after(g, index).reshape(np.shape(v["input"]))
    return da.where(_hit(x, d, index, v["bounds"]), 0, g).reshape(np.shape(v["input"]))


def _grad_put(v):
    import dask.array as da

    from . import dask as gd

    g, x, source = _dask(v["grad_output"]), _dask(v["input"]), _dask(v["source"])
    index = _put_index(v, x, "grad::put")
    if index.size == 0:
        return _after(g, index), _zeros(source.shape, source.dtype)
    policy = _READ_OF[v["bounds"]]
    gs = gd.take(g.reshape(-1), index, bounds=policy, fill_value=0 if policy == "fill" else None)
    gi = _after(g, index) if v["accumulate"] else da.where(_hit(x, None, index, v["bounds"]).reshape(x.shape), 0, g)
    return gi, gs.reshape(source.shape).astype(source.dtype)


def _grad_masked_select(v):
    import dask.array as da

    from . import dask as gd

    g, x, mask = _dask(v["grad_output"]), _dask(v["input"]), _dask(v["mask"])
    _sizes_known("grad::masked_select", g)
    shape = np.broadcast_shapes(x.shape, mask.shape)
    flat, m, rank = _masked(da.broadcast_to(x, shape), mask)
    w = _wide(x.dtype)
    gi = da.where(m, gd.take(g, rank, bounds="fill", fill_value=0), 0).astype(w).reshape(shape)
    # The gradient of the broadcast: summed over the axes input was broadcast along.
    lead = len(shape) - x.ndim
    spread = tuple(range(lead)) + tuple(a + lead for a in range(x.ndim) if x.shape[a] == 1 and shape[a + lead] != 1)
    if spread:
        gi = gi.sum(axis=spread).reshape(x.shape)

    def check(count):
        if int(count) != g.shape[0]:
            grown = np.zeros(shape, bool)
            grown.reshape(-1)[:int(count)] = True
            _native.grad.masked_select(_stand(g), _stand(x, shape), grown)
        return count

    return _counted(gi.astype(x.dtype), m, check)


def _sizes_known(name, a):
    if any(s != s for s in a.shape):
        raise refused(f"{name}: grad_output has chunks of unknown sizes {a.chunks} (as masked_select's output "
                      "has), and its elements must be matched with the mask's true positions",
                      "call `grad_output.compute_chunk_sizes()` first (it computes the blocks' sizes)")


def _grad_masked_scatter(v):
    import dask.array as da

    g, x, source = _dask(v["grad_output"]), _dask(v["input"]), _dask(v["source"])
    flat, m, rank = _masked(x, v["mask"])
    values = g.reshape(-1).rechunk(flat.chunks)
    gi = da.where(m, 0, values).reshape(x.shape)
    gs = _by_rank(m, values, source.size, max(1, *flat.chunks[0])).reshape(source.shape)
    check = _enough(v, "grad::masked_scatter", x, source)
    return _counted(gi, m, check), _counted(gs, m, check)


def _by_rank(m, values, size, step):
    """``out[j] = values[p]`` for the ``j``-th true position ``p`` of the flat mask ``m`` (0 past the
    last one), in blocks of ``step``: each block walks the mask's blocks in order, with every
    block's count of true positions."""
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    from .dask import _same

    counts = m.map_blocks(_true_count, chunks=((1,) * m.numblocks[0],), dtype=np.int64).rechunk(-1)
    edges = list(range(0, size, step)) + [size]
    token = tokenize(m, values, size, step)
    walk, name = "gather-by-rank-step-" + token, "gather-by-rank-" + token
    dsk = {}
    for c in range(len(edges) - 1):
        prev = None
        for k in range(m.numblocks[0]):
            key = (walk, c, k)
            dsk[key] = (_rank_step, prev, (m.name, k), (values.name, k), (counts.name, 0), k, edges[c],
                        edges[c + 1], values.dtype)
            prev = key
        dsk[(name, c)] = (_same, prev)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[m, values, counts])
    chunks = (tuple(np.diff(edges)),) if size else ((0,),)
    return da.Array(graph, name, chunks, meta=np.empty((0,), values.dtype))


def _true_count(block):
    return np.array([np.count_nonzero(block)], np.int64)


def _rank_step(prev, mb, vb, counts, k, lo, hi, dtype):
    out = np.zeros(hi - lo, dtype) if prev is None else prev
    start = int(counts[:k].sum())
    first, last = max(lo, start), min(hi, start + int(counts[k]))
    if first < last:
        out[first - lo:last - lo] = vb[np.flatnonzero(mb)[first - start:last - start]]
    return out


def _grad_repeat_interleave(v):
    import dask.array as da

    from . import dask as gd

    g, x, r, dim = _dask(v["grad_output"]), _dask(v["input"]), v["repeats"], v["dim"]
    shape = (x.size,) if dim is None or x.ndim == 0 else x.shape
    d = 0 if dim is None or x.ndim == 0 else dim % x.ndim
    w = _wide(x.dtype)
    g = g.astype(w)
    k = _scalar(r)
    if k is not None:  # each slice's copies side by side
        gi = g.reshape(shape[:d] + (shape[d], k) + shape[d + 1:]).sum(axis=d + 1)
        return gi.astype(x.dtype).reshape(x.shape)
    _sizes_known("grad::repeat_interleave", g)
    r = _dask(r).reshape(-1)
    if r.shape[0] == 1 and shape[d] != 1:
        r = da.broadcast_to(r, (shape[d],))
    cum = da.cumsum(_repeats_checked(r, "grad::repeat_interleave").astype(np.int64))
    ids = _ids(cum, da.arange(g.shape[d], chunks=(g.chunks[d],)))
    # The library's error for a grad_output of another length than the repeats' sum, from
    # stand-ins with that sum.
    error = lambda total: _native.grad.repeat_interleave(  # noqa: E731
        _stand(g), _stand(x), _sized({"repeats": r}, total)["repeats"], dim)
    ids = _after(ids, _sum_check(cum, g.shape[d], error))
    if g.shape[d] == 0:
        return _after(_zeros(x.shape, x.dtype, x), ids)
    gi = gd.scatter_add(_zeros(shape, w), d, ids, g.reshape(shape[:d] + (g.shape[d],) + shape[d + 1:]))
    return gi.astype(x.dtype).reshape(x.shape)

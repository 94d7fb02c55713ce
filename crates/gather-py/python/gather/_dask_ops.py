"""``gather.<op>`` and ``gather.grad.<op>`` called with a Dask array: the call builds a Dask graph
(Dask in, Dask out) from :mod:`gather.dask`'s routed reads and reduction trees, so an array
larger than memory is never pulled into one process.

The ops with a graph are the reads ``gather``, ``take``, ``index_select`` and ``take_along_dim``
and the writes ``scatter_add``, ``scatter_reduce``, ``index_add`` and ``index_reduce``, with
their gradients (each a graph of the same reads and trees, as the library composes them), and
``sort``, ``argsort`` and ``topk`` with theirs, per block with the dim whole, and the plain writes
``scatter``, ``index_copy`` and ``index_fill`` (without gradients). The others
(``masked_select``, ``put``, ``repeat_interleave``, ...) refuse a Dask array with the fix rather
than compute it whole behind the caller's back.

Errors come as the in-memory call gives them: the library's own checks of dims, shapes, dtypes
and arguments run when the graph is built (on stand-ins, see :func:`gather._calls.check`); a bad
index value is reported at compute time, with its value and its position in the whole index."""

import inspect
import re
import sys

import numpy as np

from . import _calls, _native, _shapes
from ._errors import IndexOutOfBoundsError, refused

READS = ("gather", "take", "index_select", "take_along_dim")
WRITES = ("scatter_add", "scatter_reduce", "index_add", "index_reduce")
# Ops along one dim, run per block with that dim whole.
ALONG = ("sort", "argsort", "topk")
# Plain writes (the last write in index order stays), without a gradient here.
SETS = ("scatter", "index_copy", "index_fill")
_ARRAYS = {"input", "src", "source", "index", "indices", "grad_output"}
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
    return _run(getattr(_native, op), op, args, kwargs, READS + WRITES + ALONG + SETS, "gather.", "_")


def grad(op, args, kwargs):
    """``gather.grad.<op>(*args, **kwargs)`` with a Dask array among the arguments."""
    return _run(getattr(_native.grad, op), op, args, kwargs, READS + WRITES + ALONG, "gather.grad.", "_grad_")


def _run(native, op, args, kwargs, ops, module, prefix):
    """``native`` (``module`` + ``op``) as the graph its function here (``prefix`` + ``op``)
    builds, after the library's checks; refused where ``op`` is not in ``ops``."""
    v = _bind(native, op, args, kwargs)
    if op not in ops:
        raise _no_graph(op, module + op)
    _check(native, v)
    if op in ALONG:
        return _along_blocks(native, v, op)
    return globals()[prefix + op](v)


def refuse_in_place(op):
    return refused(
        f"{op}: Dask arrays are immutable, so the in-place forms cannot write into one",
        f"call gather.{op[:-1]} (out of place), which returns a Dask array",
    )


def _no_graph(op, name, ops=None):
    ops = ops or ", ".join(READS + WRITES + ALONG) + " and their gradients, and " + ", ".join(SETS)
    return refused(
        f"{op}: {name} has no Dask graph, and computing a Dask array whole is left to the caller",
        f"call `.compute()` on the Dask arrays first where they fit in memory; the ops that run on "
        f"Dask arrays are {ops}",
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


# pytorch_scatter's functions that gather.dask's trees compute: one value per group.
_TS_REDUCE = {"scatter": None, "scatter_sum": "sum", "scatter_add": "sum", "scatter_mul": "mul",
              "scatter_mean": "mean"}


def torch_scatter(name, fn, args, kwargs):
    """``gather.torch_scatter.<name>(*args, **kwargs)`` with a Dask array among the arguments."""
    from . import dask as gd

    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    v = bound.arguments
    if v.get("out") is not None:
        raise refused(f"{name}: `out` would be written in place, and Dask arrays are immutable",
                      f"add the result to it instead: `out + torch_scatter.{name}(...)`")
    if name in _TS_REDUCE:
        return gd.scatter(v["src"], v["index"], v["dim"], v["dim_size"], _TS_REDUCE[name] or v["reduce"])
    # The segments' min and max give (values, arg); the trees give values.
    if name == "segment_coo" and v["reduce"] not in ("min", "max"):
        return gd.segment_coo(v["src"], v["index"], v["dim_size"], v["reduce"])
    if name == "segment_csr" and v["reduce"] not in ("min", "max"):
        return gd.segment_csr(v["src"], v["indptr"], v["reduce"])
    names = ", ".join(list(_TS_REDUCE) + ["segment_coo", "segment_csr"])
    raise _no_graph(name, f"gather.torch_scatter.{name}", f"{names} (for min and max, the values alone: "
                    "scatter(..., reduce=\"max\"))")


def _bind(native, op, args, kwargs):
    import dask.array as da

    bound = inspect.signature(native).bind(*args, **kwargs)
    bound.apply_defaults()
    v = dict(bound.arguments)
    if v.get("dtype") is not None:
        raise refused(f"{op}: dtype={v['dtype']!r} (bit patterns) is not read from Dask arrays",
                      "convert bfloat16 bit patterns to float32 first: "
                      "`(bits.astype(np.uint32) << 16).view(np.float32)`")
    for name in _ARRAYS & v.keys():
        if v[name] is not None and not isinstance(v[name], da.Array) and not np.isscalar(v[name]):
            v[name] = np.asarray(v[name])
    return v


def _check(native, v):
    """The library's checks of the call, when the graph is built (see gather._calls.check)."""
    _calls.check(native, v, [n for n in _ARRAYS & v.keys() if hasattr(v[n], "shape")])


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
    import dask.array as da

    from . import dask as gd

    x, index = _lifted(v["input"], v["index"])
    src = v["src"]
    if src is None or not hasattr(src, "shape"):  # the number form
        src = da.full(index.shape, v["value"] if src is None else src, dtype=x.dtype, chunks=index.chunks)
    (src,) = _lifted(src)
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


def _index_copy(v):
    from . import dask as gd

    x, index, source, d = _index_operands(v, "index_copy")
    if index.size == 0:
        return x.reshape(np.shape(v["input"]))
    out = gd._scatter_reduce(x, d, index, source, None, True, None, v["bounds"], v["fill_value"], "scatter")
    return out.reshape(np.shape(v["input"]))


def _index_fill(v):
    import dask.array as da

    (x,) = _lifted(v["input"])
    index = _dask(v["index"]).reshape(-1)
    d = v["dim"] % x.ndim
    shape = x.shape[:d] + (index.size,) + x.shape[d + 1:]
    source = da.full(shape, v["value"], dtype=x.dtype)
    return _index_copy({**v, "source": source})


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
    index = _validated(index, "scatter_reduce", "gather", _along_dim(d, x.shape[d]), _READ_OF[v["bounds"]])
    block = src[tuple(slice(0, n) for n in index.shape)]
    gi, gs = _reduce_grads(g, x, d, index, block, v, one_d=False)
    return (gi.astype(x.dtype).reshape(np.shape(v["input"])),
            _pad_to(gs, src.shape).astype(src.dtype).reshape(np.shape(v["src"])))


def _grad_index_reduce(v):
    x, index, source, d = _index_operands(v, "index_reduce")
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

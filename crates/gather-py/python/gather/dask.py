"""gather's ops on Dask arrays, for data beyond one machine's memory.

Dask is the engine: these functions build Dask graphs whose tasks run the library's kernels on
NumPy blocks, and return Dask arrays (call ``.compute()``, or ``.persist()`` on a
``distributed`` cluster). Nothing is computed when they are called, except the largest index when
``dim_size`` is not given (as pytorch_scatter does).

Reads (``take``, ``index_select``, ``gather``) route the index by chunk: every block of the index
is split by the block of the table each value falls into, each piece is read where that table
block lives, and the pieces are put back in index order. A table block is never copied whole to
another task, and an index that is a NumPy array is routed once, on the client, so the graph only
holds the pieces that exist.

Reductions (``scatter``, ``scatter_add``, ``scatter_reduce``, ``segment_coo``, ``segment_csr``,
``bincount``) are trees, as ``dask.array.reduction`` builds them, with chains at the leaves: each
run of ``split_every`` consecutive blocks of ``src`` is reduced by the library's kernel, one block
after the other, into one dense ``(dim_size, ...)`` block of groups with their counts; the chains
then combine ``split_every`` at a time (add, multiply, max, min; counts add), and the root applies
the op's rule for empty groups. Every group is reduced in index order within a block, and blocks
and chains in block order, so a result is deterministic for a given chunking.

The torch-named ops (``take``, ``index_select``, ``gather``, ``scatter_add``, ``scatter_reduce``)
take the in-memory functions' keyword-only ``bounds=`` and ``fill_value=`` (see :mod:`gather`):
reads route each index value where the policy sends it (and read no block where ``"fill"``
fills), writes pass the policy to every block's kernel (``"drop"`` skips a write, and counts no
member for ``"mean"``). A misused policy raises the library's error when the graph is built; an
index value that is an error raises at compute time, with its position in the whole index.

The kernels are parallel (rayon) inside each task: give worker processes that run one task at a
time the machine's cores, or set ``RAYON_NUM_THREADS`` to the threads a task may use (e.g.
``LocalCluster(..., threads_per_worker=1, env={"RAYON_NUM_THREADS": "1"})`` with one worker per
core), so that tasks do not fight over the cores.

Long computations show progress with Dask's own tools: ``dask.diagnostics.ProgressBar`` for the
local schedulers, ``distributed.progress`` on a cluster (see :func:`progress`).

>>> import numpy as np, dask.array as da
>>> from gather import dask as gd
>>> src = da.from_array(np.arange(12.0).reshape(6, 2), chunks=(2, 2))
>>> index = da.from_array(np.array([0, 2, 0, 1, 2, 2]), chunks=2)
>>> gd.scatter(src, index, dim=0, reduce="sum").compute()
array([[ 4.,  6.],
       [ 6.,  7.],
       [20., 23.]])
>>> gd.take(src, np.array([5, 0]), axis=0).compute()
array([[10., 11.],
       [ 0.,  1.]])
"""

import itertools
import math
import uuid

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from . import _native
from ._errors import IndexOutOfBoundsError

__all__ = [
    "take",
    "index_select",
    "gather",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "segment_coo",
    "segment_csr",
    "bincount",
    "from_npy",
    "progress",
]

_REDUCE = {"sum": "sum", "add": "sum", "prod": "prod", "mul": "prod", "mean": "mean",
           "amax": "amax", "max": "amax", "amin": "amin", "min": "amin"}


def _as_dask(a, like=None):
    if isinstance(a, da.Array):
        return a
    a = np.asarray(a)
    return da.from_array(a, chunks=like if like is not None else "auto")


def _known(op, **arrays):
    """Raises a ValueError with the fix when an array's chunk sizes are unknown (NaN, as after
    boolean indexing), which aligning its blocks with another array's needs."""
    for name, a in arrays.items():
        if any(math.isnan(c) for c in a.shape):
            raise ValueError(
                f"{op}: {name} has unknown chunk sizes {a.chunks} (as after boolean indexing), and its "
                f"blocks must be aligned with the other arrays'\nhint: call `{name}.compute_chunk_sizes()` first"
            )


def _norm_dim(dim, ndim, op):
    if not -ndim <= dim < max(ndim, 1):
        _native.gather(np.zeros((1,) * ndim), dim, np.zeros((1,) * ndim, np.int64))  # the library's error
    return dim % max(ndim, 1)


def _in_whole(call, origin, flat_shape=None, along=None):
    """``call()``, with a bad index value's position in its error moved from the block's index to
    the whole index: ``origin`` is the block's first position; with ``flat_shape`` the block is a
    run of the flattened index of that shape; with ``along`` it is a 1-D index spread along that
    axis of ``src``."""
    try:
        return call()
    except IndexOutOfBoundsError as e:
        if e.coordinate is None:
            raise
        if along is not None:
            pos = [origin[0] + e.coordinate[along]]
        else:
            pos = [o + c for o, c in zip(origin, e.coordinate)]
        if flat_shape is not None:
            pos = [int(v) for v in np.unravel_index(pos[0], flat_shape)]
        raise _reworded(e, str(e).replace(f"position {e.coordinate}", f"position {pos}", 1), pos) from None


def _reworded(e, text, coordinate):
    """The library's index error ``e`` with the message ``text`` and the position ``coordinate``."""
    moved = type(e)(text)
    moved.hint, moved.index_value, moved.coordinate = e.hint, e.index_value, coordinate
    return moved


def _origin(chunks, block):
    """The first position of block ``block`` of an array with ``chunks``."""
    return tuple(int(sum(c[:b])) for c, b in zip(chunks, block))


# ---------------------------------------------------------------------------------------------
# Reads


def _read_fill(op, dtype, bounds, fill_value):
    """Checks a read's policy by the library's own call on a two-element table (so a misuse raises
    its error, at graph time), and returns the fill value as the library converts it to ``dtype``
    (None unless ``bounds="fill"``)."""
    table, index = np.zeros(2, dtype), np.array([0, 2] if bounds == "fill" else [0])
    args = (table, index) if op is _native.take else (table, 0, index)
    got = op(*args, bounds=bounds, fill_value=fill_value)
    return got[1] if bounds == "fill" else None


def _bad(ib, n, bounds, wraps):
    """Whether some value of ``ib`` is an error under ``bounds`` for a dimension of size ``n``
    (``wraps``: negative values count from the end under the default policy, as in torch.take)."""
    if not ib.size or bounds == "fill":
        return False
    if bounds == "clip":
        return n == 0
    lo = -n if (wraps or bounds == "wrap") else 0
    return bool(ib.min() < lo or ib.max() >= n)


def _positions(ib, n, bounds, wraps):
    """``ib`` mapped into ``0..n`` under the policy, and which values read (None: all of them, or
    every one that lands in ``0..n``; values that are errors land outside and read nothing)."""
    if bounds == "clip":
        return np.clip(ib, 0, max(n - 1, 0)), None
    if bounds == "fill":
        keep = (ib >= 0) & (ib < n)
        return np.where(keep, ib, 0), keep
    if wraps or bounds == "wrap":
        return np.where(ib < 0, ib + n, ib), None
    return ib, None


def _in_block(ib, n, bounds, wraps, lo, hi):
    """``ib`` mapped by :func:`_positions`, and which of its values read the table block that
    holds positions ``lo..hi``."""
    w, keep = _positions(ib, n, bounds, wraps)
    here = (w >= lo) & (w < hi)
    return w, here if keep is None else here & keep


def _take_piece(xblock, ib, lo, hi, n, axis, bounds, wraps):
    """The values of one table block for the index values that fall in it: (positions, values)."""
    w, here = _in_block(ib, n, bounds, wraps, lo, hi)
    pos = np.nonzero(here)[0]
    return pos, _native.index_select(xblock, axis, w[pos] - lo)


def _take_assemble(ib, n, axis, block_shape, dtype, bounds, fill, start, idx_shape, wraps, *pieces):
    """One output block from its pieces, in index order (fill where the policy reads no block)."""
    if _bad(ib, n, bounds, wraps):
        # The library's error (value, position and hint) from a stride-0 table of n elements
        # (along `axis` for index_select, whose error names the dim).
        if wraps:
            table = np.broadcast_to(np.zeros(1, np.int8), (n,))
            call = lambda: _native.take(table, ib, bounds=bounds)  # noqa: E731
        else:
            table = np.broadcast_to(np.zeros(1, np.int8), (1,) * axis + (n,) + (1,) * (len(block_shape) - axis - 1))
            call = lambda: _native.index_select(table, axis, ib, bounds=bounds)  # noqa: E731
        if start is None:
            call()
        _in_whole(call, (start,), idx_shape)
    shape = list(block_shape)
    shape[axis] = ib.size
    out = np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)
    for pos, vals in pieces:
        if pos.size:
            _native.index_copy_(out, axis, pos, vals)
    return out


def _route(values, bounds, policy, wraps):
    """For a NumPy index: which table blocks each index block reads (nonempty pieces only)."""
    n = bounds[-1]
    w, keep = _positions(values, n, policy, wraps)
    w = w if keep is None else w[keep]
    return {k for k in np.unique(np.searchsorted(bounds, w[(w >= 0) & (w < n)], side="right") - 1)}


def take(x, index, axis=0, *, bounds=None, fill_value=None):
    """``x`` read at ``index`` along ``axis`` (``np.take`` with an axis; negative indices wrap, as in
    ``torch.take``): the output has ``x.shape[:axis] + index.shape + x.shape[axis + 1:]``.

    ``x`` is a Dask array (or an array to wrap); ``index`` a NumPy or Dask integer array of any
    shape. Out-of-range values raise :class:`gather.IndexOutOfBoundsError` at compute time, unless
    ``bounds`` says otherwise (``"wrap"``, ``"clip"``, or ``"fill"`` with ``fill_value``, as in
    :func:`gather.take`)."""
    return _take(x, index, axis, bounds, fill_value, _native.take)


def _take(x, index, axis, policy, fill_value, op):
    x = _as_dask(x)
    axis = _norm_dim(axis, x.ndim, "take")
    fill = _read_fill(op, x.dtype, policy, fill_value)
    wraps = op is _native.take  # torch.take counts negative values from the end; index_select does not
    small = not isinstance(index, da.Array)
    idx_shape = tuple(np.shape(index))
    flat = _as_dask(np.asarray(index).reshape(-1) if small else index.reshape(-1),
                    like=max(1, max(x.chunks[axis])) if small else None)
    n = x.shape[axis]
    bounds = np.concatenate([[0], np.cumsum(x.chunks[axis])])
    token = tokenize(x, flat, axis, policy, fill, wraps)
    piece_name, out_name = "gather-take-piece-" + token, "gather-take-" + token
    dsk = {}
    others = [range(nb) for a, nb in enumerate(x.numblocks) if a != axis]
    values = np.asarray(index).reshape(-1) if small else None
    # A Dask index may have unknown chunk sizes (NaN, as after boolean indexing): its tasks read
    # as well, but report a bad value at its position in its block.
    known = not any(math.isnan(c) for c in flat.chunks[0])
    offsets = np.concatenate([[0], np.cumsum(flat.chunks[0])]) if known else None
    for c in range(flat.numblocks[0]):
        needed = (_route(values[int(offsets[c]):int(offsets[c + 1])], bounds, policy, wraps) if small
                  else range(len(bounds) - 1))
        for j in itertools.product(*others):
            pieces = []
            for k in sorted(needed):
                xkey = (x.name,) + j[:axis] + (k,) + j[axis:]
                pkey = (piece_name, c, k) + j
                dsk[pkey] = (_take_piece, xkey, (flat.name, c), int(bounds[k]), int(bounds[k + 1]), n, axis, policy, wraps)
                pieces.append(pkey)
            block_shape = tuple(x.chunks[a][(j[:axis] + (0,) + j[axis:])[a]] for a in range(x.ndim))
            okey = (out_name,) + j[:axis] + (c,) + j[axis:]
            dsk[okey] = (_take_assemble, (flat.name, c), n, axis, block_shape, x.dtype, policy, fill,
                         int(offsets[c]) if known else None, idx_shape, wraps) + tuple(pieces)
    chunks = x.chunks[:axis] + (flat.chunks[0],) + x.chunks[axis + 1:]
    graph = HighLevelGraph.from_collections(out_name, dsk, dependencies=[x, flat])
    out = da.Array(graph, out_name, chunks, meta=np.empty((0,) * x.ndim, x.dtype))
    if len(idx_shape) != 1:
        out = out.reshape(x.shape[:axis] + idx_shape + x.shape[axis + 1:])
    return out


def index_select(input, dim, index, *, bounds=None, fill_value=None):
    """``torch.index_select`` on a Dask array: the slices ``index[k]`` along ``dim`` (a 1-D index;
    as in PyTorch, negative values are out of bounds unless ``bounds`` says otherwise; ``bounds``
    and ``fill_value`` as in :func:`gather.index_select`)."""
    if len(np.shape(index)) > 1:
        raise ValueError(f"index_select: index must be 0-d or 1-d, got {len(np.shape(index))} dims")
    return _take(input, index, dim, bounds, fill_value, _native.index_select)


def _gather_step(prev, xblock, ib, lo, hi, n, dim, bounds, fill, origin):
    """``prev`` with the elements whose index falls in ``[lo, hi)`` read from ``xblock``."""
    if prev is None:
        if _bad(ib, n, bounds, False):
            # The library's error for the first bad value and its position in the block, from a
            # stride-0 table of the block's shape.
            shape = list(ib.shape)
            shape[dim] = n
            table = np.broadcast_to(np.zeros(1, np.int8), shape)
            _in_whole(lambda: _native.gather(table, dim, ib, bounds=bounds), origin)
        prev = np.zeros(ib.shape, xblock.dtype) if fill is None else np.full(ib.shape, fill, xblock.dtype)
    w, mask = _in_block(ib, n, bounds, False, lo, hi)
    if mask.any():
        sub = xblock[tuple(slice(0, s) if a != dim else slice(None) for a, s in enumerate(ib.shape))]
        got = _native.gather(sub, dim, np.where(mask, w - lo, 0))
        np.copyto(prev, got, where=mask)
    return prev


def gather(input, dim, index, *, bounds=None, fill_value=None):
    """``torch.gather`` on Dask arrays: ``out[i][j] = input[index[i][j]][j]`` for ``dim = 0``; the
    output has the index's shape (``index.shape[d] <= input.shape[d]`` off ``dim``; as in PyTorch,
    negative values are out of bounds unless ``bounds`` says otherwise, as in
    :func:`gather.gather`). Each output block walks the table blocks along ``dim`` in order, so a
    task holds one table block at a time."""
    x = _as_dask(input)
    dim = _norm_dim(dim, x.ndim, "gather")
    fill = _read_fill(_native.gather, x.dtype, bounds, fill_value)
    index = _as_dask(index)
    _known("gather", index=index)
    if index.ndim != x.ndim or any(index.shape[a] > x.shape[a] for a in range(x.ndim) if a != dim):
        # The library's shape error, with its numbers and hint.
        _native.gather(np.zeros(x.shape, np.int8) if x.size < 2**20 else np.zeros((1,) * x.ndim, np.int8),
                       dim, np.zeros(index.shape, np.int64))
    # The index's blocks off dim follow the table's, so that each reads one table block.
    cut = tuple(
        index.chunks[a] if a == dim else _clip_chunks(x.chunks[a], index.shape[a]) for a in range(x.ndim)
    )
    index = index.rechunk(cut)
    n = x.shape[dim]
    edges = np.concatenate([[0], np.cumsum(x.chunks[dim])])
    token = tokenize(x, index, dim, bounds, fill)
    step, out_name = "gather-gather-step-" + token, "gather-gather-" + token
    dsk = {}
    for b in itertools.product(*[range(nb) for nb in index.numblocks]):
        prev = None
        for k in range(len(edges) - 1):
            xkey = (x.name,) + tuple(k if a == dim else b[a] for a in range(x.ndim))
            key = (step, k) + b
            dsk[key] = (_gather_step, prev, xkey, (index.name,) + b, int(edges[k]), int(edges[k + 1]), n, dim,
                        bounds, fill, _origin(index.chunks, b))
            prev = key
        dsk[(out_name,) + b] = (_same, prev)
    graph = HighLevelGraph.from_collections(out_name, dsk, dependencies=[x, index])
    return da.Array(graph, out_name, index.chunks, meta=np.empty((0,) * x.ndim, x.dtype))


def _select_step(prev, xblock, ib, lo, hi, n, axis, b, bounds, fill, origin):
    """``prev`` with the picks whose index falls in ``[lo, hi)`` read from ``xblock`` by
    select_batched (the index is never spread over the output's other dims)."""
    if prev is None:
        if _bad(ib, n, bounds, False):
            shape = list(xblock.shape)
            shape[axis] = n
            table = np.broadcast_to(np.zeros(1, np.int8), shape)
            _in_whole(lambda: _native.select_batched(table, axis, ib, b, bounds=bounds), origin)
        shape = xblock.shape[:axis] + ib.shape[b:] + xblock.shape[axis + 1:]
        prev = np.zeros(shape, xblock.dtype) if fill is None else np.full(shape, fill, xblock.dtype)
    w, mask = _in_block(ib, n, bounds, False, lo, hi)
    if mask.any():
        got = _native.select_batched(xblock, axis, np.where(mask, w - lo, 0), b)
        where = mask.reshape(ib.shape[:b] + (1,) * (axis - b) + ib.shape[b:] + (1,) * (xblock.ndim - axis - 1))
        np.copyto(prev, got, where=where)
    return prev


def _select_batched(x, axis, index, b, bounds, fill_value):
    """``gather.select_batched`` on Dask arrays (``axis`` and ``b`` normalised, the call checked):
    each output block walks the table blocks along ``axis`` in order, as :func:`gather` does, with
    the index's batch dims in the table's blocks."""
    fill = _read_fill(_native.gather, x.dtype, bounds, fill_value)
    index = index.rechunk(tuple(x.chunks[a] if a < b else index.chunks[a] for a in range(index.ndim)))
    n = x.shape[axis]
    edges = np.concatenate([[0], np.cumsum(x.chunks[axis])])
    token = tokenize(x, index, axis, b, bounds, fill)
    step, out_name = "gather-select-batched-step-" + token, "gather-select-batched-" + token
    chunks = x.chunks[:axis] + index.chunks[b:] + x.chunks[axis + 1:]
    picks = index.ndim - b
    dsk = {}
    for o in itertools.product(*[range(len(c)) for c in chunks]):
        batch, mid, ib, after = o[:b], o[b:axis], o[axis:axis + picks], o[axis + picks:]
        prev = None
        for k in range(len(edges) - 1):
            key = (step, k) + o
            dsk[key] = (_select_step, prev, (x.name,) + batch + mid + (k,) + after, (index.name,) + batch + ib,
                        int(edges[k]), int(edges[k + 1]), n, axis, b, bounds, fill, _origin(index.chunks, batch + ib))
            prev = key
        dsk[(out_name,) + o] = (_same, prev)
    graph = HighLevelGraph.from_collections(out_name, dsk, dependencies=[x, index])
    return da.Array(graph, out_name, chunks, meta=np.empty((0,) * len(chunks), x.dtype))


def _same(v):
    return v


def _clip_chunks(chunks, size):
    """``chunks`` cut at ``size`` (the blocks of a shorter array aligned with a longer one's)."""
    out, total = [], 0
    for c in chunks:
        if total >= size:
            break
        out.append(min(c, size - total))
        total += out[-1]
    return tuple(out) if out else (0,)


# ---------------------------------------------------------------------------------------------
# Reductions


def _identity(dtype, reduce):
    if reduce in ("sum", "mean", "set"):
        return 0
    if reduce == "prod":
        return 1
    if dtype == np.bool_:
        return reduce == "amin"
    info = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _spread(index, src, dim):
    """A 1-D index along ``dim`` as a view of ``src``'s shape (stride 0 off ``dim``)."""
    if index.ndim == src.ndim:
        return index
    shape = (1,) * dim + (-1,) + (1,) * (src.ndim - dim - 1)
    return np.broadcast_to(index.reshape(shape), src.shape)


def _wide(block):
    """float16 blocks reduce in float32 and round once at the root, as the library's kernels
    accumulate them (a chain of float16 partial sums would round, and overflow, per block)."""
    return block.astype(np.float32) if block.dtype == np.float16 else block


def _partial(sblock, iblock, dim, dim_size, reduce, bounds, origin):
    """The first block of a chain: fresh groups (the reduction's identity, no members), then the
    block reduced into them by :func:`_accumulate`."""
    shape = list(sblock.shape)
    shape[dim] = dim_size
    dtype = _wide(sblock[:0]).dtype
    ident = _identity(dtype, reduce)
    values = np.zeros(shape, dtype) if ident == 0 else np.full(shape, ident, dtype)
    counts = np.zeros(dim_size if iblock.ndim == 1 else shape, np.int64)
    return _accumulate((values, counts), sblock, iblock, dim, reduce, bounds, origin)


def _own(a):
    """``a`` if it can be written in place, else a copy (an array a worker received from another
    may be a read-only, misaligned view of the message)."""
    return a if a.flags.writeable and a.flags.aligned else a.copy()


def _accumulate(acc, sblock, iblock, dim, reduce, bounds, origin):
    """``acc`` (the previous block's groups) with one more block of ``src`` reduced into it by the
    library, in place: each chain has one accumulator, whose task is its only reader, and the
    library's in-place calls change nothing when they fail, so a retried task starts from the
    same state."""
    values, counts = _own(acc[0]), _own(acc[1])
    sblock = _wide(sblock)
    idx = _spread(iblock, sblock, dim)
    one_d = iblock.ndim == 1
    where = dict(origin=(origin[dim],) if one_d else origin, along=dim if one_d else None)
    if reduce in ("sum", "mean"):
        _in_whole(lambda: _native.scatter_add_(values, dim, idx, sblock, bounds=bounds), **where)
    elif reduce == "set":  # a plain write: the last in index order stays
        _in_whole(lambda: _native.scatter_(values, dim, idx, sblock, bounds=bounds), **where)
    else:
        _in_whole(lambda: _native.scatter_reduce_(values, dim, idx, sblock, reduce, bounds=bounds), **where)
    if iblock.ndim == 1:
        # The kernel has checked every value against dim_size under the policy.
        n = counts.shape[0]
        if bounds == "drop":
            iblock = iblock[(iblock >= 0) & (iblock < n)]
        elif bounds == "clip":
            iblock = np.clip(iblock, 0, n - 1)
        elif bounds == "wrap":
            iblock = np.where(iblock < 0, iblock + n, iblock)
        counts += np.bincount(iblock, minlength=n)[:n]
    else:
        ones = np.broadcast_to(np.ones(1, np.int64), sblock.shape)
        _native.scatter_add_(counts, dim, iblock, ones, bounds=bounds)
    return values, counts


def _combine(parts, reduce, dim):
    """Chains' groups combined in chain order, into the first (its task is its only reader); for
    plain writes a later chain's written groups replace the earlier ones."""
    values, counts = _own(parts[0][0]), _own(parts[0][1])
    op = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}.get(reduce)
    for v, c in parts[1:]:
        if op is None:  # "set"
            shape = (1,) * dim + (-1,) + (1,) * (v.ndim - dim - 1) if c.ndim == 1 else c.shape
            np.copyto(values, v, where=np.broadcast_to(c.reshape(shape) > 0, v.shape))
        else:
            op(values, v, out=values)
        counts += c
    return values, counts


def _tree(src, index, dim, dim_size, reduce, split_every, bounds=None):
    """(values, counts) of every group as two Dask arrays: values hold the reduction's identity
    where a group is empty; counts have dim_size entries (1-D index) or the output's shape.

    Each run of ``split_every`` consecutive blocks along ``dim`` is a chain that reduces its
    blocks one after the other into one accumulator (the first block's dense groups), and the
    chains combine as a tree, ``split_every`` at a time: one dense block per chain rather than
    one per block of ``src``."""
    one_d = index.ndim == 1
    index = index.rechunk((src.chunks[dim],) if one_d else src.chunks)
    split_every = max(2, split_every or 8)
    # A fresh token per call: the chains write into their accumulators in place, so two graphs
    # must never share a chain key (a second compute could pick up an accumulator that a first
    # one has already advanced).
    token = tokenize(src, index, dim, dim_size, reduce, split_every, bounds, uuid.uuid4().hex)
    aname = "gather-scatter-chain-" + token
    dsk = {}
    others = [range(nb) for a, nb in enumerate(src.numblocks) if a != dim]
    roots = {}
    for j in itertools.product(*others):
        level = []
        for k in range(src.numblocks[dim]):
            sb = j[:dim] + (k,) + j[dim:]
            ikey = (index.name, k) if one_d else (index.name,) + sb
            key = (aname, k) + j
            if k % split_every == 0:
                dsk[key] = (_partial, (src.name,) + sb, ikey, dim, dim_size, reduce, bounds, _origin(src.chunks, sb))
                level.append(key)
            else:
                dsk[key] = (_accumulate, level[-1], (src.name,) + sb, ikey, dim, reduce, bounds, _origin(src.chunks, sb))
                level[-1] = key
        depth = 0
        while len(level) > 1:
            depth += 1
            cname = f"gather-scatter-combine-{depth}-" + token
            nxt = []
            for g in range(math.ceil(len(level) / split_every)):
                key = (cname, g) + j
                dsk[key] = (_combine, level[g * split_every:(g + 1) * split_every], reduce, dim)
                nxt.append(key)
            level = nxt
        roots[j] = level[0]
    vname, cname = "gather-scatter-values-" + token, "gather-scatter-counts-" + token
    for j, root in roots.items():
        dsk[(vname,) + j[:dim] + (0,) + j[dim:]] = (_first, root)
        if one_d:
            if not j or all(v == 0 for v in j):
                dsk[(cname, 0)] = (_second, root)
        else:
            dsk[(cname,) + j[:dim] + (0,) + j[dim:]] = (_second, root)
    deps = [src, index]
    chunks = src.chunks[:dim] + ((dim_size,),) + src.chunks[dim + 1:]
    values = da.Array(HighLevelGraph.from_collections(vname, dsk, dependencies=deps), vname, chunks,
                      meta=np.empty((0,) * src.ndim, _wide(np.empty(0, src.dtype)).dtype))
    cdsk = HighLevelGraph.from_collections(cname, dsk, dependencies=deps)
    counts = da.Array(cdsk, cname, ((dim_size,),) if one_d else chunks, meta=np.empty((0,) * (1 if one_d else src.ndim), np.int64))
    return values, counts


def _first(pair):
    return pair[0]


def _second(pair):
    return pair[1]


def _prepare(src, index, dim, dim_size, op):
    src = _as_dask(src)
    dim = _norm_dim(dim, src.ndim, op)
    index = _as_dask(index)
    _known(op, src=src, index=index)
    if index.ndim not in (1, src.ndim):
        raise ValueError(f"{op}: index must be 1-D (along dim) or have src's {src.ndim} dims, got {index.ndim}")
    if index.ndim == 1 and index.shape[0] != src.shape[dim]:
        raise ValueError(f"{op}: a 1-D index needs one value per position along dim: {index.shape[0]} != {src.shape[dim]}")
    if index.ndim == src.ndim and index.shape != src.shape:
        raise ValueError(f"{op}: index must have src's shape {src.shape}, got {index.shape}")
    if not np.issubdtype(index.dtype, np.integer):
        raise TypeError(f"{op}: expected an integer dtype for index, but got {index.dtype}")
    if dim_size is None:
        dim_size = int(index.max().compute()) + 1 if index.size else 0
    return src, index, dim, dim_size


def _counts_like(counts, values, dim):
    """Counts broadcast against the values (a 1-D count along dim)."""
    if counts.ndim == values.ndim:
        return counts
    shape = (1,) * dim + (-1,) + (1,) * (values.ndim - dim - 1)
    return counts.reshape(shape)


def _mean(sums, counts):
    counts = da.maximum(counts, 1).astype(sums.dtype)
    if np.issubdtype(sums.dtype, np.floating):
        return sums / counts
    return sums // counts


def scatter(src, index, dim=0, dim_size=None, reduce="sum", split_every=None):
    """pytorch_scatter's ``scatter`` on Dask arrays: the groups of ``src`` that ``index`` names
    along ``dim``, reduced by ``reduce`` (``"sum"``/``"add"``, ``"mul"``/``"prod"``, ``"mean"``,
    ``"min"``/``"amin"``, ``"max"``/``"amax"``). A 1-D index is shared by every lane; otherwise it
    has ``src``'s shape. The output has ``src``'s shape with ``dim_size`` (default: the largest
    index + 1) along ``dim``; empty groups are 0 (1 for a product)."""
    r = _REDUCE.get(reduce)
    if r is None:
        raise ValueError(f'scatter: reduce must be one of {sorted(_REDUCE)}, got {reduce!r}')
    src, index, dim, dim_size = _prepare(src, index, dim, dim_size, "scatter")
    values, counts = _tree(src, index, dim, dim_size, r, split_every)
    c = _counts_like(counts, values, dim)
    if r == "mean":
        return _mean(values, c).astype(src.dtype)
    if r in ("amax", "amin"):
        return da.where(c > 0, values, 0).astype(src.dtype)
    return values.astype(src.dtype)


def scatter_add(input, dim, index, src, split_every=None, *, bounds=None, fill_value=None):
    """``torch.scatter_add`` on Dask arrays: ``input`` plus the sums of ``src`` into the positions
    ``index`` names along ``dim`` (``index`` 1-D along ``dim``, or of ``src``'s rank and no larger
    than ``src``, nor than ``input`` off ``dim``, as in PyTorch). ``bounds`` (``"wrap"``,
    ``"clip"``, ``"drop"``) as in :func:`gather.scatter_add`."""
    return _scatter_reduce(input, dim, index, src, "sum", True, split_every, bounds, fill_value, "scatter_add")


def scatter_reduce(input, dim, index, src, reduce, include_self=True, split_every=None, *, bounds=None,
                   fill_value=None):
    """``torch.scatter_reduce`` on Dask arrays (``reduce``: sum, prod, mean, amax, amin). Positions
    no element of ``src`` reaches keep ``input``'s value; with ``include_self=False`` the others
    reduce ``src`` alone. ``bounds`` (``"wrap"``, ``"clip"``, ``"drop"``) as in
    :func:`gather.scatter_reduce`."""
    return _scatter_reduce(input, dim, index, src, reduce, include_self, split_every, bounds, fill_value,
                           "scatter_reduce")


def _scatter_reduce(input, dim, index, src, reduce, include_self, split_every, bounds, fill_value, op):
    r = "set" if op == "scatter" else _REDUCE.get(reduce)
    if r is None or reduce in ("add", "mul", "max", "min"):
        raise ValueError(f'scatter_reduce: reduce must be "sum", "prod", "mean", "amax" or "amin", got {reduce!r}')
    input = _as_dask(input)
    d = _norm_dim(dim, input.ndim, op)
    src, index = _as_dask(src), _as_dask(index)
    covered = index.ndim == src.ndim == input.ndim and all(
        i <= s and (a == d or i <= n) for a, (i, s, n) in enumerate(zip(index.shape, src.shape, input.shape)))
    if covered and index.shape != src.shape:
        src = src[tuple(slice(0, i) for i in index.shape)]  # as in torch, only the block the index covers
    src, index, d, _ = _prepare(src, index, d, input.shape[d], op)
    if src.dtype != input.dtype:
        raise TypeError(f"scatter_reduce: expected self and src to have the same dtype, but got {input.dtype} and {src.dtype}")
    # The policy checked by the library's own call (its error for a misuse, at graph time).
    one, at = np.zeros(1, input.dtype), np.zeros(1, np.int64)
    if op == "scatter_add":
        _native.scatter_add(one, 0, at, one, bounds=bounds, fill_value=fill_value)
    elif op == "scatter":
        _native.scatter(one, 0, at, one, bounds=bounds, fill_value=fill_value)
    else:
        _native.scatter_reduce(one, 0, at, one, r, bounds=bounds, fill_value=fill_value)
    values, counts = _tree(src, index, d, input.shape[d], r, split_every, bounds)
    if index.ndim == input.ndim and values.shape != input.shape:
        # An index smaller than input off dim: the groups beyond it are empty.
        pad = [(0, n - v) for n, v in zip(input.shape, values.shape)]
        values = da.pad(values, pad, constant_values=_identity(values.dtype, r))
        counts = da.pad(counts, pad, constant_values=0)
    values = values.rechunk(input.chunks) if values.shape == input.shape else values
    c = _counts_like(counts, values, d)
    hit = c > 0
    if r == "set":
        out = da.where(hit, values, input)
    elif r == "sum":
        out = input + values if include_self else da.where(hit, values, input)
    elif r == "prod":
        out = input * values if include_self else da.where(hit, values, input)
    elif r == "mean":
        out = _mean(values + input, c + 1) if include_self else da.where(hit, _mean(values, c), input)
    else:
        both = (da.maximum if r == "amax" else da.minimum)(input, values)
        out = da.where(hit, both if include_self else values, input)
    return out.astype(input.dtype)


def segment_coo(src, index, dim_size=None, reduce="sum", split_every=None):
    """pytorch_scatter's ``segment_coo`` on Dask arrays: ``src`` reduced over the groups of its
    first axis that the (sorted) ``index`` names; the same as :func:`scatter` along axis 0."""
    return scatter(src, index, 0, dim_size, reduce, split_every)


def _ids_of(positions, indptr):
    return np.searchsorted(indptr, positions, side="right") - 1


def segment_csr(src, indptr, reduce="sum", split_every=None):
    """pytorch_scatter's ``segment_csr`` on Dask arrays: ``src`` reduced over the segments
    ``indptr[i]:indptr[i + 1]`` of its first axis (``indptr`` a 1-D NumPy array)."""
    indptr = np.asarray(indptr)
    src = _as_dask(src)
    if indptr.ndim != 1 or indptr.size == 0 or indptr[0] != 0 or indptr[-1] != src.shape[0] or np.any(np.diff(indptr) < 0):
        raise ValueError(
            f"segment_csr: indptr must be 1-D, start at 0, not decrease and end at src.shape[0] = {src.shape[0]}"
        )
    positions = da.arange(src.shape[0], chunks=(src.chunks[0],))
    ids = positions.map_blocks(_ids_of, indptr, dtype=np.int64)
    return scatter(src, ids, 0, indptr.size - 1, reduce, split_every)


def bincount(x, weights=None, minlength=0, split_every=None):
    """``torch.bincount`` on a 1-D Dask array of non-negative integers: how often each value occurs
    (or the sum of ``weights`` per value), with at least ``minlength`` entries."""
    x = _as_dask(x)
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-D, got {x.ndim} dims")
    _known("bincount", x=x)
    size = max(int(x.max().compute()) + 1 if x.size else 0, minlength)
    if weights is None:
        _, counts = _tree(da.zeros(x.shape, np.int8, chunks=x.chunks), x, 0, size, "sum", split_every)
        return counts
    return scatter(weights, x, 0, size, "sum", split_every)


class _Npy:
    """A ``.npy`` file read by slices through a memory map; only the path travels to the workers."""

    def __init__(self, path):
        self.path = str(path)
        m = np.load(self.path, mmap_mode="r")
        self.shape, self.dtype, self.ndim = m.shape, m.dtype, m.ndim

    def __getitem__(self, key):
        return np.array(np.load(self.path, mmap_mode="r")[key])


def from_npy(path, chunks="auto"):
    """A Dask array over a ``.npy`` file on storage every worker can read: each task reads its own
    block through a memory map, so the file may be larger than the workers' memory.

    >>> import numpy as np, tempfile, os
    >>> from gather import dask as gd
    >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
    >>> np.save(path, np.arange(10))
    >>> gd.from_npy(path, chunks=4).sum().compute()
    np.int64(45)
    """
    return da.from_array(_Npy(path), chunks=chunks, asarray=True)


def progress(*collections):
    """Dask's progress bar for ``collections`` being computed: ``distributed.progress`` when a
    distributed client is active, else a ``dask.diagnostics.ProgressBar`` context for a local
    ``compute``. Returns the context to use in ``with`` (local) or the persisted collections."""
    try:
        from distributed import default_client, progress as dprogress

        client = default_client()
    except (ImportError, ValueError):
        from dask.diagnostics import ProgressBar

        return ProgressBar()
    persisted = client.persist(list(collections))
    dprogress(persisted)
    return persisted

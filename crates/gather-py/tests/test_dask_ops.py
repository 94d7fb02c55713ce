"""``gather.<op>`` and ``gather.grad.<op>`` with Dask arrays: Dask graphs (Dask in, Dask out)
that equal the in-memory calls, with the in-memory calls' errors; the ops without a graph and
the in-place forms refuse a Dask array with the fix."""

import itertools

import numpy as np
import pytest

import gather

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


@pytest.fixture(autouse=True)
def threads():
    with dask.config.set(scheduler="threads"):
        yield


def lazy(a, chunks):
    return da.from_array(a, chunks=chunks)


def close(got, want):
    assert isinstance(got, da.Array)
    got = got.compute()
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def both(got, want):
    """Pairs of gradients, each checked by :func:`close`."""
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w)


CHUNKS = [(2, 3), (3, 2), (7, 5)]
READ_BOUNDS = [None, "wrap", "clip", "fill"]
WRITE_BOUNDS = [None, "wrap", "clip", "drop"]


def index_for(rng, n, shape, bounds):
    """Index values valid under ``bounds`` (every policy's own range, out-of-range ones where it
    takes them)."""
    if bounds is None:
        return rng.integers(0, n, shape)
    if bounds == "wrap":
        return rng.integers(-n, n, shape)
    return rng.integers(-2, n + 3, shape)


@pytest.mark.parametrize("bounds", READ_BOUNDS)
@pytest.mark.parametrize("chunks", CHUNKS)
def test_reads_and_their_gradients_equal_the_in_memory_calls(bounds, chunks):
    rng = np.random.default_rng(len(str(bounds)) + chunks[0])
    x = rng.standard_normal((7, 5))
    X = lazy(x, chunks)
    fill = {} if bounds is None else {"bounds": bounds, "fill_value": 0.5 if bounds == "fill" else None}
    for dim in (0, 1, -1):
        i = index_for(rng, x.shape[dim], (4, 3), bounds)
        g = rng.standard_normal(i.shape)
        close(gather.gather(X, dim, lazy(i, 2), **fill), gather.gather(x, dim, i, **fill))
        close(gather.grad.gather(lazy(g, 3), X, dim, i, **fill), gather.grad.gather(g, x, dim, i, **fill))
        sel = i[:, 0]
        gs = rng.standard_normal(gather.index_select(x, dim, sel, **fill).shape)
        close(gather.index_select(X, dim, lazy(sel, 3), **fill), gather.index_select(x, dim, sel, **fill))
        close(gather.grad.index_select(lazy(gs, 2), X, dim, sel, **fill),
              gather.grad.index_select(gs, x, dim, sel, **fill))
        along = i[:, :1] if dim == 0 else i[:1, :]
        ga = rng.standard_normal(gather.take_along_dim(x, along, dim, **fill).shape)
        close(gather.take_along_dim(X, lazy(along, 2), dim, **fill), gather.take_along_dim(x, along, dim, **fill))
        close(gather.grad.take_along_dim(lazy(ga, 2), X, lazy(along, 2), dim, **fill),
              gather.grad.take_along_dim(ga, x, along, dim, **fill))
    flat = index_for(rng, x.size, (3, 4), bounds)
    if bounds is None:
        flat = flat - 20  # take counts negative values from the end
    g = rng.standard_normal(flat.shape)
    close(gather.take(X, lazy(flat, 2), **fill), gather.take(x, flat, **fill))
    close(gather.grad.take(lazy(g, 2), X, flat, **fill), gather.grad.take(g, x, flat, **fill))
    if bounds is None:
        flat = flat + 20
    close(gather.take_along_dim(X, flat, **fill), gather.take_along_dim(x, flat, **fill))
    close(gather.grad.take_along_dim(lazy(g.reshape(-1), 5), X, flat, **fill),
          gather.grad.take_along_dim(g.reshape(-1), x, flat, **fill))


def test_take_along_dim_wraps_any_value_modulo_the_dim_as_pytorch_does():
    x = np.arange(12.0).reshape(3, 4)
    i = np.array([[9, -5, 4, -1]])
    close(gather.take_along_dim(lazy(x, 2), lazy(i, 3), 0), gather.take_along_dim(x, i, 0))
    g = np.ones((3, 4))
    close(gather.grad.take_along_dim(g, lazy(x, 2), i, 1), gather.grad.take_along_dim(g, x, i, 1))


@pytest.mark.parametrize("bounds", WRITE_BOUNDS)
@pytest.mark.parametrize("chunks", CHUNKS[:2])
def test_scatter_add_and_scatter_reduce_and_their_gradients_equal_the_in_memory_calls(bounds, chunks):
    rng = np.random.default_rng(chunks[1] + len(str(bounds)))
    policy = {} if bounds is None else {"bounds": bounds}
    for dim, (xs, ss, ishape) in itertools.product((0, 1), [((7, 5), (6, 5), (6, 5)), ((7, 5), (9, 6), (4, 3))]):
        x = rng.integers(-3, 4, xs).astype(np.float64)  # small integers: ties and zeros
        src = rng.integers(-3, 4, ss).astype(np.float64)
        i = index_for(rng, x.shape[dim], ishape, bounds)
        X, S, I = lazy(x, chunks), lazy(src, chunks), lazy(i, 2)
        g = rng.standard_normal(xs)
        close(gather.scatter_add(X, dim, I, S, **policy), gather.scatter_add(x, dim, i, src, **policy))
        both(gather.grad.scatter_add(lazy(g, 3), X, dim, I, S, **policy),
             gather.grad.scatter_add(g, x, dim, i, src, **policy))
        for reduce, include_self in itertools.product(["sum", "prod", "mean", "amax", "amin"], [True, False]):
            kw = dict(include_self=include_self, **policy)
            close(gather.scatter_reduce(X, dim, I, S, reduce, **kw), gather.scatter_reduce(x, dim, i, src, reduce, **kw))
            for parity in ("correct", "pytorch"):
                both(gather.grad.scatter_reduce(lazy(g, 3), X, dim, I, S, reduce, parity=parity, **kw),
                     gather.grad.scatter_reduce(g, x, dim, i, src, reduce, parity=parity, **kw))


@pytest.mark.parametrize("bounds", WRITE_BOUNDS)
def test_index_add_and_index_reduce_and_their_gradients_equal_the_in_memory_calls(bounds):
    rng = np.random.default_rng(len(str(bounds)))
    policy = {} if bounds is None else {"bounds": bounds}
    for dim in (0, 1):
        x = rng.integers(-3, 4, (7, 5)).astype(np.float64)
        i = index_for(rng, x.shape[dim], (6,), bounds)
        shape = list(x.shape)
        shape[dim] = i.size
        source = rng.integers(-3, 4, shape).astype(np.float64)
        X, S = lazy(x, (3, 2)), lazy(source, (2, 4))
        g = rng.standard_normal(x.shape)
        for alpha in ({}, {"alpha": 2.5}):
            close(gather.index_add(X, dim, lazy(i, 4), S, **alpha, **policy),
                  gather.index_add(x, dim, i, source, **alpha, **policy))
            both(gather.grad.index_add(lazy(g, 3), X, dim, i, S, **alpha, **policy),
                 gather.grad.index_add(g, x, dim, i, source, **alpha, **policy))
        for reduce, include_self in itertools.product(["prod", "mean", "amax", "amin"], [True, False]):
            kw = dict(include_self=include_self, **policy)
            close(gather.index_reduce(X, dim, i, S, reduce, **kw), gather.index_reduce(x, dim, i, source, reduce, **kw))
            for parity in ("correct", "pytorch"):
                both(gather.grad.index_reduce(lazy(g, 3), X, dim, i, S, reduce, parity=parity, **kw),
                     gather.grad.index_reduce(g, x, dim, i, source, reduce, parity=parity, **kw))


def test_integers_float16_and_0d_arrays_keep_the_in_memory_dtypes_and_shapes():
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    i = np.array([[3, 0, 1], [2, 2, 0]])
    close(gather.gather(lazy(x, 3), 0, i), gather.gather(x, 0, i))
    close(gather.scatter_reduce(lazy(x, 3), 0, i, x[:2, :3], "mean"), gather.scatter_reduce(x, 0, i, x[:2, :3], "mean"))
    h = np.linspace(-2, 2, 24, dtype=np.float16).reshape(4, 6)
    g = np.ones((2, 3), np.float16)
    close(gather.grad.gather(g, lazy(h, 2), 0, i), gather.grad.gather(g, h, 0, i))
    zero = np.array(5.0)
    close(gather.gather(lazy(zero, ()), 0, np.array(0)), gather.gather(zero, 0, np.array(0)))
    close(gather.scatter_add(lazy(zero, ()), 0, np.array(0), np.array(2.0)),
          gather.scatter_add(zero, 0, np.array(0), np.array(2.0)))
    close(gather.take(lazy(zero, ()), np.array([0, -1])), gather.take(zero, np.array([0, -1])))
    m = h > 0
    close(gather.grad.masked_select(np.ones(m.sum(), np.float16), lazy(h, 2), m), gather.grad.masked_select(np.ones(m.sum(), np.float16), h, m))
    gb = np.ones((2, 3, 6), np.float16)
    close(gather.grad.select_batched(gb, lazy(h, 2), 0, i, 0), gather.grad.select_batched(gb, h, 0, i, 0))
    close(gather.repeat_interleave(lazy(x, 3), np.array([1, 0, 2, 1]), 0), gather.repeat_interleave(x, np.array([1, 0, 2, 1]), 0))
    close(gather.put(lazy(x, 3), i, i.astype(np.int32), True), gather.put(x, i, i.astype(np.int32), True))


def test_nothing_is_computed_until_the_result_is():
    calls = []

    def block():
        calls.append(1)
        return np.arange(20.0).reshape(4, 5)

    import dask.delayed

    X = da.from_delayed(dask.delayed(block)(), (4, 5), np.float64)
    i = np.array([[0, 3], [1, 1]])
    out = gather.gather(X, 0, i)
    grad = gather.grad.scatter_reduce(X, X, 0, i, X[:2, :2], "amax")
    more = [gather.put(X, i, X[:2, :2]), gather.masked_select(X, X > 3), gather.masked_scatter(X, X > 3, X),
            gather.repeat_interleave(X, (X[:, 0] > 3).astype(np.int64), 0, output_size=3),
            gather.grad.repeat_interleave(X, X, (X[:, 0] > 3).astype(np.int64), 0),
            gather.select_batched(X, 1, i, 0), *gather.grad.masked_scatter(X, X, X > 3, X)]
    assert calls == []
    close(more[3], gather.repeat_interleave(block(), (block()[:, 0] > 3).astype(np.int64), 0, output_size=3))
    close(out, gather.gather(block(), 0, i))
    assert isinstance(grad[0], da.Array) and isinstance(grad[1], da.Array)


def test_shape_and_argument_errors_are_the_in_memory_ones_when_the_graph_is_built():
    x = np.zeros((700, 50))
    X = lazy(x, 100)
    bad = [
        (gather.gather, (0, np.zeros((3, 60), np.int64))),
        (gather.gather, (2, np.zeros((3, 5), np.int64))),
        (gather.gather, (0, np.zeros((3,), np.int64))),
        (gather.gather, (0, np.zeros((3, 5), np.float32))),
        (gather.scatter_add, (0, np.zeros((3, 5), np.int64), np.zeros((2, 5)))),
        (gather.scatter_add, (0, np.zeros((3, 5), np.int64), np.zeros((3, 5), np.float32))),
        (gather.index_add, (1, np.zeros(4, np.int64), np.zeros((700, 3)))),
        (gather.index_select, (0, np.zeros((2, 2), np.int64))),
    ]
    for op, args in bad:
        with pytest.raises(gather.GatherError) as want:
            op(x, *args)
        with pytest.raises(type(want.value)) as got:
            op(X, *args)
        assert str(got.value) == str(want.value)
    with pytest.raises(gather.GatherError) as want:
        gather.scatter_reduce(x, 0, np.zeros((3, 5), np.int64), np.zeros((3, 5)), "median")
    with pytest.raises(type(want.value), match="median"):
        gather.scatter_reduce(X, 0, np.zeros((3, 5), np.int64), np.zeros((3, 5)), "median")
    with pytest.raises(gather.GatherError) as want:
        gather.grad.gather(np.zeros((3, 5), np.int64), x.astype(np.int64), 0, np.zeros((3, 5), np.int64))
    with pytest.raises(type(want.value)) as got:
        gather.grad.gather(np.zeros((3, 5), np.int64), lazy(x.astype(np.int64), 100), 0, np.zeros((3, 5), np.int64))
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("call", [
    lambda x, i: gather.gather(x, 1, i),
    lambda x, i: gather.take(x, i),
    lambda x, i: gather.index_select(x, 1, i[0]),
    lambda x, i: gather.take_along_dim(x, i),
    lambda x, i: gather.scatter_add(x, 1, i, np.ones(i.shape)),
    lambda x, i: gather.scatter_reduce(x, 1, i, np.ones(i.shape), "amax"),
    lambda x, i: gather.index_add(x, 1, i[0], np.ones((4, i.shape[1]))),
    lambda x, i: gather.index_reduce(x, 1, i[0], np.ones((4, i.shape[1])), "amin"),
    lambda x, i: gather.grad.gather(np.ones(i.shape), x, 1, i),
    lambda x, i: gather.grad.take(np.ones(i.shape), x, i),
    lambda x, i: gather.grad.index_select(np.ones((4, i.shape[1])), x, 1, i[0]),
    lambda x, i: gather.grad.scatter_add(np.ones((4, 6)), x, 1, i, np.ones(i.shape)),
    lambda x, i: gather.grad.scatter_reduce(np.ones((4, 6)), x, 1, i, np.ones(i.shape), "mean"),
    lambda x, i: gather.grad.index_add(np.ones((4, 6)), x, 1, i[0], np.ones((4, i.shape[1]))),
    lambda x, i: gather.grad.take_along_dim(np.ones(i.size), x, i),
], ids=["gather", "take", "index_select", "take_along_dim", "scatter_add", "scatter_reduce", "index_add",
        "index_reduce", "grad.gather", "grad.take", "grad.index_select", "grad.scatter_add",
        "grad.scatter_reduce", "grad.index_add", "grad.take_along_dim"])
@pytest.mark.parametrize("value", [40, -30])
def test_a_bad_index_value_raises_the_in_memory_error_at_compute_time(call, value):
    x = np.zeros((4, 6))
    i = np.ones((4, 5), np.int64)
    i[0, 4] = value  # in the third block of its row
    with pytest.raises(gather.IndexOutOfBoundsError) as want:
        call(x, i)
    result = call(lazy(x, 2), lazy(i, 2))
    with pytest.raises(gather.IndexOutOfBoundsError) as got:
        result[0].compute() if isinstance(result, tuple) else result.compute()
    assert str(got.value) == str(want.value)
    assert got.value.index_value == want.value.index_value


def test_the_in_place_forms_refuse_a_dask_array_with_the_fix():
    X = lazy(np.arange(6.0), 3)
    with pytest.raises(gather.InvalidArgumentError, match="immutable"):
        gather.scatter_add_(X, 0, np.array([0]), np.array([1.0]))
    with pytest.raises(gather.InvalidArgumentError, match="immutable"):
        gather.put_(X, np.array([0]), np.array([1.0]))


def bf16(a):
    """float32 values as bfloat16 bit patterns (to nearest, ties to even)."""
    u = np.asarray(a, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_bfloat16_bit_patterns_give_the_in_memory_patterns():
    rng = np.random.default_rng(17)
    x = bf16(rng.standard_normal((7, 5)) * 3)
    x[2, 3] = 0x7FC1  # a NaN's pattern travels as it is
    X = lazy(x, (3, 2))
    b = {"dtype": "bfloat16"}
    i = rng.integers(0, 7, (4, 5))
    j = np.array([6, 0, 2])
    src = bf16(rng.standard_normal((4, 5)))
    mask = rng.random((7, 5)) > 0.5
    moves = [
        (lambda a: gather.gather(a, 0, i, **b)), (lambda a: gather.take(a, i, **b)),
        (lambda a: gather.index_select(a, 1, j[1:], **b)), (lambda a: gather.scatter(a, 0, i, src, **b)),
        (lambda a: gather.index_fill(a, 0, j, 0.1, **b)), (lambda a: gather.scatter(a, 0, i, 0.3, **b)),
        (lambda a: gather.put(a, i, src, **b)), (lambda a: gather.masked_select(a, mask, **b)),
        (lambda a: gather.masked_scatter(a, mask, x, **b)), (lambda a: gather.repeat_interleave(a, 2, 1, **b)),
        (lambda a: gather.select_batched(a, 1, i[:, :2].T.copy() % 5, 0, **b)),
        (lambda a: gather.sort(a, 0, **b)), (lambda a: gather.topk(a, 3, 1, **b)), (lambda a: gather.argsort(a, 1, **b)),
    ]
    for call in moves:
        got, want = call(X), call(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert isinstance(g, da.Array)
            g = g.compute()
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    # Sums round once from float32, as the library's kernels: equal up to the order of the adds.
    widen = lambda a: (a.astype(np.uint32) << 16).view(np.float32)  # noqa: E731
    y = bf16(rng.standard_normal((7, 5)))
    for call in [(lambda a: gather.scatter_add(a, 0, i, src, **b)),
                 (lambda a: gather.scatter_reduce(a, 0, i, src, "mean", **b)),
                 (lambda a: gather.grad.gather(src, a, 0, i, **b)),
                 (lambda a: gather.index_add(a, 1, np.array([4, 0, 4]), y[:, :3], alpha=2, **b))]:
        got, want = call(lazy(y, (3, 2))).compute(), call(y)
        assert got.dtype == np.uint16
        np.testing.assert_allclose(widen(got), widen(want), rtol=2 ** -7)
    with pytest.raises(gather.DTypeError) as want:
        gather.gather(x.astype(np.float32), 0, i, **b)
    with pytest.raises(gather.DTypeError) as got:
        gather.gather(lazy(x.astype(np.float32), 3), 0, i, **b)
    assert str(got.value) == str(want.value)


def test_torch_scatter_on_dask_arrays_equals_the_in_memory_calls():
    from gather import torch_scatter as ts

    rng = np.random.default_rng(9)
    src = rng.integers(-4, 5, (12, 3)).astype(np.float64)  # ties: the args must agree
    src[3, 1] = np.nan
    index = rng.integers(0, 5, 12)
    S, I = lazy(src, (5, 2)), lazy(index, 4)
    for reduce in ("sum", "add", "mul", "mean", "min", "max"):
        close(ts.scatter(S, I, 0, dim_size=6, reduce=reduce), ts.scatter(src, index, 0, dim_size=6, reduce=reduce))
    for name in ("scatter_sum", "scatter_add", "scatter_mul", "scatter_mean"):
        close(getattr(ts, name)(S, I, dim=0), getattr(ts, name)(src, index, dim=0))
    close(ts.scatter(S.T, I, reduce="mean"), ts.scatter(src.T, index, reduce="mean"))  # dim=-1
    for name in ("scatter_max", "scatter_min"):
        both(getattr(ts, name)(S, I, 0, dim_size=7), getattr(ts, name)(src, index, 0, dim_size=7))
        both(getattr(ts, name)(S.T, I), getattr(ts, name)(src.T, index))
        full = np.broadcast_to(index[:, None], src.shape).copy()
        both(getattr(ts, name)(S, lazy(full, 4), 0), getattr(ts, name)(src, full, 0))
    ordered = np.sort(index)
    indptr = np.array([0, 2, 2, 7, 12])
    for reduce in ("sum", "mean", "min", "max"):
        want = ts.segment_coo(src, ordered, reduce=reduce)
        got = ts.segment_coo(S, lazy(ordered, 5), reduce=reduce)
        both(got, want) if isinstance(want, tuple) else close(got, want)
        want = ts.segment_csr(src, indptr, reduce=reduce)
        got = ts.segment_csr(S, indptr, reduce=reduce)
        both(got, want) if isinstance(want, tuple) else close(got, want)
    close(ts.gather_coo(S, lazy(ordered, 5)), ts.gather_coo(src, ordered))
    close(ts.gather_csr(S[:4], indptr), ts.gather_csr(src[:4], indptr))
    close(ts.gather_csr(S[:4], lazy(indptr, 2)), ts.gather_csr(src[:4], indptr))
    x = rng.standard_normal((12, 3)) * 4
    X = lazy(x, (5, 2))
    for name in ("scatter_softmax", "scatter_log_softmax"):
        got, want = getattr(ts, name)(X, I, 0), getattr(ts, name)(x, index, 0)
        assert isinstance(got, da.Array)
        np.testing.assert_allclose(got.compute(), want, rtol=1e-12, atol=1e-15)
    for kwargs in ({}, {"dim_size": 7}, {"dim_size": 7, "eps": 1e-3}):
        got, want = ts.scatter_logsumexp(X, I, 0, **kwargs), ts.scatter_logsumexp(x, index, 0, **kwargs)
        np.testing.assert_allclose(got.compute(), want, rtol=1e-12)
    for unbiased in (True, False):
        got, want = ts.scatter_std(X, I, 0, dim_size=7, unbiased=unbiased), ts.scatter_std(x, index, 0, dim_size=7, unbiased=unbiased)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.compute(), want, rtol=1e-10, atol=1e-12)
    with pytest.raises(gather.InvalidArgumentError, match=r"out \+ torch_scatter\.scatter"):
        ts.scatter(S, I, 0, out=np.zeros((5, 3)))


def test_a_host_scatter_plan_applied_to_dask_arrays_builds_a_graph_equal_to_the_plans_result():
    rng = np.random.default_rng(4)
    index = rng.integers(0, 6, 20)
    plan = gather.ScatterPlan(index, 6)
    dst, src = rng.standard_normal((6, 3)), rng.standard_normal((20, 3))
    D, S = lazy(dst, (4, 2)), lazy(src, (7, 3))
    close(plan.scatter_add(D, S), plan.scatter_add(dst, src))
    for reduce, include_self in itertools.product(["sum", "prod", "mean", "amax", "amin"], [True, False]):
        close(plan.scatter_reduce(D, S, reduce, include_self=include_self),
              plan.scatter_reduce(dst, src, reduce, include_self=include_self))


@pytest.mark.parametrize("chunks", CHUNKS)
def test_sort_argsort_topk_and_their_gradients_run_per_block_with_the_dim_whole(chunks):
    rng = np.random.default_rng(chunks[0])
    x = rng.integers(-3, 4, (7, 5)).astype(np.float64)  # ties: the stable orders must agree
    X = lazy(x, chunks)
    for dim in (0, 1, -1):
        for descending, stable in itertools.product([False, True], [False, True]):
            got, want = gather.sort(X, dim, descending, stable=stable), gather.sort(x, dim, descending, stable=stable)
            close(got[0], want[0])
            np.testing.assert_array_equal(got[1].compute(), want[1])
            np.testing.assert_array_equal(gather.argsort(X, dim, descending, stable=stable).compute(),
                                          gather.argsort(x, dim, descending, stable=stable))
            g = rng.standard_normal(x.shape)
            close(gather.grad.sort(lazy(g, 2), X, dim, descending, stable=stable),
                  gather.grad.sort(g, x, dim, descending, stable=stable))
        for largest, ordered in itertools.product([True, False], [True, False]):
            got, want = gather.topk(X, 2, dim, largest, ordered), gather.topk(x, 2, dim, largest, ordered)
            close(got[0], want[0])
            np.testing.assert_array_equal(got[1].compute(), want[1])
            g = rng.standard_normal(want[0].shape)
            close(gather.grad.topk(lazy(g, 3), X, 2, dim, largest, ordered), gather.grad.topk(g, x, 2, dim, largest, ordered))
    with pytest.raises(gather.InvalidArgumentError, match="k out of range"):
        gather.topk(X, 9, 1)  # when the graph is built, with the real sizes


def test_topk_along_a_dim_of_many_blocks_is_a_tree_equal_to_the_in_memory_call():
    rng = np.random.default_rng(21)
    x = rng.integers(-3, 4, (3, 40)).astype(np.float32)  # ties across blocks
    x[1, [5, 33]] = np.nan
    X = lazy(x, (2, 3))  # 14 blocks along dim 1: two levels of merges
    for k, largest, ordered in itertools.product([0, 1, 5, 40], [True, False], [True, False]):
        got, want = gather.topk(X, k, 1, largest, ordered), gather.topk(x, k, 1, largest, ordered)
        assert got[0].numblocks == (2, 1)
        close(got[0], want[0])
        np.testing.assert_array_equal(got[1].compute(), want[1])
        g = rng.standard_normal(want[0].shape).astype(np.float32)
        close(gather.grad.topk(lazy(g, 2), X, k, 1, largest, ordered), gather.grad.topk(g, x, k, 1, largest, ordered))
    ints = rng.integers(0, 3, (50,)).astype(np.int64)
    got, want = gather.topk(lazy(ints, 7), 9, 0), gather.topk(ints, 9, 0)
    np.testing.assert_array_equal(got[0].compute(), want[0])
    np.testing.assert_array_equal(got[1].compute(), want[1])


@pytest.mark.parametrize("bounds", WRITE_BOUNDS)
def test_the_plain_writes_keep_the_last_write_in_index_order_as_the_in_memory_calls(bounds):
    rng = np.random.default_rng(len(str(bounds)) + 3)
    policy = {} if bounds is None else {"bounds": bounds}
    x = rng.standard_normal((7, 5))
    X = lazy(x, (3, 2))
    for dim in (0, 1):
        i = index_for(rng, x.shape[dim], (6, 4), bounds)  # duplicates across blocks
        src = rng.standard_normal((6, 4))
        close(gather.scatter(X, dim, lazy(i, 2), lazy(src, (2, 3)), **policy), gather.scatter(x, dim, i, src, **policy))
        j = i[:, 0] if dim == 0 else i[0]
        shape = list(x.shape)
        shape[dim] = j.size
        source = rng.standard_normal(shape)
        close(gather.index_copy(X, dim, lazy(j, 3), lazy(source, 2), **policy),
              gather.index_copy(x, dim, j, source, **policy))
        close(gather.index_fill(X, dim, j, -1.5, **policy), gather.index_fill(x, dim, j, -1.5, **policy))
        if bounds is None:
            close(gather.scatter(X, dim, i, 2.5), gather.scatter(x, dim, i, 2.5))
            close(gather.scatter(X, dim, i, value=2.5), gather.scatter(x, dim, i, value=2.5))
            for reduce in ("add", "multiply"):
                close(gather.scatter(X, dim, i, src, reduce=reduce), gather.scatter(x, dim, i, src, reduce=reduce))
        g = rng.standard_normal(x.shape)
        G = lazy(g, 2)
        both(gather.grad.scatter(G, X, dim, lazy(i, 2), src, **policy), gather.grad.scatter(g, x, dim, i, src, **policy))
        both(gather.grad.index_copy(G, X, dim, lazy(j, 2), source, **policy),
             gather.grad.index_copy(g, x, dim, j, source, **policy))
        close(gather.grad.index_fill(G, X, dim, j, -1.5, **policy), gather.grad.index_fill(g, x, dim, j, -1.5, **policy))
        if bounds is None:
            close(gather.grad.scatter(G, X, dim, i, value=2.5), gather.grad.scatter(g, x, dim, i, value=2.5))
            for reduce in ("add", "multiply"):
                both(gather.grad.scatter(G, X, dim, i, src, reduce=reduce), gather.grad.scatter(g, x, dim, i, src, reduce=reduce))
                close(gather.grad.scatter(G, X, dim, i, value=1.5, reduce=reduce),
                      gather.grad.scatter(g, x, dim, i, value=1.5, reduce=reduce))


def test_index_fill_counts_negative_values_from_the_end_as_in_memory():
    x = np.arange(12.0).reshape(3, 4)
    j = np.array([-1, 1, -3])
    close(gather.index_fill(lazy(x, 2), 0, lazy(j, 2), 7.0), gather.index_fill(x, 0, j, 7.0))
    close(gather.grad.index_fill(lazy(x, 2), lazy(x, 2), 0, j, 7.0), gather.grad.index_fill(x, x, 0, j, 7.0))
    with pytest.raises(gather.IndexOutOfBoundsError) as want:
        gather.index_fill(x, 0, np.array([0, 0, -4]), 7.0)
    with pytest.raises(gather.IndexOutOfBoundsError) as got:
        gather.index_fill(lazy(x, 2), 0, lazy(np.array([0, 0, -4]), 2), 7.0).compute()
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("bounds", WRITE_BOUNDS)
@pytest.mark.parametrize("accumulate", [False, True])
def test_put_and_its_gradient_equal_the_in_memory_calls(bounds, accumulate):
    rng = np.random.default_rng(len(str(bounds)) + accumulate)
    policy = {} if bounds is None else {"bounds": bounds}
    x = rng.standard_normal((7, 5))
    i = index_for(rng, x.size, (4, 6), bounds)
    if bounds is None:
        i = i - 17  # negative values count from the end
    source = rng.standard_normal((3, 8))  # as many elements as the index, another shape
    g = rng.standard_normal(x.shape)
    for chunks in CHUNKS:
        X = lazy(x, chunks)
        close(gather.put(X, lazy(i, 3), lazy(source, 2), accumulate, **policy), gather.put(x, i, source, accumulate, **policy))
        both(gather.grad.put(lazy(g, chunks), X, lazy(i, 3), source, accumulate, **policy),
             gather.grad.put(g, x, i, source, accumulate, **policy))


@pytest.mark.parametrize("chunks", CHUNKS)
def test_masked_select_masked_scatter_and_their_gradients_equal_the_in_memory_calls(chunks):
    rng = np.random.default_rng(chunks[0] + 5)
    x = rng.standard_normal((7, 5))
    X = lazy(x, chunks)
    for mask in (x > 0.2, (x > 0.2)[:1], (x > 0.2)[:, :1], np.zeros((7, 5), bool), np.ones(5, bool)):
        M = lazy(mask, 2)
        got = gather.masked_select(X, M)
        assert np.isnan(got.shape[0])  # as Dask's boolean indexing: sizes known once computed
        close(got, gather.masked_select(x, mask))
        n = gather.masked_select(x, mask).size
        g = rng.standard_normal(n)
        close(gather.grad.masked_select(lazy(g, 4), X, M), gather.grad.masked_select(g, x, mask))
        close(gather.grad.masked_select(got.compute_chunk_sizes(), X, M),
              gather.grad.masked_select(gather.masked_select(x, mask), x, mask))
        source = rng.standard_normal((6, 7))
        close(gather.masked_scatter(X, M, lazy(source, 4)), gather.masked_scatter(x, mask, source))
        gs = rng.standard_normal(x.shape)
        both(gather.grad.masked_scatter(lazy(gs, 3), X, M, lazy(source, 4)), gather.grad.masked_scatter(gs, x, mask, source))
    # The gradient through a broadcast input sums over the broadcast axes.
    row = x[:1]
    mask = x > 0
    g = rng.standard_normal(gather.masked_select(row, mask).size)
    close(gather.grad.masked_select(lazy(g, 3), lazy(row, 2), lazy(mask, 3)), gather.grad.masked_select(g, row, mask))
    with pytest.raises(gather.InvalidArgumentError, match=r"unknown sizes.*\n.*compute_chunk_sizes"):
        gather.grad.masked_select(gather.masked_select(X, X > 0), X, X > 0)


@pytest.mark.parametrize("chunks", CHUNKS)
def test_repeat_interleave_and_its_gradient_equal_the_in_memory_calls(chunks):
    rng = np.random.default_rng(chunks[1])
    x = rng.standard_normal((7, 5))
    X = lazy(x, chunks)
    r0, r1 = rng.integers(0, 4, 7), rng.integers(0, 3, 5)
    close(gather.repeat_interleave(lazy(r0, 3)), gather.repeat_interleave(r0))
    close(gather.repeat_interleave(lazy(r0, 3), output_size=int(r0.sum())), gather.repeat_interleave(r0))
    cases = [(3, 1, None), (2, None, None), (np.array(2), 0, 14), (np.array([3]), 1, None), (r0, 0, None),
             (r1, 1, int(r1.sum())), (r1, -1, None), (lazy(r0, 4), 0, None), (lazy(r1, 2), 1, int(r1.sum())),
             (lazy(np.array([2]), 1), 1, None), (rng.integers(0, 3, 35), None, None)]
    for repeats, dim, size in cases:
        want = gather.repeat_interleave(x, np.asarray(repeats) if hasattr(repeats, "shape") else repeats, dim,
                                        output_size=size)
        got = gather.repeat_interleave(X, repeats, dim, output_size=size)
        if size is not None or not isinstance(repeats, da.Array) and np.size(repeats) == 1:
            assert not np.isnan(got.shape).any()  # sizes the graph knows
        close(got, want)
        g = rng.standard_normal(want.shape)
        r = np.asarray(repeats) if hasattr(repeats, "shape") else repeats
        close(gather.grad.repeat_interleave(lazy(g, 3), X, repeats, dim), gather.grad.repeat_interleave(g, x, r, dim))


@pytest.mark.parametrize("bounds", READ_BOUNDS)
def test_select_batched_and_its_gradient_equal_the_in_memory_calls(bounds):
    rng = np.random.default_rng(len(str(bounds)) + 11)
    policy = {} if bounds is None else {"bounds": bounds, "fill_value": -2.0 if bounds == "fill" else None}
    y = rng.standard_normal((4, 3, 6, 2))
    for chunks in [(3, 2, 4, 1), (4, 3, 6, 2), (1, 1, 5, 2)]:
        Y = lazy(y, chunks)
        for axis, b, shape in [(2, 1, (4, 5)), (2, 0, (2, 3)), (2, 2, (4, 3)), (0, 0, (3,)), (-1, 1, (4, 2, 3))]:
            n = y.shape[axis]
            i = index_for(rng, n, shape, bounds)
            want = gather.select_batched(y, axis, i, b, **policy)
            close(gather.select_batched(Y, axis, lazy(i, 2), b, **policy), want)
            g = rng.standard_normal(want.shape)
            close(gather.grad.select_batched(lazy(g, 2), Y, axis, lazy(i, 2), b, **policy),
                  gather.grad.select_batched(g, y, axis, i, b, **policy))


@pytest.mark.parametrize("call", [
    lambda x, i, r: gather.put(x, i, np.ones(i.shape)),
    lambda x, i, r: gather.grad.put(x, x, i, np.ones(i.shape)),
    lambda x, i, r: gather.select_batched(x, 1, i, 1),
    lambda x, i, r: gather.grad.select_batched(np.ones(i.shape), x, 1, i, 1),
    lambda x, i, r: gather.grad.scatter(x, x, 1, i, np.ones(i.shape)),
    lambda x, i, r: gather.grad.scatter(x, x, 1, i, value=1.0),
    lambda x, i, r: gather.grad.index_copy(x, x, 1, i[0], np.ones((4, 5))),
    lambda x, i, r: gather.grad.index_fill(x, x, 1, i[0], 1.0),
    lambda x, i, r: gather.masked_scatter(x, x == 0, np.ones(20)),
    lambda x, i, r: gather.grad.masked_scatter(x, x, x == 0, np.ones(23)),
    lambda x, i, r: gather.grad.masked_select(np.ones(23), x, x == 0),
    lambda x, i, r: gather.repeat_interleave(r),
    lambda x, i, r: gather.repeat_interleave(x, r, 1),
    lambda x, i, r: gather.repeat_interleave(x, np.abs(r), 1, output_size=8),
    lambda x, i, r: gather.repeat_interleave(np.abs(r), output_size=8),
    lambda x, i, r: gather.grad.repeat_interleave(np.ones((4, 8)), x, np.abs(r), 1),
    lambda x, i, r: gather.grad.repeat_interleave(np.ones((4, 9)), x, r, 1),
], ids=["put", "grad.put", "select_batched", "grad.select_batched", "grad.scatter", "grad.scatter_value",
        "grad.index_copy", "grad.index_fill", "masked_scatter", "grad.masked_scatter", "grad.masked_select",
        "repeat_interleave", "repeat_interleave_dim", "output_size", "output_size_positions",
        "grad.repeat_interleave", "grad.repeat_interleave_negative"])
def test_a_bad_value_of_the_other_ops_raises_the_in_memory_error_at_compute_time(call):
    x = np.zeros((4, 6))
    i = np.ones((4, 5), np.int64)
    i[0, 4] = 40  # in the third block of its row
    r = np.array([1, 2, 0, 1, 3, -2])  # the negative count in the second block
    with pytest.raises(gather.GatherError) as want:
        call(x, i, r)
    result = call(lazy(x, 2), lazy(i, 2), lazy(r, 4))
    with pytest.raises(type(want.value)) as got:
        dask.compute(*result) if isinstance(result, tuple) else result.compute()
    assert str(got.value) == str(want.value)


def test_the_legacy_multiply_gradient_passes_untouched_positions_through_exactly_as_in_memory():
    # grad.scatter(reduce="multiply") takes PyTorch's gradient with the library's "correct"
    # parity: where no src element landed, grad_input is grad_output itself, not g * x / x.
    rng = np.random.default_rng(12)
    x = rng.standard_normal((6, 4)) * 7
    i = rng.integers(0, 3, (3, 4))  # rows 3.. are never written
    src, g = rng.standard_normal((3, 4)) * 3, rng.standard_normal((6, 4))
    want = gather.grad.scatter(g, x, 0, i, src, reduce="multiply")
    got = gather.grad.scatter(lazy(g, 2), lazy(x, 2), 0, i, src, reduce="multiply")
    both(got, want)
    np.testing.assert_array_equal(got[0].compute()[3:], g[3:])
    np.testing.assert_array_equal(want[0][3:], g[3:])

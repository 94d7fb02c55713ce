"""gather.dask on a real scheduler: a distributed.LocalCluster with two worker processes. Results
equal the in-memory calls, and an input larger than the workers' memory, read from .npy files,
comes through whole."""

import numpy as np
import pytest

import gather
from gather import torch_scatter as ts

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
gd = pytest.importorskip("gather.dask")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, memory_limit="600MiB", dashboard_address=None
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_the_cluster_has_two_worker_processes(client):
    workers = client.scheduler_info()["workers"]
    assert len(workers) == 2
    import os

    pids = set(client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids


def test_take_index_select_and_gather_equal_the_in_memory_calls(client):
    rng = np.random.default_rng(0)
    x = rng.random((500, 24))
    X = da.from_array(x, chunks=(64, 10))
    small = rng.integers(-500, 500, 77)
    np.testing.assert_array_equal(gd.take(X, small, 0).compute(), np.take(x, small, 0))
    big = da.from_array(rng.integers(0, 500, 3000), chunks=700)
    np.testing.assert_array_equal(gd.index_select(X, 0, big).compute(), gather.index_select(x, 0, big.compute()))
    nd = rng.integers(0, 24, (5, 6))
    np.testing.assert_array_equal(gd.take(X, nd, 1).compute(), np.take(x, nd, 1))
    gi = rng.integers(0, 500, (300, 20))
    got = gd.gather(X, 0, da.from_array(gi, chunks=(90, 7))).compute()
    np.testing.assert_array_equal(got, gather.gather(x, 0, gi))


def test_reads_report_the_librarys_errors(client):
    X = da.from_array(np.zeros((10, 2)), chunks=5)
    with pytest.raises(gather.IndexOutOfBoundsError):
        gd.take(X, np.array([3, 10]), 0).compute()
    with pytest.raises(gather.IndexOutOfBoundsError):
        gd.gather(X, 0, np.array([[0, -1]])).compute()


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "mul"])
def test_scatter_equals_the_in_memory_drop_in_and_is_repeatable(client, reduce):
    rng = np.random.default_rng(1)
    src = rng.integers(-5, 6, (2000, 6)).astype(np.float64)  # integer values: every order is exact
    if reduce == "mul":
        src = rng.choice([-1.0, 1.0, 2.0], (2000, 6))
    ids = rng.integers(0, 150, 2000)
    S, I = da.from_array(src, chunks=(300, 4)), da.from_array(ids, chunks=300)
    want = ts.scatter(src, ids, 0, dim_size=160, reduce=reduce)
    got = gd.scatter(S, I, 0, dim_size=160, reduce=reduce, split_every=3)
    a, b = got.compute(), got.compute()
    np.testing.assert_array_equal(a, want)
    assert a.tobytes() == b.tobytes()


def test_float_sums_are_deterministic_for_a_chunking_and_close_to_the_in_memory_call(client):
    rng = np.random.default_rng(2)
    src = rng.random((5000, 8), dtype=np.float32)
    ids = rng.integers(0, 100, 5000)
    got = gd.scatter(da.from_array(src, chunks=(700, 8)), da.from_array(ids, chunks=700), 0, 100, "sum")
    a, b = got.compute(), got.compute()
    assert a.tobytes() == b.tobytes()
    np.testing.assert_allclose(a, ts.scatter(src, ids, 0, dim_size=100), rtol=1e-5)


def test_scatter_reduce_and_scatter_add_follow_torch_with_a_full_index(client):
    rng = np.random.default_rng(3)
    src = rng.integers(0, 9, (400, 5)).astype(np.float64)
    index = rng.integers(0, 30, (400, 5))
    inp = rng.integers(0, 9, (30, 5)).astype(np.float64)
    S, I = da.from_array(src, chunks=(70, 3)), da.from_array(index, chunks=(50, 2))
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        for include_self in [True, False]:
            got = gd.scatter_reduce(inp, 0, I, S, reduce, include_self=include_self).compute()
            want = gather.scatter_reduce(inp, 0, index, src, reduce, include_self=include_self)
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"{reduce} {include_self}")
    np.testing.assert_array_equal(gd.scatter_add(inp, 0, I, S).compute(), gather.scatter_add(inp, 0, index, src))


def test_segments_and_bincount(client):
    rng = np.random.default_rng(4)
    src = rng.integers(0, 9, (1000, 3)).astype(np.float32)
    indptr = np.array([0, 10, 10, 400, 1000])
    S = da.from_array(src, chunks=(128, 3))
    np.testing.assert_array_equal(gd.segment_csr(S, indptr).compute(), ts.segment_csr(src, indptr))
    np.testing.assert_array_equal(gd.segment_csr(S, indptr, reduce="max").compute(), ts.segment_csr(src, indptr, reduce="max")[0])
    ids = np.sort(rng.integers(0, 40, 1000))
    np.testing.assert_array_equal(gd.segment_coo(S, da.from_array(ids, chunks=128), dim_size=45).compute(),
                                  ts.segment_coo(src, ids, dim_size=45))
    x = da.from_array(rng.integers(0, 70, 10_000), chunks=999)
    np.testing.assert_array_equal(gd.bincount(x, minlength=80).compute(), np.bincount(x.compute(), minlength=80))
    w = da.from_array(rng.random(10_000), chunks=999)
    np.testing.assert_allclose(gd.bincount(x, weights=w).compute(), np.bincount(x.compute(), w.compute()))


def test_an_input_larger_than_the_workers_memory_comes_through_whole(client, tmp_path):
    # 1.28 GB of edges on disk against 2 x 600 MiB (1.26 GB) of worker memory.
    edges, features, nodes = 20_000_000, 16, 50_000
    src_path, ids_path = tmp_path / "src.npy", tmp_path / "ids.npy"
    src = np.lib.format.open_memmap(src_path, "w+", np.float32, (edges, features))
    ids = np.lib.format.open_memmap(ids_path, "w+", np.int64, (edges,))
    rng = np.random.default_rng(5)
    step = 1_000_000
    for lo in range(0, edges, step):
        src[lo:lo + step] = rng.integers(0, 4, (step, features))  # integer values: exact sums
        ids[lo:lo + step] = rng.integers(0, nodes, step)
    src.flush()
    ids.flush()
    assert src.nbytes > 2 * 600 * 2**20
    S, I = gd.from_npy(src_path, chunks=(step, features)), gd.from_npy(ids_path, chunks=step)
    got = gd.scatter(S, I, 0, dim_size=nodes, reduce="sum").compute()
    want = ts.scatter(src, ids, 0, dim_size=nodes)  # the library on the memory maps, in this process
    np.testing.assert_array_equal(got, want)
    counts = gd.bincount(I, minlength=nodes).compute()
    assert counts.sum() == edges
    # No worker was restarted for memory (a lost worker would have shown as a KilledWorker error).
    assert len(client.scheduler_info()["workers"]) == 2


def test_repeated_computes_of_the_same_reduction_give_the_same_result(client):
    # The chains accumulate in place: graphs built by separate calls must not share their keys.
    rng = np.random.default_rng(9)
    src = rng.integers(0, 5, (3000, 4)).astype(np.float64)
    ids = rng.integers(0, 50, 3000)
    S, I = da.from_array(src, chunks=(250, 4)), da.from_array(ids, chunks=250)
    want = ts.scatter(src, ids, 0, dim_size=50)
    for _ in range(4):
        np.testing.assert_array_equal(gd.scatter(S, I, 0, dim_size=50).compute(), want)
    a, b = client.compute([gd.scatter(S, I, 0, dim_size=50), gd.scatter(S, I, 0, dim_size=50)], sync=True)
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b, want)


def test_progress_shows_dask_progress_locally_and_on_the_cluster(client, capsys):
    src = da.from_array(np.ones((1000, 2)), chunks=(100, 2))
    ids = da.from_array(np.arange(1000) % 7, chunks=100)
    result = gd.scatter(src, ids, 0, dim_size=7)
    # On the cluster: distributed.progress over the persisted result.
    (persisted,) = gd.progress(result)
    want = np.repeat(np.array([143.0] * 6 + [142.0])[:, None], 2, axis=1)
    np.testing.assert_array_equal(persisted.compute(), want)
    # Locally (the synchronous scheduler): a ProgressBar context that prints the bar.
    import dask

    with dask.config.set(scheduler="sync"):
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            result.compute(scheduler="sync")
    assert "100%" in capsys.readouterr().out


def test_float16_mean_of_a_group_larger_than_float16_can_count(client):
    n = 70_000  # more elements in one group than float16's largest finite value
    src = np.ones((n, 1), np.float16)
    got = gd.scatter(da.from_array(src, chunks=(10_000, 1)), da.from_array(np.zeros(n, np.int64), chunks=10_000),
                     0, dim_size=1, reduce="mean").compute()
    assert got.dtype == np.float16 and got[0, 0] == 1.0


READS = [{"bounds": "wrap"}, {"bounds": "clip"}, {"bounds": "fill", "fill_value": -7}]
WRITES = ["wrap", "clip", "drop"]


def _values(rng, shape, n, bounds):
    """Index values in -n..2n (-n..n under wrap): some in range, some not."""
    return rng.integers(-n, n if bounds == "wrap" else 2 * n, shape)


@pytest.mark.parametrize("policy", READS, ids=lambda p: p["bounds"])
def test_reads_under_each_bounds_policy_equal_the_in_memory_calls(client, policy):
    rng = np.random.default_rng(10)
    x = rng.integers(0, 1000, (60, 7)).astype(np.int32)
    X = da.from_array(x, chunks=(9, 4))
    flat = _values(rng, 41, 60, policy["bounds"])
    want = gather.index_select(x, 0, flat, **policy)
    # A NumPy index (routed on the client) and a Dask index (routed in the tasks) read the same.
    for index in (flat, da.from_array(flat, chunks=6)):
        np.testing.assert_array_equal(gd.take(X, index, 0, **policy).compute(), want)
        np.testing.assert_array_equal(gd.index_select(X, 0, index, **policy).compute(), want)
    nd = _values(rng, (3, 4), 7, policy["bounds"])
    np.testing.assert_array_equal(gd.take(X, nd, 1, **policy).compute(),
                                  gather.index_select(x, 1, nd.ravel(), **policy).reshape(60, 3, 4))
    gi = _values(rng, (50, 6), 60, policy["bounds"])
    got = gd.gather(X, 0, da.from_array(gi, chunks=(11, 5)), **policy).compute()
    np.testing.assert_array_equal(got, gather.gather(x, 0, gi, **policy))
    if policy["bounds"] == "fill":
        # Out-of-range values read the fill value, negative ones included, and nothing else does.
        out = (gi < 0) | (gi >= 60)
        assert out.any() and (got[out] == -7).all()
        np.testing.assert_array_equal(got[~out], np.take_along_axis(x[:, :6], np.where(out, 0, gi), 0)[~out])


@pytest.mark.parametrize("bounds", WRITES)
def test_writes_under_each_bounds_policy_equal_the_in_memory_calls(client, bounds):
    rng = np.random.default_rng(11)
    src = rng.integers(1, 4, (90, 5)).astype(np.float64)  # small integers: every order is exact
    inp = rng.integers(0, 9, (20, 5)).astype(np.float64)
    full = _values(rng, (90, 5), 20, bounds)
    lane = _values(rng, 90, 20, bounds)
    S = da.from_array(src, chunks=(17, 3))
    for index, spread in ((da.from_array(full, chunks=(13, 2)), full),
                          (da.from_array(lane, chunks=17), np.broadcast_to(lane[:, None], src.shape))):
        for reduce in ["sum", "prod", "mean", "amax", "amin"]:
            for include_self in [True, False]:
                got = gd.scatter_reduce(inp, 0, index, S, reduce, include_self, split_every=2, bounds=bounds)
                want = gather.scatter_reduce(inp, 0, spread, src, reduce, include_self=include_self, bounds=bounds)
                np.testing.assert_array_equal(got.compute(), want, err_msg=f"{reduce} {include_self}")
        np.testing.assert_array_equal(gd.scatter_add(inp, 0, index, S, bounds=bounds).compute(),
                                      gather.scatter_add(inp, 0, spread, src, bounds=bounds))
    if bounds == "drop":
        # A dropped write leaves its row as it was, and counts no member of a mean.
        got = gd.scatter_reduce(inp, 0, da.from_array(np.full(90, 25), chunks=17), S, "mean", bounds="drop")
        np.testing.assert_array_equal(got.compute(), inp)


def test_a_misused_policy_raises_the_librarys_error_when_the_graph_is_built(client):
    X = da.from_array(np.zeros((10, 2)), chunks=5)
    i2 = np.zeros((1, 2), np.int64)
    cases = [
        (lambda: gd.take(X, [1], bounds="drop"), "take: the Drop policy is for writes", 'bounds="fill"'),
        (lambda: gd.gather(X, 0, i2, bounds="fill"), "gather: bounds=fill needs a fill_value", None),
        (lambda: gd.index_select(X, 0, [1], bounds="modulo"), "index_select: unknown bounds policy", None),
        (lambda: gd.take(X, [1], fill_value=0), "fill_value goes with bounds=fill only", None),
        (lambda: gd.scatter_add(X, 0, i2, np.ones((1, 2)), bounds="fill", fill_value=0),
         "scatter_add: the Fill policy is for reads", 'bounds="drop"'),
        (lambda: gd.scatter_reduce(X, 0, i2, np.ones((1, 2)), "amax", bounds="fill", fill_value=0),
         "scatter_reduce: the Fill policy is for reads", 'bounds="drop"'),
        (lambda: gd.take(X.astype(np.uint8), [1], bounds="fill", fill_value=300), "without overflow", None),
    ]
    for build, message, hint in cases:
        with pytest.raises(gather.InvalidArgumentError) as e:
            build()  # no compute: the graph is never built
        assert message in str(e.value)
        if hint:
            assert hint in e.value.hint


def test_a_bad_index_is_reported_at_its_position_in_the_whole_index(client):
    X = da.from_array(np.zeros((10, 4)), chunks=(3, 2))
    cases = []
    flat = np.zeros((4, 5), np.int64)
    flat[2, 3] = 10  # block 2 of the flattened index (chunks of 4), its position 1
    cases.append((lambda: gd.take(X, da.from_array(flat.ravel(), chunks=4).reshape(4, 5), 0), 10, [2, 3]))
    cases.append((lambda: gd.take(X, flat, 0, bounds="wrap"), 10, [2, 3]))
    g, h = np.zeros((7, 4), np.int64), np.zeros((7, 4), np.int64)
    g[5, 3], h[5, 3] = -1, -11  # in block (1, 1) of the index
    cases.append((lambda: gd.gather(X, 0, da.from_array(g, chunks=(3, 2))), -1, [5, 3]))
    cases.append((lambda: gd.gather(X, 0, da.from_array(h, chunks=(3, 2)), bounds="wrap"), -11, [5, 3]))
    src = np.ones((9, 4))
    w = np.zeros((9, 4), np.int64)
    w[7, 1] = 10
    cases.append((lambda: gd.scatter_add(X, 0, da.from_array(w, chunks=(2, 3)), da.from_array(src, chunks=(2, 3))),
                  10, [7, 1]))
    lane = np.zeros(9, np.int64)
    lane[6] = -11
    cases.append((lambda: gd.scatter_reduce(X, 0, da.from_array(lane, chunks=4), src, "amax", bounds="wrap"),
                  -11, [6]))
    for run, value, position in cases:
        with pytest.raises(gather.IndexOutOfBoundsError) as e:
            run().compute()
        assert (e.value.index_value, e.value.coordinate) == (value, position)
        assert f"at index position {position})" in str(e.value)


def test_arrays_of_unknown_chunk_sizes_are_read_or_refused_with_the_fix(client):
    # Boolean indexing leaves Dask arrays with unknown (NaN) chunk sizes.
    x = np.arange(30.0) * 2
    X = da.from_array(x, chunks=8)
    ids = da.from_array(np.arange(30)[::-1], chunks=7)
    kept = ids[ids > 5]
    assert np.isnan(kept.chunks[0][0])
    # A read routes each block in its own task, whatever its size.
    np.testing.assert_array_equal(gd.take(X, kept).compute(), x[np.arange(30)[::-1][np.arange(30)[::-1] > 5]])
    with pytest.raises(gather.IndexOutOfBoundsError):
        gd.take(X, kept + 30).compute()
    # Ops that align an index's blocks with another array's ask for the sizes first.
    ones = kept.map_blocks(np.ones_like, dtype=np.float64)
    for build, name in [
        (lambda: gd.scatter_add(np.zeros(30), 0, kept, ones), "src"),
        (lambda: gd.gather(X, 0, kept), "index"),
        (lambda: gd.scatter(ones, kept, dim_size=30), "src"),
        (lambda: gd.bincount(kept), "x"),
    ]:
        with pytest.raises(ValueError, match=rf"unknown chunk sizes[\s\S]*{name}\.compute_chunk_sizes\(\)"):
            build()
    kept.compute_chunk_sizes()
    ones.compute_chunk_sizes()
    want = np.bincount(kept.compute(), minlength=30).astype(np.float64)
    np.testing.assert_array_equal(gd.scatter_add(np.zeros(30), 0, kept, ones).compute(), want)


def test_gather_ops_and_their_gradients_on_dask_arrays_run_on_the_cluster(client):
    # gather.<op> and gather.grad.<op> given Dask arrays: graphs whose tasks (index checks
    # included) travel to the worker processes.
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 8))
    i = rng.integers(0, 300, (120, 8))
    src = rng.standard_normal((120, 8))
    X, I, S = da.from_array(x, chunks=(70, 4)), da.from_array(i, chunks=(50, 8)), da.from_array(src, chunks=(50, 8))
    np.testing.assert_array_equal(gather.gather(X, 0, I).compute(), gather.gather(x, 0, i))
    got = gather.scatter_reduce(X, 0, I, S, "amax", include_self=False).compute()
    np.testing.assert_array_equal(got, gather.scatter_reduce(x, 0, i, src, "amax", include_self=False))
    g = rng.standard_normal(x.shape)
    got = gather.grad.scatter_reduce(g, X, 0, I, S, "mean")
    want = gather.grad.scatter_reduce(g, x, 0, i, src, "mean")
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.compute(), b, rtol=1e-12)
    bad = i.copy()
    bad[77, 3] = 300
    with pytest.raises(gather.IndexOutOfBoundsError, match=r"position \[77, 3\]"):
        gather.grad.gather(src, X, 0, da.from_array(bad, chunks=(50, 8))).compute()


def test_the_value_dependent_ops_and_torch_scatter_run_on_the_cluster(client):
    # Masks, repeats, the topk tree and pytorch_scatter's args: their tasks and compute-time
    # checks travel to the worker processes too.
    rng = np.random.default_rng(8)
    x = rng.integers(-5, 6, (300, 8)).astype(np.float64)
    X = da.from_array(x, chunks=(70, 4))
    mask = x > 1
    M = da.from_array(mask, chunks=(50, 8))
    src = rng.standard_normal(1000)
    np.testing.assert_array_equal(gather.masked_scatter(X, M, da.from_array(src, 300)).compute(),
                                  gather.masked_scatter(x, mask, src))
    got = gather.masked_select(X, M)
    np.testing.assert_array_equal(got.compute(), gather.masked_select(x, mask))
    r = rng.integers(0, 3, 300)
    np.testing.assert_array_equal(gather.repeat_interleave(X, da.from_array(r, 80), 0).compute(),
                                  gather.repeat_interleave(x, r, 0))
    values, at = gather.topk(X, 5, 0)
    want = gather.topk(x, 5, 0)
    np.testing.assert_array_equal(values.compute(), want[0])
    np.testing.assert_array_equal(at.compute(), want[1])
    index = rng.integers(0, 20, 300)
    for a, b in zip(ts.scatter_max(X, da.from_array(index, 70), 0), ts.scatter_max(x, index, 0)):
        np.testing.assert_array_equal(a.compute(), b)
    with pytest.raises(gather.GatherError, match="Number of elements of source"):
        gather.masked_scatter(X, M, da.from_array(src[:10], 5)).compute()

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

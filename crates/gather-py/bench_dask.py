"""gather.dask scatter_add against the plain Dask way, on a 2-worker LocalCluster, in alternating
rounds.

    python crates/gather-py/bench_dask.py --rounds 3

The workload of issue 33: 32M edges x 16 float32 features summed into 1M nodes. The edges and
their destination ids are generated on the workers and persisted there first (2 GiB + 256 MiB),
so each round times only the reduction. Each worker runs one task at a time with the library's
kernels single-threaded (``RAYON_NUM_THREADS=1``), as a worker with one thread should. The plain Dask way is ``np.add.at`` into a dense
``(nodes, 16)`` block per chunk, then a sum of the blocks; gather.dask runs the library's
scatter_add per chunk and the same tree. Both results are compared (float sums: within
tolerance; the trees group the same chunks). Prints the medians, the ratio, and each worker's
peak resident memory.
"""

from __future__ import annotations

import argparse
import statistics
import time

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, wait

from gather import dask as gd

EDGES, FEATURES, NODES = 32_000_000, 16, 1_000_000


def add_at(src, ids, nodes):
    out = np.zeros((nodes,) + src.shape[1:], src.dtype)
    np.add.at(out, ids, src)
    return out[None]


def plain(src, ids):
    """The plain Dask way: np.add.at per chunk, then a sum over the chunks."""
    parts = da.blockwise(
        add_at, "inf", src, "if", ids, "i", NODES, None,
        new_axes={"n": NODES}, adjust_chunks={"i": 1}, dtype=src.dtype, concatenate=True,
    )
    return parts.sum(axis=0, split_every=8)


def peak_rss():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=2_000_000)
    a = ap.parse_args()
    # One thread per worker process, and the library's kernels single-threaded inside it
    # (RAYON_NUM_THREADS): two processes of two threads each would fight over the two cores.
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="8GiB",
                      dashboard_address=None, env={"RAYON_NUM_THREADS": "1"}) as cluster, Client(cluster) as client:
        rs = da.random.RandomState(33)
        src = rs.random_sample((EDGES, FEATURES), chunks=(a.chunk, FEATURES)).astype(np.float32)
        ids = rs.randint(0, NODES, EDGES, chunks=a.chunk)
        src, ids = client.persist([src, ids])
        wait([src, ids])
        ours = gd.scatter(src, ids, 0, dim_size=NODES, reduce="sum")
        theirs = plain(src, ids)
        r1, r2 = client.compute([ours, theirs], sync=True)
        np.testing.assert_allclose(r1, r2, rtol=1e-4, atol=1e-3)
        times = {"gather.dask.scatter": [], "plain Dask (np.add.at per chunk, then sum)": []}
        for r in range(a.rounds):
            order = list(times) if r % 2 == 0 else list(reversed(times))
            for k in order:
                expr = ours if k.startswith("gather") else theirs
                t0 = time.perf_counter()
                client.compute(expr, sync=True)
                times[k].append(time.perf_counter() - t0)
        base = statistics.median(times["plain Dask (np.add.at per chunk, then sum)"])
        print(f"{EDGES} edges x {FEATURES} float32 into {NODES} nodes, chunks of {a.chunk} edges, "
              f"2 worker processes x 1 thread, {a.rounds} alternating rounds")
        print("| way | median s | rounds | speedup |")
        print("|---|---:|---|---:|")
        for k, v in times.items():
            m = statistics.median(v)
            print(f"| {k} | {m:.2f} | {', '.join(f'{x:.2f}' for x in v)} | {base / m:.2f}x |")
        peaks = client.run(peak_rss)
        print("peak worker RSS (includes the persisted 1.1 GiB of edges each):",
              ", ".join(f"{v / 2**30:.2f} GiB" for v in peaks.values()))


if __name__ == "__main__":
    main()

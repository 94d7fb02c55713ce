"""gather on PyTorch tensors: the DLPack path against the NumPy path, and gather.torch_scatter
against PyTorch's own scatter_reduce, on the W6/W7 data of WORKLOADS.md, in alternating rounds.

    python crates/gather-py/bench_frameworks.py --rounds 7

W6/W7: 1M source rows of 64 float32 reduced into 100k rows by a 1-D row id (expanded along the
features for the calls that need a full index). PyTorch runs with 2 threads (the machine's cores).
Each round times every variant once (the median of 3 calls each); the table gives the medians over
the rounds and the ratios against the baseline of the same round.

Targets (issue 33): the DLPack scatter_add within 10% of the NumPy one; torch_scatter sum/max at
least 1.2x faster than torch.scatter_reduce; results equal (max bitwise, sum within tolerance).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import gather
from gather import torch_scatter


def timed(fn, reps=3):
    best = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best.append(time.perf_counter() - t0)
    return statistics.median(best)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(2)
    rng = np.random.default_rng(6)
    n, rows, f = 1_000_000, 100_000, 64
    src = rng.random((n, f), dtype=np.float32)
    ids = rng.integers(0, rows, n)
    dst = np.zeros((rows, f), np.float32)
    index = np.broadcast_to(ids[:, None], src.shape)
    t_src, t_ids, t_dst = torch.from_numpy(src), torch.from_numpy(ids), torch.from_numpy(dst)
    t_index = t_ids[:, None].expand(n, f)

    variants = {
        "W6 scatter_add, NumPy arrays": lambda: gather.scatter_add(dst, 0, index, src),
        "W6 scatter_add, torch tensors (DLPack)": lambda: gather.scatter_add(t_dst, 0, t_index, t_src),
        "W6 torch.scatter_reduce sum": lambda: torch.zeros(rows, f).scatter_reduce(0, t_index, t_src, "sum", include_self=False),
        "W6 torch_scatter.scatter sum": lambda: torch_scatter.scatter(t_src, t_ids, 0, dim_size=rows, reduce="sum"),
        "W7 torch.scatter_reduce amax": lambda: torch.zeros(rows, f).scatter_reduce(0, t_index, t_src, "amax", include_self=False),
        "W7 torch_scatter.scatter max": lambda: torch_scatter.scatter(t_src, t_ids, 0, dim_size=rows, reduce="max"),
    }
    base = {
        "W6 scatter_add, torch tensors (DLPack)": "W6 scatter_add, NumPy arrays",
        "W6 torch_scatter.scatter sum": "W6 torch.scatter_reduce sum",
        "W7 torch_scatter.scatter max": "W7 torch.scatter_reduce amax",
    }

    # Results first: max bitwise, sums within float tolerance.
    ours = torch_scatter.scatter(t_src, t_ids, 0, dim_size=rows, reduce="max")
    assert torch.equal(ours, variants["W7 torch.scatter_reduce amax"]())
    ours = torch_scatter.scatter(t_src, t_ids, 0, dim_size=rows, reduce="sum")
    torch.testing.assert_close(ours, variants["W6 torch.scatter_reduce sum"](), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(variants["W6 scatter_add, torch tensors (DLPack)"](), torch.from_numpy(variants["W6 scatter_add, NumPy arrays"]()))

    times = {k: [] for k in variants}
    ratios = {k: [] for k in base}
    for r in range(a.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        this = {k: timed(variants[k]) for k in order}
        for k, v in this.items():
            times[k].append(v)
        for k, b in base.items():
            ratios[k].append(this[b] / this[k])
    print(f"| variant | median ms | vs baseline (median of {a.rounds} rounds, min-max) |")
    print("|---|---:|---|")
    for k in variants:
        ms = statistics.median(times[k]) * 1e3
        if k in ratios:
            rs = ratios[k]
            cell = f"{statistics.median(rs):.2f}x faster than `{base[k]}` ({min(rs):.2f}-{max(rs):.2f})"
        else:
            cell = "baseline"
        print(f"| {k} | {ms:.1f} | {cell} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Times every op of the family through `gather`'s PyTorch path and PyTorch's own op on the same
CPU tensors, in alternating blocks of calls in one process, and prints the ratio of PyTorch's median to
ours (above 1: we are faster).

    scripts/sweep_vs_torch.py                        # [2048, 2048], float32/float16/float64/int64
    scripts/sweep_vs_torch.py --n 1024 --dtypes float32 --only index_add,gather --reps 9
    scripts/sweep_vs_torch.py --layout t             # every data tensor transposed (F-order)
    scripts/sweep_vs_torch.py --slower 1.0           # only the rows where PyTorch is faster
    scripts/sweep_vs_torch.py --isolate --slower 0.9 # a process per case: trust short calls' rows

Operands: `[n, n]` tensors, indices of n positions along a dim (a vector for the index_* ops,
broadcast along the other dim for gather/scatter as a full `[n, n]` index) or `[n, n/4]` along
dim 1, and `n*n/2` flat positions for take/put. `--layout t` passes `x.T` (and transposed src,
mask) instead of contiguous tensors: the same values, F-order memory. Threads: `--threads`
(default 2) for both. Needs torch and the `gather` package in the running Python.
"""

import argparse
import statistics
import subprocess
import sys
import time

import torch

import gather


def cases(n, dtype, layout, g):
    """(name, ours, torch's) pairs of zero-argument calls on the same tensors."""
    floating = dtype.is_floating_point

    def data(*shape):
        if floating:
            t = torch.randn(*shape, generator=g).to(dtype)
        else:
            t = torch.randint(-1000, 1000, shape, generator=g, dtype=dtype)
        return t.T.contiguous().T if layout == "t" and t.dim() == 2 else t

    x = data(n, n)
    src = data(n, n)
    q = max(1, n // 4)
    full0 = torch.randint(0, n, (n, n), generator=g)          # random rows, dim 0
    perm = torch.randperm(n, generator=g)
    vec = torch.randint(0, n, (n,), generator=g)               # index_* positions
    narrow1 = torch.randint(0, n, (n, q), generator=g)         # [n, n/4] along dim 1
    flat = torch.randint(0, n * n, (n * n // 2,), generator=g)
    flat_src = data(n * n // 2)
    mask = torch.rand(n, n, generator=g) < 0.5
    if layout == "t":
        mask = mask.T.contiguous().T
    reps = torch.randint(0, 3, (n,), generator=g)
    fill = 1.5 if floating else 7

    out = [
        ("gather d0 full", lambda: gather.gather(x, 0, full0), lambda: torch.gather(x, 0, full0)),
        ("gather d1 [n,n/4]", lambda: gather.gather(x, 1, narrow1), lambda: torch.gather(x, 1, narrow1)),
        ("take_along_dim d0", lambda: gather.take_along_dim(x, full0, 0), lambda: torch.take_along_dim(x, full0, 0)),
        ("index_select d0", lambda: gather.index_select(x, 0, vec), lambda: torch.index_select(x, 0, vec)),
        ("index_select d1", lambda: gather.index_select(x, 1, vec), lambda: torch.index_select(x, 1, vec)),
        ("take", lambda: gather.take(x, flat), lambda: torch.take(x, flat)),
        ("scatter d0 perm rows", lambda: gather.scatter(x, 0, perm.expand(n, n).T, src),
         lambda: torch.scatter(x, 0, perm.expand(n, n).T, src)),
        ("scatter_add d0 full", lambda: gather.scatter_add(x, 0, full0, src), lambda: torch.scatter_add(x, 0, full0, src)),
        ("scatter_add d1 [n,n/4]", lambda: gather.scatter_add(x, 1, narrow1, src),
         lambda: torch.scatter_add(x, 1, narrow1, src)),
        ("index_add d0", lambda: gather.index_add(x, 0, vec, src), lambda: torch.index_add(x, 0, vec, src)),
        ("index_add d1", lambda: gather.index_add(x, 1, vec, src), lambda: torch.index_add(x, 1, vec, src)),
        ("index_copy d0", lambda: gather.index_copy(x, 0, perm, src), lambda: torch.index_copy(x, 0, perm, src)),
        ("index_copy d1", lambda: gather.index_copy(x, 1, perm, src), lambda: torch.index_copy(x, 1, perm, src)),
        ("index_fill d1", lambda: gather.index_fill(x, 1, vec, fill), lambda: torch.index_fill(x, 1, vec, fill)),
        ("put", lambda: gather.put(x, flat, flat_src), lambda: torch.put(x, flat, flat_src)),
        ("put accumulate", lambda: gather.put(x, flat, flat_src, True), lambda: torch.put(x, flat, flat_src, True)),
        ("masked_select", lambda: gather.masked_select(x, mask), lambda: torch.masked_select(x, mask)),
        ("masked_scatter", lambda: gather.masked_scatter(x, mask, src), lambda: torch.masked_scatter(x, mask, src)),
        ("masked_scatter row mask", lambda: gather.masked_scatter(x, mask[:1], src),
         lambda: torch.masked_scatter(x, mask[:1], src)),
        ("repeat_interleave d0", lambda: gather.repeat_interleave(x, reps, 0),
         lambda: torch.repeat_interleave(x, reps, 0)),
        ("sort d1", lambda: gather.sort(x, 1), lambda: torch.sort(x, 1)),
        ("argsort d0", lambda: gather.argsort(x, 0), lambda: torch.argsort(x, 0)),
        ("topk d1 k=8", lambda: gather.topk(x, 8, 1), lambda: torch.topk(x, 8, 1)),
    ]
    for red in ("sum", "prod", "mean", "amax", "amin"):
        if red == "mean" and not floating:
            continue
        out.append((f"scatter_reduce {red} d0 full", lambda r=red: gather.scatter_reduce(x, 0, full0, src, r),
                    lambda r=red: torch.scatter_reduce(x, 0, full0, src, r)))
        out.append((f"scatter_reduce {red} d1 [n,n/4]",
                    lambda r=red: gather.scatter_reduce(x, 1, narrow1, src, r),
                    lambda r=red: torch.scatter_reduce(x, 1, narrow1, src, r)))
    for red in ("prod", "mean", "amax", "amin"):
        if red == "mean" and not floating:
            continue
        out.append((f"index_reduce {red} d0", lambda r=red: gather.index_reduce(x, 0, vec, src, r),
                    lambda r=red: torch.index_reduce(x, 0, vec, src, r)))
        out.append((f"index_reduce {red} d1", lambda r=red: gather.index_reduce(x, 1, vec, src, r),
                    lambda r=red: torch.index_reduce(x, 1, vec, src, r)))
    return out


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--dtypes", default="float32,float16,float64,int64")
    ap.add_argument("--layout", choices=["c", "t"], default="c")
    ap.add_argument("--reps", type=int, default=5, help="timed calls in a block of one side")
    ap.add_argument("--rounds", type=int, default=2, help="blocks of each side, alternating")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated substrings of case names")
    ap.add_argument("--slower", type=float, default=None, help="print only rows with ratio below this")
    ap.add_argument("--isolate", action="store_true",
                    help="each case and dtype in a process of its own (slower to run, but a case's "
                         "times do not depend on the cases before it)")
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)  # one exact name (--isolate's)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    only = [s for s in a.only.split(",") if s]
    if a.case is None:
        print(f"# n={a.n} layout={a.layout} threads={a.threads}, {a.rounds} blocks of {a.reps} calls per side; "
              f"µs medians, ratio = torch / ours{'; a process per case' if a.isolate else ''}")
        print(f"{'case':34} {'dtype':8} {'ours':>10} {'torch':>10} {'ratio':>6}")
    for dname in a.dtypes.split(","):
        dtype = getattr(torch, dname)
        if a.isolate:
            # In one process the earlier cases left ours slower on later short ones (the memory
            # the process holds, torch's spinning workers); docs/performance.md has the figures.
            for name, _, _ in cases(4, dtype, a.layout, g):  # tiny tensors: the names only
                if only and not any(s in name for s in only):
                    continue
                run = subprocess.run(
                    [sys.executable, __file__, "--case", name, "--dtypes", dname, "--n", str(a.n),
                     "--layout", a.layout, "--reps", str(a.reps), "--rounds", str(a.rounds),
                     "--threads", str(a.threads)]
                    + ([] if a.slower is None else ["--slower", str(a.slower)]),
                    capture_output=True, text=True)
                # No output from a case that ran is a row --slower left out.
                out = run.stdout.strip() if run.returncode == 0 else \
                    f"{name:34} {dname:8} failed: {run.stderr.strip()[-200:]}"
                if out:
                    print(out, flush=True)
            continue
        for name, ours, theirs in cases(a.n, dtype, a.layout, g):
            if a.case is not None and name != a.case:
                continue
            if only and not any(s in name for s in only):
                continue
            try:
                ours(), theirs()  # warm up; the first call also checks both accept the case
            except (RuntimeError, gather.GatherError) as e:
                print(f"{name:34} {dname:8} skipped: {str(e).splitlines()[0][:60]}")
                continue
            # Blocks of calls, each side in turn, the order flipped every round; the first call of
            # a block is not timed. Call by call alternation timed each side on a core the other's
            # idle threads still spun on (torch's OpenMP workers spin for milliseconds after each
            # parallel region), which doubled some of our times.
            mine, torchs = [], []
            for r in range(a.rounds):
                for f, times in ((ours, mine), (theirs, torchs))[:: 1 if r % 2 == 0 else -1]:
                    f()
                    times.extend(timed(f) for _ in range(a.reps))
            m, t = statistics.median(mine) * 1e6, statistics.median(torchs) * 1e6
            if a.slower is None or t / m < a.slower:
                print(f"{name:34} {dname:8} {m:10.0f} {t:10.0f} {t / m:6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

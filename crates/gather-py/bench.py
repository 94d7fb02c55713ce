"""gather (Python bindings) against NumPy on the WORKLOADS.md workloads, in the same run.

    python crates/gather-py/bench.py                 # W1, W3, W6, W7, W9
    python crates/gather-py/bench.py --workloads W6,W7 --repeat 5

The data comes from shared/bench/workloads.py (fixed seeds); the NumPy expressions are those of
shared/bench/anchors.py (``numpy_variants``), so the NumPy column is comparable with WORKLOADS.md.
Every gather call is out of place, like NumPy's (W6/W7 copy ``dst`` on both sides), and takes its
stride-0 index as a ``np.broadcast_to`` view. Results are checked against NumPy's before timing.
The table prints medians in ms and the speedup (NumPy time / gather time).

Targets (issue 8): at least 10x faster than NumPy on W6/W7, and never slower on any of them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import gather

DEFAULT = "W1,W3,W6,W7,W9"


def bench_dir() -> Path:
    env = os.environ.get("GATHER_BENCH_DIR")
    if env:
        return Path(env)
    root = Path(__file__).resolve().parent.parent.parent
    for c in (root.parent / "shared" / "bench", root / "shared" / "bench"):
        if (c / "workloads.py").is_file():
            return c
    raise SystemExit("shared/bench/workloads.py not found: set GATHER_BENCH_DIR")


def variants(name: str, d: dict):
    """(label, numpy_fn, gather_fn, exact) for one workload."""
    tal = np.take_along_axis
    if name.startswith("W1_"):
        x, i = d["x"], d["index"]
        return [("gather dim 1 vs take_along_axis", lambda: tal(x, i, axis=1), lambda: gather.gather(x, 1, i), True)]
    if name.startswith("W3_"):
        x, ind = d["patches"], d["indices"]
        ib = np.broadcast_to(ind[:, :, None], (ind.shape[0], ind.shape[1], x.shape[2]))
        return [
            (
                "gather dim 1, stride-0 index vs take_along_axis",
                lambda: tal(x, ind[:, :, None], axis=1),
                lambda: gather.gather(x, 1, ib),
                True,
            )
        ]
    if name.startswith(("W6_", "W7_")):
        src, dst, i = d["src"], d["dst"], d["index"]
        ib = np.broadcast_to(i[:, None], src.shape)
        if name.startswith("W6_"):

            def np_add():
                o = dst.copy()
                np.add.at(o, i, src)
                return o

            return [
                ("scatter_add vs np.add.at", np_add, lambda: gather.scatter_add(dst, 0, ib, src), False),
                (
                    "scatter_reduce sum vs np.add.at",
                    np_add,
                    lambda: gather.scatter_reduce(dst, 0, ib, src, "sum"),
                    False,
                ),
            ]

        def np_max():  # include_self=False: start from -inf, untouched rows keep self
            o = np.full_like(dst, -np.inf)
            np.maximum.at(o, i, src)
            return np.where(np.isneginf(o), dst, o)

        return [
            (
                "scatter_reduce amax (include_self=False) vs np.maximum.at",
                np_max,
                lambda: gather.scatter_reduce(dst, 0, ib, src, "amax", include_self=False),
                True,
            )
        ]
    if name.startswith("W9_"):
        x, i = d["x"], d["idx"]
        return [
            ("gather dim 0 (1-d) vs take_along_axis", lambda: tal(x, i, axis=0), lambda: gather.gather(x, 0, i), True),
            ("take vs np.take", lambda: np.take(x, i), lambda: gather.take(x, i), True),
        ]
    raise SystemExit(f"no variants for {name}")


def median_ms(fn, repeat: int, budget_s: float) -> float:
    fn()  # warm up (and fault in the allocator's pages)
    times = []
    start = time.perf_counter()
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget_s and len(times) >= 3:
            break
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=DEFAULT, help=f"comma list of workload prefixes (default {DEFAULT})")
    ap.add_argument("--repeat", type=int, default=7, help="timed calls per measurement (median)")
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per measurement at most (>= 3 calls)")
    args = ap.parse_args()

    sys.path.insert(0, str(bench_dir()))
    import workloads as wl  # noqa: E402

    rows = []
    for w in wl.select(args.workloads):
        d = w.make()
        for label, np_fn, g_fn, exact in variants(w.name, d):
            ref, got = np_fn(), g_fn()
            if exact:
                np.testing.assert_array_equal(got, ref)
            else:
                np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
            t_np = median_ms(np_fn, args.repeat, args.budget)
            t_g = median_ms(g_fn, args.repeat, args.budget)
            rows.append((w.name, label, t_np, t_g, t_np / t_g))
            print(f"  {w.name:22} {label:56} numpy {t_np:9.2f} ms  gather {t_g:8.2f} ms", file=sys.stderr, flush=True)
        del d

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\ngather (Python) vs NumPy {np.__version__}; {os.cpu_count()} CPUs, load average {load:.2f}; medians in ms\n")
    print(f"| workload | comparison | NumPy | gather | speedup |")
    print(f"|---|---|---:|---:|---:|")
    for name, label, t_np, t_g, ratio in rows:
        print(f"| {name} | {label} | {t_np:.2f} | {t_g:.2f} | {ratio:.1f}x |")
    slow = [r for r in rows if r[4] < 1.0]
    w67 = [r for r in rows if r[0].startswith(("W6_", "W7_"))]
    print()
    print("never slower than NumPy: " + ("yes" if not slow else "NO: " + ", ".join(f"{r[0]} {r[1]}" for r in slow)))
    if w67:
        print("W6/W7 at least 10x: " + ("yes" if all(r[4] >= 10 for r in w67) else "NO"))


if __name__ == "__main__":
    main()

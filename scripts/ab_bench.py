#!/usr/bin/env python3
"""A/B of two `gather` binaries on `gather bench`, in alternating rounds.

    python3 scripts/ab_bench.py OLD_BINARY NEW_BINARY [--rounds 3] [--only W1,W6] [-- BENCH_ARGS...]

Each round runs `OLD bench --json ...` then `NEW bench --json ...` (the order flips every round,
so neither binary always runs on a machine warmed or disturbed by the other). It prints, per
workload, every round's median of both binaries, the median of those medians, new/old, and
whether the new binary is slower beyond the rounds' spread: its best round median is above the
old binary's worst. Exit code 0 in every case; the table is the result.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run(binary, extra, out):
    cmd = [binary, "bench", "--json", str(out), *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    data = json.loads(Path(out).read_text())
    return {w["name"]: w["median_s"] for w in data["workloads"]}


def fmt(s):
    return f"{s * 1e3:.3f}" if s >= 1e-3 else f"{s * 1e6:.1f}u"


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", default=None)
    a = p.parse_args(argv)
    if a.only:
        extra = ["--only", a.only, *extra]
    rounds = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
            for side in order:
                out = Path(tmp) / f"{side}{r}.json"
                rounds[side].append(run(getattr(a, side), extra, out))
                print(f"round {r + 1}/{a.rounds}: {side} done", file=sys.stderr)
    names = list(rounds["old"][0])
    print("| workload | old rounds (ms) | new rounds (ms) | old median | new median | new/old | slower beyond spread |")
    print("|---|---|---|---:|---:|---:|---|")
    for n in names:
        old = [r[n] for r in rounds["old"] if n in r]
        new = [r[n] for r in rounds["new"] if n in r]
        mo, mn = statistics.median(old), statistics.median(new)
        slower = "**yes**" if min(new) > max(old) else "no"
        print(
            f"| {n} | {'/'.join(fmt(x) for x in old)} | {'/'.join(fmt(x) for x in new)} "
            f"| {fmt(mo)} | {fmt(mn)} | {mn / mo:.2f} | {slower} |"
        )


if __name__ == "__main__":
    main()

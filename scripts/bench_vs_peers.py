#!/usr/bin/env python3
"""Times `gather bench` and the Python peers (PyTorch with 2 threads, NumPy, JAX) in the same run
and prints, per workload, the ratio peer median / our median next to issue 5's targets.

    scripts/bench_vs_peers.py                          # every workload, all peers found
    scripts/bench_vs_peers.py --only W3,W6 --rounds 3  # medians over 3 alternating rounds
    scripts/bench_vs_peers.py --python /work/venv-peers/bin/python

The peers run through ../shared/bench/anchors.py (`anchors.py peer --peer P`), each in its own
process, with the Python given by --python (default: $PEERS_PYTHON, else ../venv-peers/bin/python
beside the checkout when it exists, else python3). Peers that are not installed are skipped with a
message: anchors.py needs torch (its reference) for every peer, and jax for the jax peer. Only the
Python standard library is needed to run this script itself.

Ratios are computed from medians measured in this run on this machine (never against the
figures of WORKLOADS.md). With --rounds N, gather bench and each peer run N times, alternating,
and each side's figure is the median of its N medians. The exit code is 0 unless a run fails
(or, with --check, unless every target is met).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Issue 5's targets: minimal ratio torch_2t median / our median (W0: our latency < 1 us).
TARGETS = {
    "W0_tiny": ("< 1 us per call", None),
    "W1_seed": (">= 2x", 2.0),
    "W2_token_logits": (">= 2x", 2.0),
    "W3_topk_patches": (">= 5x, <= 2x limit", 5.0),
    "W4_roi_labels": (">= 10x", 10.0),
    "W5_dim0_random": (">= 3x", 3.0),
    "W6_scatter_add_rows": (">= 3x", 3.0),
    "W7_scatter_amax_rows": (">= 3x", 3.0),
    "W8_index_select_rows": (">= 3x", 3.0),
    "W9_take_1d": (">= 3x", 3.0),
    "W10_cube": (">= 2x", 2.0),
    "W11a_scatter_2d_set": (">= 1.5x", 1.5),
    "W11b_scatter_2d_add": (">= 1.5x", 1.5),
}
PEERS = ["torch_2t", "numpy", "jax"]
NEEDS = {"torch_2t": ["torch"], "torch_1t": ["torch"], "numpy": ["torch", "numpy"],
         "jax": ["torch", "jax"]}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def default_python():
    if os.environ.get("PEERS_PYTHON"):
        return os.environ["PEERS_PYTHON"]
    venv = os.path.join(os.path.dirname(ROOT), "venv-peers", "bin", "python")
    return venv if os.path.exists(venv) else (shutil.which("python3") or "python3")


def has_modules(python, mods):
    """The modules of `mods` that `python` cannot import."""
    probe = ("import importlib.util, sys; "
             "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))")
    try:
        r = subprocess.run([python, "-c", probe, *mods], capture_output=True, text=True)
    except OSError:
        return list(mods)
    return r.stdout.split() if r.returncode == 0 else list(mods)


def build_gather():
    log("+ cargo build --release -p gather-cli")
    subprocess.run(["cargo", "build", "--release", "-p", "gather-cli"], cwd=ROOT, check=True)
    return os.path.join(ROOT, "target", "release", "gather")


def run_ours(gather, a, tmp, rnd):
    out = os.path.join(tmp, f"gather_{rnd}.json")
    cmd = [gather, "bench", "--json", out, "--threads", str(a.threads), "--budget",
           str(a.budget)]
    if a.only:
        cmd += ["--only", a.only]
    if a.scale != 1.0:
        cmd += ["--scale", str(a.scale)]
    log("+ " + " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    sys.stderr.write(r.stdout)
    if r.returncode not in (0, 1):  # 1: a wrong result, recorded in the JSON
        raise SystemExit(f"gather bench failed with exit code {r.returncode}")
    with open(out) as f:
        return json.load(f)


def run_peer(python, anchors, peer, names, budget):
    cmd = [python, anchors, "peer", "--peer", peer, "--workloads", ",".join(names),
           "--budget", str(budget)]
    log("+ " + " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        log(f"peer {peer} failed (exit code {r.returncode}); skipped")
        return None
    return json.loads(r.stdout)


def fmt_ms(s):
    if s is None:
        return "—"
    if s < 1e-3:
        return f"{s * 1e3:.4f}"
    return f"{s * 1e3:.3g}" if s < 1 else f"{s * 1e3:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="workloads, e.g. W3,W6 (default: all)")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="default: torch_2t,numpy,jax; torch_1t may be added (a reference that "
                         "suffers less when other work shares the cores)")
    ap.add_argument("--python", default=default_python(), help="the peers' Python")
    ap.add_argument("--anchors", default=os.path.join(os.path.dirname(ROOT), "shared", "bench",
                                                      "anchors.py"))
    ap.add_argument("--gather", default=None,
                    help="the gather binary (default: cargo build --release -p gather-cli)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget", type=float, default=0.5,
                    help="seconds of timed calls per workload and peer")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="gather bench --scale (peers always run full size: ratios then "
                         "mean nothing; for smoke tests only)")
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "bench_vs_peers.json"),
                    help="where to write every record of the run")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every target is met")
    a = ap.parse_args()

    gather = a.gather or build_gather()
    peers = [p for p in a.peers.split(",") if p]
    if not os.path.exists(a.anchors):
        log(f"{a.anchors} not found: the peers are skipped")
        peers = []
    usable = []
    for p in peers:
        if p not in NEEDS:
            raise SystemExit(f"unknown peer {p} (known: {', '.join(NEEDS)})")
        missing = has_modules(a.python, NEEDS[p])
        if missing:
            log(f"peer {p} skipped: {a.python} cannot import {', '.join(missing)} "
                "(see the README's Performance section to install it)")
        else:
            usable.append(p)

    ours_runs, peer_runs = [], {p: [] for p in usable}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(a.rounds):
            ours = run_ours(gather, a, tmp, rnd)
            ours_runs.append(ours)
            # The peers run WORKLOADS.md's workloads; ours beyond them (W6p: a reused
            # ScatterPlan, batched select ...) have no peer counterpart.
            names = [w["name"] for w in ours["workloads"]
                     if w["name"] != "W0_tiny" and w["name"] in TARGETS]
            for p in usable:
                if not names:
                    break
                recs = run_peer(a.python, a.anchors, p, names, a.budget)
                if recs is not None:
                    peer_runs[p].append(recs)

    # our figures: median over rounds of each run's median
    ours_by = {}
    for run in ours_runs:
        for w in run["workloads"]:
            ours_by.setdefault(w["name"], []).append(w)
    bw = statistics.median(r["bandwidth_gbps"] for r in ours_runs)

    def ours_median(name):
        xs = [w["median_s"] for w in ours_by[name] if w["median_s"] is not None]
        return statistics.median(xs) if xs else None

    def peer_median(p, name, variant=""):
        xs = [r["median_s"] for recs in peer_runs.get(p, []) for r in recs
              if r["workload"] == name and r["variant"] == variant and r.get("median_s")]
        return statistics.median(xs) if xs else None

    def best_peer(name):
        """Fastest (peer, variant, median) over every peer and variant of this run."""
        best = None
        for p, runs in peer_runs.items():
            variants = {r["variant"] for recs in runs for r in recs if r["workload"] == name}
            for v in variants:
                m = peer_median(p, name, v)
                if m is not None and (best is None or m < best[2]):
                    best = (p, v, m)
        return best

    rows, all_met = [], True
    for name, ws in ours_by.items():
        w0 = ws[0]
        ours_s = ours_median(name)
        limit_s = w0["min_bytes"] / (bw * 1e9)
        verified = all(w["verified"] for w in ws)
        mem_ok = all(w.get("memory_ok", True) for w in ws)
        torch_s = peer_median("torch_2t", name)
        ratio = torch_s / ours_s if (torch_s and ours_s) else None
        text, need = TARGETS.get(name, ("—", None))
        if name == "W0_tiny":
            met = ours_s is not None and ours_s < 1e-6
        elif need is None or ratio is None:
            met = None  # no torch figure in this run
        else:
            met = ratio >= need
            if name.startswith("W3_") and ours_s is not None:
                met = met and ours_s <= 2 * limit_s
        best = best_peer(name)
        fastest_ok = None if (best is None or ours_s is None) else ours_s <= best[2]
        ok = met is not False and fastest_ok is not False and verified and mem_ok
        all_met &= bool(ok) and met is not None
        rows.append(dict(name=name, ours_s=ours_s, limit_s=limit_s, torch_2t_s=torch_s,
                         ratio_torch_2t=ratio,
                         ratios={p: (peer_median(p, name) / ours_s
                                     if peer_median(p, name) and ours_s else None)
                                 for p in usable},
                         target=text, target_met=met, best_peer=best,
                         not_slower_than_fastest_peer=fastest_ok, verified=verified,
                         memory_ok=mem_ok, extra_bytes=w0.get("extra_bytes"),
                         out_bytes=w0.get("out_bytes")))

    # the table
    head = (["workload", "limit ms", "gather ms", "%bw", "torch_2t ms"] +
            [f"{p}/gather" for p in usable] + ["target (vs torch_2t)", "met",
                                               "fastest peer", "mem", "check"])
    load = ""
    if hasattr(os, "getloadavg"):
        load = f"; load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    print(f"bandwidth {bw:.1f} GB/s; gather on {a.threads} threads; {a.rounds} round(s); "
          f"peers: {', '.join(usable) or 'none'}{load}\n")
    print("| " + " | ".join(head) + " |")
    numeric = range(1, 5 + len(usable))
    print("|" + "|".join("---:" if i in numeric else "---" for i in range(len(head))) + "|")
    for r in rows:
        ours_s = r["ours_s"]
        if r["name"] == "W0_tiny":
            ours_txt = f"{ours_s * 1e9:.0f} ns" if ours_s else "—"
        else:
            ours_txt = fmt_ms(ours_s)
        pct = f"{100 * r['limit_s'] / ours_s:.0f}" if ours_s else "—"
        cells = [r["name"], fmt_ms(r["limit_s"]), ours_txt, pct, fmt_ms(r["torch_2t_s"])]
        for p in usable:
            x = r["ratios"][p]
            cells.append(f"{x:.2f}x" if x else "—")
        met = {True: "yes", False: "**NO**", None: "—"}[r["target_met"]]
        b = r["best_peer"]
        if b is None:
            fastest = "—"
        else:
            label = b[0] + (f" {b[1]}" if b[1] else "")
            fastest = (f"{'ok' if r['not_slower_than_fastest_peer'] else '**slower**'} "
                       f"({label} {fmt_ms(b[2])})")
        cells += [r["target"], met, fastest, "ok" if r["memory_ok"] else "**OVER**",
                  "ok" if r["verified"] else "**WRONG**"]
        print("| " + " | ".join(cells) + " |")
    print("\nratio = peer median / gather median (above 1: gather is faster). %bw = limit time /"
          " gather's median. met: the issue's target against torch_2t (W0: < 1 us per call;"
          " W3 also within 2x the limit time). fastest peer: the fastest peer and variant of this"
          " run; `ok` when gather is not slower.")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(dict(bandwidth_gbps=bw, threads=a.threads, rounds=a.rounds, peers=usable,
                       rows=rows, gather_runs=ours_runs, peer_runs=peer_runs), f, indent=1)
    log(f"wrote {a.out}")
    if a.check and not all_met:
        sys.exit(1)


if __name__ == "__main__":
    main()

"""PyTorch on the GPU for the workloads of `gather bench --device cuda`, timed the same way.

Each call is timed alone with CUDA events after a synchronize (as `gather bench --device cuda`
times its calls), median of --repeat calls after --warmup. The scatter workloads are also timed
with torch.use_deterministic_algorithms(True). Prints one JSON document.

    python3 scripts/bench_cuda_torch.py --json torch.json [--large]
"""

import argparse
import json
import statistics

import torch


def timed(fn, warmup, repeat):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return statistics.median(times), min(times)


def workloads(large):
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)

    def rnd(*shape):
        return torch.rand(*shape, device=dev, generator=g)

    def ids(n, bound):
        return torch.randint(0, bound, (n,), device=dev, generator=g)

    w = {}
    x = rnd(1000, 1000)
    i = ids(1000 * 500, 1000).view(1000, 500)
    w["W1_seed"] = (lambda x=x, i=i: torch.gather(x, 1, i), False)
    logits = rnd(8, 512, 32000)
    labels = ids(8 * 512, 32000).view(8, 512, 1)
    w["W2_token_logits"] = (lambda x=logits, i=labels: torch.gather(x, -1, i), False)
    patches = rnd(64, 196, 768)
    keep = torch.argsort(rnd(64, 196), dim=1)[:, :49]
    w["W3_topk_patches"] = (
        lambda x=patches, i=keep.unsqueeze(-1).expand(64, 49, 768): torch.gather(x, 1, i),
        False,
    )
    roi = rnd(65536, 21, 4)
    lab = ids(65536, 21).view(65536, 1, 1).expand(65536, 1, 4)
    w["W4_roi_labels"] = (lambda x=roi, i=lab: torch.gather(x, 1, i), False)
    x5 = rnd(4096, 4096)
    i5 = ids(4096 * 4096, 4096).view(4096, 4096)
    w["W5_dim0_random"] = (lambda x=x5, i=i5: torch.gather(x, 0, i), False)
    dst = torch.zeros(100000, 64, device=dev)
    src = rnd(1000000, 64)
    row = ids(1000000, 100000).view(-1, 1).expand(1000000, 64)
    w["W6_scatter_add_rows"] = (lambda d=dst, i=row, s=src: d.scatter_add(0, i, s), True)
    w["W7_scatter_amax_rows"] = (
        lambda d=dst, i=row, s=src: d.scatter_reduce(0, i, s, "amax", include_self=False),
        True,
    )
    table = rnd(100000, 256)
    sel = ids(50000, 100000)
    w["W8_index_select_rows"] = (lambda t=table, i=sel: torch.index_select(t, 0, i), False)
    x9 = rnd(16777216)
    i9 = ids(16777216, 16777216)
    w["W9_take_1d"] = (lambda x=x9, i=i9: torch.take(x, i), False)
    x10 = rnd(100, 100, 100)
    i10 = ids(1000000, 100).view(100, 100, 100)
    w["W10_cube"] = (lambda x=x10, i=i10: torch.gather(x, 1, i), False)
    d11 = torch.zeros(1000, 1000, device=dev)
    i11 = ids(500000, 1000).view(1000, 500)
    s11 = rnd(1000, 500)
    w["W11a_scatter_2d_set"] = (lambda d=d11, i=i11, s=s11: d.scatter(1, i, s), True)
    w["W11b_scatter_2d_add"] = (lambda d=d11, i=i11, s=s11: d.scatter_add(1, i, s), True)
    if large:
        v, e = 1 << 20, 16 << 20
        d = torch.zeros(v, 64, device=dev)
        s = rnd(e, 64)
        r = ids(e, v).view(-1, 1).expand(e, 64)
        w["W6x16"] = (lambda d=d, i=r, s=s: d.scatter_add(0, i, s), True)
        t = rnd(2 << 20, 256)
        q = ids(1 << 20, 2 << 20)
        w["W8x20"] = (lambda t=t, i=q: torch.index_select(t, 0, i), False)
        n = 1 << 28
        x = rnd(n)
        k = ids(n, n)
        w["W9x16"] = (lambda x=x, i=k: torch.take(x, i), False)
    return w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=50)
    a = ap.parse_args()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "workloads": {}}
    for name, (fn, scatter) in workloads(a.large).items():
        torch.use_deterministic_algorithms(False)
        med, mn = timed(fn, a.warmup, a.repeat)
        r = {"median_s": med, "min_s": mn}
        if scatter:
            torch.use_deterministic_algorithms(True)
            med, mn = timed(fn, a.warmup, max(5, a.repeat // 5) if name == "W6x16" else a.repeat)
            r["det_median_s"] = med
            torch.use_deterministic_algorithms(False)
        res["workloads"][name] = r
        print(name, {k: round(v * 1e6, 1) for k, v in r.items()}, flush=True)
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

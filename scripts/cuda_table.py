"""Joins `gather bench --device cuda --json` and `bench_cuda_torch.py --json` into one table:
median µs of each, and PyTorch's time over ours (>1: we are faster).

    python3 scripts/cuda_table.py ours.json torch.json
"""

import json
import sys

ours = {w["name"]: w for w in json.load(open(sys.argv[1]))["workloads"]}
torch = json.load(open(sys.argv[2]))["workloads"]
print(f"{'workload':<22} {'ours µs':>9} {'torch µs':>9} {'torch/ours':>10} {'det µs':>9} {'det/ours':>9} {'limit µs':>9}")
for name, w in ours.items():
    # Our atomic W6 row beside PyTorch's W6 (its default is atomics too), and our plan's (the
    # fold alone; PyTorch has no plan) beside its W6.
    t = torch.get(name) or torch.get(name.removesuffix("_atomic").removesuffix("_plan"), {})
    m = w["median_s"]
    tm = t.get("median_s")
    det = t.get("det_median_s")
    row = f"{name:<22} {m*1e6:>9.1f} "
    row += f"{tm*1e6:>9.1f} {tm/m:>10.2f} " if tm else f"{'-':>9} {'-':>10} "
    row += f"{det*1e6:>9.1f} {det/m:>9.2f} " if det else f"{'-':>9} {'-':>9} "
    # The limit at the 4.23 TB/s copy rate the issue measured on an H200 (an H100 copies ~3.0).
    row += f"{w['min_bytes']/3.0e12*1e6:>9.1f}"
    print(row)

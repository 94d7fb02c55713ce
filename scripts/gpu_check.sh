#!/usr/bin/env bash
# The GPU visit, as one prepared run on a lent GPU (the device tool; no Rust toolchain there):
# the GPU unit tests, the conformance suite on CUDA, the Python package on torch/CuPy/JAX CUDA
# arrays, the workloads against PyTorch in the same run, and compute-sanitizer's memcheck over
# the tests and the suite's error cases. Results go to $OUT; the table comes last.
#
# Prepare here, then carry `gpu/` (ignored through .git/info/exclude; packed into one file,
# as the tree that travels is limited to 64 MiB):
#   scripts/gpu_check.sh --prepare && mv gpu /tmp/gpu && mkdir gpu \
#     && tar -C /tmp -czf gpu/pack.tgz gpu
# On the GPU machine (`tar xzf gpu/pack.tgz` first), name the parts in the order they matter;
# they stop at a deadline (GATHER_VISIT_S, below):
#   scripts/gpu_check.sh table tests limits ab counters
# `table`: ours against PyTorch, the targets (about 1.5 minutes); `tests`: unit tests, suite,
# Python, sanitizer (about 2.5); `ab`: this build against the baseline build and its other ways,
# alternating (about 1.5); `bench` is table and ab; `counters`: Nsight Compute's counters of the
# kernels of the workloads that miss their targets (about 2); `limits`: the floor of random
# reads under W9 and W9x16 (about 0.5). No part: table, then tests.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--prepare" ]; then
    set -e
    rm -rf gpu && mkdir -p gpu
    cargo build --release -p gather-cli 2>&1 | tail -1
    cargo test -p gather-cuda --features dynamic --test gpu --no-run 2>&1 | tail -1
    bin=$(ls -t "${CARGO_TARGET_DIR:-target}"/debug/deps/gpu-* | grep -v '\.d$' | head -1)
    cp "$bin" gpu/gpu-tests
    cp "${CARGO_TARGET_DIR:-target}/release/gather" gpu/gather
    # The baseline of the A/B (GATHER_BASELINE, default the build the last visit measured), from
    # a worktree, in its own target.
    base="${GATHER_BASELINE:-e54c9c2a}"
    rm -rf target/baseline-src && git worktree prune
    git worktree add -f --detach target/baseline-src "$base" > /dev/null
    tdir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
    (cd target/baseline-src && CARGO_TARGET_DIR="$tdir/baseline" cargo build --release -p gather-cli 2>&1 | tail -1)
    cp "$tdir/baseline/release/gather" gpu/gather-base
    git worktree remove --force target/baseline-src
    git rev-parse --short "$base" > gpu/BASELINE
    strip gpu/gather gpu/gather-base gpu/gpu-tests
    # The Python package (abi3 wheel, dev profile: it reuses what cargo test built; the wheel
    # profile of pyproject.toml would compile the library again, optimised) for the
    # CUDA-array tests; pytest, torch, cupy and jax are on the GPU machine.
    venv="${GATHER_PY_VENV:-target/py-venv}"
    maturin=$( [ -x "$venv/bin/maturin" ] && echo "$venv/bin/maturin" || echo maturin )
    "$maturin" build --quiet --profile dev --manifest-path crates/gather-py/Cargo.toml --out gpu 2>&1 | tail -1
    tar -C ../shared -czf gpu/conformance.tgz conformance
    # `limits` builds its probe with the GPU machine's nvcc; one built here (GATHER_NVCC, or an
    # nvcc on PATH) is the fallback (CUDA 13's minor-version compatibility runs it there).
    nvcc=${GATHER_NVCC:-$(command -v nvcc || true)}
    [ -n "$nvcc" ] && "$nvcc" -O3 -arch=sm_90 -o gpu/random_reads scripts/random_reads.cu
    du -sh gpu/*
    exit 0
fi

OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
log() { echo "== $* ($(date +%T))"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
mkdir -p /tmp/suite && tar -C /tmp/suite -xzf gpu/conformance.tgz
export GATHER_CUDA_TESTS=1 RUST_BACKTRACE=1
# The PTX that the first process compiles serves every later one (tests, suite, sanitizer, A/B).
export GATHER_CUDA_CACHE=${GATHER_CUDA_CACHE:-/tmp/gather-ptx}

tests() {
    log "unit tests on the GPU"
    # GATHER_TESTS_FILTER="scatter group ...": the tests whose names hold one of the words.
    timeout 90 gpu/gpu-tests --test-threads=1 ${GATHER_TESTS_FILTER:-} > "$OUT/tests.log" 2>&1
    echo "tests exit $?"; grep -E "^test |test result" "$OUT/tests.log" | tail -20

    log "the flag copied back after every call (GATHER_CUDA_FLAG=copy, the way of a driver that cannot map host memory): bad indices still reported"
    GATHER_CUDA_FLAG=copy timeout 30 gpu/gpu-tests --test-threads=1 bad_indices bounds_policies > "$OUT/tests_flag_copy.log" 2>&1
    echo "flag-copy tests exit $?"; grep -E "test result" "$OUT/tests_flag_copy.log"

    log "gathers by tiles wherever they fit (GATHER_CUDA_TILE=on: slabs past 48 KB, which auto leaves to W5), and the scatters' row fold reading ahead (GATHER_CUDA_APPLY=ahead)"
    GATHER_CUDA_TILE=on timeout 30 gpu/gpu-tests --test-threads=1 gather take bad_indices > "$OUT/tests_tile_on.log" 2>&1
    echo "tile-on tests exit $?"; grep -E "test result" "$OUT/tests_tile_on.log"
    GATHER_CUDA_APPLY=ahead timeout 30 gpu/gpu-tests --test-threads=1 long_fibers counting_sorts bitwise_repeatable > "$OUT/tests_ahead.log" 2>&1
    echo "apply-ahead tests exit $?"; grep -E "test result" "$OUT/tests_ahead.log"
    GATHER_CUDA_X_HINT=last timeout 30 gpu/gpu-tests --test-threads=1 gather take > "$OUT/tests_xlast.log" 2>&1
    echo "x evict-last tests exit $?"; grep -E "test result" "$OUT/tests_xlast.log"

    log "conformance on CUDA"
    timeout 45 gpu/gather --no-progress conformance --device cuda /tmp/suite/conformance > "$OUT/conformance.log" 2>&1
    echo "conformance exit $?"; tail -4 "$OUT/conformance.log"

    log "Python: torch, CuPy and JAX CUDA arrays through DLPack"
    rm -rf /tmp/pyg && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pyg gpu/gather-*.whl
    # JAX would otherwise take 75% of the GPU memory at its first array, beside torch and ours.
    XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH=/tmp/pyg timeout 90 python3 -m pytest -q -p no:cacheprovider -rs \
        -k "not emulator_sweeps and not torch_compile and not jax_jit" crates/gather-py/tests/test_cuda.py > "$OUT/python_cuda.log" 2>&1
    echo "python exit $?"; tail -15 "$OUT/python_cuda.log"
    log "Python: jax.jit through the CUDA FFI handler (its own pytest: a crash there loses nothing else)"
    XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH=/tmp/pyg timeout 90 python3 -m pytest -q -p no:cacheprovider -rs -k jax_jit \
        crates/gather-py/tests/test_cuda.py > "$OUT/python_jax_jit.log" 2>&1
    echo "jax jit exit $?"; tail -8 "$OUT/python_jax_jit.log"
    log "Python: the emulator's sweeps (about 24,000 calls, one or two faults at once) on torch CUDA tensors"
    PYTHONPATH=/tmp/pyg timeout 120 python3 -m pytest -q -p no:cacheprovider -k emulator_sweeps \
        crates/gather-py/tests/test_cuda.py > "$OUT/python_sweeps.log" 2>&1
    echo "sweeps exit $?"; grep -E "passed|failed|calls differ" "$OUT/python_sweeps.log" | head -8

    log "conformance failures by op (ops not on the GPU yet, then the others)"
    grep "does not run on the GPU" "$OUT/conformance.log" | awk '{print $2}' | sed 's/__.*//' | sort | uniq -c | sort -rn | tr '\n' ' '; echo
    grep "^FAIL" "$OUT/conformance.log" | grep -v "does not run on the GPU" | cut -c1-220 | head -25

    log "compute-sanitizer memcheck: unit tests (bad indices, scatter family, the ops added without a GPU) and the suite's error cases"
    GATHER_CUDA_EXACT_ALLOC=1 GATHER_CUDA_QUICK=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 gpu/gpu-tests --test-threads=1 \
        bad_indices scatter_reduce_propagates empty_and_zero index_add masked_select repeat_interleave atomic_scatter_add counting_sorts \
        take_along_dim select_batched bounds_policies broadcasting scatter_reduce_arg segment_reductions scatter_groups softmax_any \
        large_gathers block_sort_length group_and_segment > "$OUT/sanitizer_tests.log" 2>&1
    echo "sanitizer tests exit $?"; grep -E "ERROR SUMMARY|test result" "$OUT/sanitizer_tests.log"
    GATHER_CUDA_EXACT_ALLOC=1 GATHER_CUDA_QUICK=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 gpu/gpu-tests --test-threads=1 \
        gradients_ > "$OUT/sanitizer_grads.log" 2>&1
    echo "sanitizer gradients exit $?"; grep -E "ERROR SUMMARY|test result" "$OUT/sanitizer_grads.log"
    # The gathers by tiles wherever they fit: by default a GPU's many multiprocessors leave most
    # of the test's small cases to the element-wise kernel.
    GATHER_CUDA_TILE=on GATHER_CUDA_EXACT_ALLOC=1 timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 gpu/gpu-tests --test-threads=1 \
        gathers_by_tiles > "$OUT/sanitizer_tiles.log" 2>&1
    echo "sanitizer tiles exit $?"; grep -E "ERROR SUMMARY|test result" "$OUT/sanitizer_tiles.log"
    GATHER_CUDA_TILE=on timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 gpu/gpu-tests --test-threads=1 \
        gathers_by_tiles > "$OUT/racecheck_tiles.log" 2>&1
    echo "racecheck tiles exit $?"; grep -E "ERROR SUMMARY|RACE REPORT|test result" "$OUT/racecheck_tiles.log" | head -5
    log "compute-sanitizer racecheck: the kernels that share memory within a block (fiber sort, counting sort's runs)"
    timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 gpu/gpu-tests --test-threads=1 \
        block_sort_length counting_sorts > "$OUT/racecheck.log" 2>&1
    echo "racecheck exit $?"; grep -E "ERROR SUMMARY|RACE REPORT|test result" "$OUT/racecheck.log" | head -5
    GATHER_CUDA_EXACT_ALLOC=1 timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 gpu/gather --no-progress conformance \
        --device cuda --filter err_ /tmp/suite/conformance > "$OUT/sanitizer_conformance.log" 2>&1
    echo "sanitizer conformance exit $?"; grep -E "ERROR SUMMARY|passed" "$OUT/sanitizer_conformance.log" | tail -3

    # Last: Dynamo's import and Inductor's compile (Triton kernels) take tens of seconds.
    log "Python: torch.compile on CUDA tensors (ops, a plan, a run-time length), with gradients"
    PYTHONPATH=/tmp/pyg timeout 120 python3 -m pytest -q -p no:cacheprovider -rs -k torch_compile \
        crates/gather-py/tests/test_cuda.py > "$OUT/python_compile.log" 2>&1
    echo "compile exit $?"; tail -5 "$OUT/python_compile.log"
}

table() {
    log "bench, ours"
    # GATHER_TABLE_ONLY=W1,...: those workloads alone (PyTorch still runs them all, in seconds).
    local which=(--large)
    [ -n "${GATHER_TABLE_ONLY:-}" ] && which=(--only "$GATHER_TABLE_ONLY")
    timeout 120 gpu/gather bench --device cuda --in-process "${which[@]}" --json "$OUT/ours.json" 2>&1 | tee "$OUT/bench_ours.log"

    log "bench, PyTorch"
    timeout 70 python3 scripts/bench_cuda_torch.py --large --json "$OUT/torch.json" > "$OUT/bench_torch.log" 2>&1
    echo "torch exit $?"

    log "table (the targets), before the A/B in case the call is cut short"
    python3 scripts/cuda_table.py "$OUT/ours.json" "$OUT/torch.json" | tee "$OUT/table.txt"
}

# This build against the baseline build (gpu/gather-base), alternating over three rounds, on
# GATHER_AB_ONLY's workloads, and this build's other ways on the workloads they touch; then
# where the time goes, kernel by kernel.
ab() {
    local only=${GATHER_AB_ONLY:-W1,W2,W3,W4,W5,W6,W7,W8,W9,W10,W11}
    # name|environment|workloads
    local variants=("o64|GATHER_CUDA_OFFSETS=64|W5,W9,W10" "narrow|GATHER_CUDA_APPLY=narrow|W6,W7" "ahead|GATHER_CUDA_APPLY=ahead|W6,W7"
        "notile|GATHER_CUDA_TILE=off|W5,W10" "tile128|GATHER_CUDA_TILE_KB=128|W5" "tileon|GATHER_CUDA_TILE=on|W1"
        "l2f128|GATHER_CUDA_L2_FETCH=128|W9" "l2f128nt|GATHER_CUDA_L2_FETCH=128 GATHER_CUDA_TILE=off|W5"
        "xlast|GATHER_CUDA_X_HINT=last|W9" "xlastnt|GATHER_CUDA_X_HINT=last GATHER_CUDA_TILE=off|W5")
    log "A/B, alternating over 3 rounds: this build, the baseline $(cat gpu/BASELINE 2>/dev/null) on $only, and this build's other ways (${variants[*]})"
    local ab="--no-progress bench --device cuda --in-process --repeat 50"
    for round in 1 2 3; do
        timeout 40 gpu/gather $ab --only "$only" --json "$OUT/ab_new_$round.json" > /dev/null 2>&1
        timeout 40 gpu/gather-base $ab --only "$only" --json "$OUT/ab_base_$round.json" > /dev/null 2>&1
        for v in "${variants[@]}"; do
            IFS='|' read -r name envs which <<< "$v"
            timeout 30 env $envs gpu/gather $ab --only "$which" --json "$OUT/ab_${name}_$round.json" > /dev/null 2>&1
        done
    done
    python3 - "$OUT" <<'PY'
import json, os, statistics, sys
out = sys.argv[1]
def med(v):
    rows = {}
    for r in (1, 2, 3):
        f = f"{out}/ab_{v}_{r}.json"
        if os.path.exists(f):
            for w in json.load(open(f))["workloads"]:
                rows.setdefault(w["name"], []).append(w["median_s"])
    return {n: statistics.median(t) for n, t in rows.items()}
new, cols = med("new"), ["base", "o64", "narrow", "ahead", "notile", "tile128", "tileon", "l2f128", "l2f128nt", "xlast", "xlastnt"]
got = {c: med(c) for c in cols}
print(f"{'workload':30s} {'new us':>9s}" + "".join(f"{c + '/new':>11s}" for c in cols))
for n in sorted(set(new) | set(got["base"])):
    a = new.get(n)
    cell = lambda d: f"{d[n] / a:11.3f}" if a and n in d else f"{'-':>11s}"
    print(f"{n:30s} {a * 1e6 if a else float('nan'):9.1f}" + "".join(cell(got[c]) for c in cols))
PY
    log "where the time goes (GATHER_CUDA_PROFILE=1 waits after every step)"
    GATHER_CUDA_PROFILE=1 timeout 20 gpu/gather bench --device cuda --only W1,W5,W6,W7,W9,W10,W11 --repeat 10 > "$OUT/profile.log" 2>&1
    cut -c1-110 "$OUT/profile.log"
}

# Nsight Compute's counters for each kernel of one call of the workloads that miss or nearly
# miss their targets: time, DRAM bytes and throughput, L2 hit rate, warps active, registers
# (ncu needs the Firecracker runtime; --clock-control none leaves the clocks alone).
counters() {
    log "Nsight Compute: the counters of one call's kernels"
    local m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
    m=$m,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
    m=$m,lts__t_sectors_srcunit_tex_op_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active
    m=$m,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread
    rm -f "$OUT"/ncu_*.csv
    # workload:kernels of its first (checked) call[:environment]
    # GATHER_NCU_RUNS="W6:8 W10:1": other runs, as workload:kernels[:environment].
    for w in ${GATHER_NCU_RUNS:-W5:1 W9:1 W9:1:GATHER_CUDA_L2_FETCH=128 W9:1:GATHER_CUDA_X_HINT=last W10:1 W6:6 W6:6:GATHER_CUDA_APPLY=ahead W7:6 W11a:1 W11b:1 W6x16:6}; do
        IFS=: read -r name count envs <<< "$w"
        timeout 60 env ${envs:-} ncu --clock-control none --csv --page raw --print-units base --metrics "$m" --launch-count "$count" \
            --log-file "$OUT/ncu_${name}_${envs:-default}.csv" \
            gpu/gather --no-progress bench --device cuda --in-process --only "$name" --warmup 1 --repeat 1 > /dev/null 2>&1
        echo "$w: exit $?"
    done
    python3 - "$OUT" <<'PY'
import csv, glob, os, sys
cols = [("gpu__time_duration.sum", "µs", 1e-3), ("dram__bytes_read.sum", "rd MB", 1e-6),
        ("dram__bytes_write.sum", "wr MB", 1e-6), ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram%", 1),
        ("lts__t_sector_hit_rate.pct", "L2hit%", 1), ("lts__t_sectors_srcunit_tex_op_read.sum", "L2rd Msec", 1e-6),
        ("sm__warps_active.avg.pct_of_peak_sustained_active", "warps%", 1),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm%", 1), ("launch__registers_per_thread", "regs", 1)]
print(f"{'run':34s} {'kernel':26s}" + "".join(f"{h:>10s}" for _, h, _ in cols))
for f in sorted(glob.glob(f"{sys.argv[1]}/ncu_*.csv")):
    rows = [l for l in open(f) if l.startswith('"')]
    if len(rows) < 3:
        print(f"{os.path.basename(f)}: no counters ({open(f).read()[-300:]!r})")
        continue
    table = list(csv.DictReader(rows))
    for r in table[1:]:  # the first row holds the units
        def v(k, scale):
            try:
                return f"{float(r[k].replace(',', '')) * scale:10.1f}"
            except (KeyError, ValueError):
                return f"{'?':>10s}"
        print(f"{os.path.basename(f)[4:-4]:34s} {r['Kernel Name'][:26]:26s}" + "".join(v(k, s) for k, _, s in cols))
PY
}

# The floor of random reads under W9 and W9x16, and whether an L2 persisting window or an
# evict-last policy on x would lift it (scripts/random_reads.cu, built here: a binary built
# with another CUDA than the machine's may not run on its driver). About 30 seconds.
limits() {
    log "random reads: the floor under W9 and W9x16, and L2 policies for x"
    local nvcc
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    if ! timeout 90 "$nvcc" -O3 -arch=sm_90 -o /tmp/random_reads scripts/random_reads.cu > "$OUT/limits_build.log" 2>&1; then
        echo "nvcc failed"; tail -5 "$OUT/limits_build.log"
        [ -x gpu/random_reads ] || return
        echo "running the probe built by --prepare"; cp gpu/random_reads /tmp/random_reads
    fi
    timeout 90 /tmp/random_reads 2>&1 | tee "$OUT/limits.txt"
}

# Every step's timeout is cut to what is left before the deadline (GATHER_VISIT_S seconds after
# the start, default 570: a device call lasts at most 600), and a step that would get under 3
# seconds is skipped, so that a visit ends in time, with its results, whatever it runs.
deadline=$(( $(date +%s) + ${GATHER_VISIT_S:-570} ))
timeout() {
    local t=$1 left=$(( deadline - $(date +%s) ))
    shift
    if (( left < 3 )); then echo "skipped, past the visit's deadline: ${*:1:2}" >&2; return 124; fi
    command timeout $(( t < left ? t : left )) "$@"
}

[ $# -eq 0 ] && set -- table tests
# A device call returns at most 8 files: everything also goes into all.tgz, which is kept with
# table.txt and the caller's visit.log when there are more.
pack() {
    (cd "$OUT" && tar czf /tmp/gather-all.tgz --exclude=all.tgz --exclude=visit.log . && mv /tmp/gather-all.tgz all.tgz \
        && [ "$(ls | wc -l)" -gt 8 ] && find . -type f ! -name all.tgz ! -name table.txt ! -name visit.log -delete)
}
trap pack EXIT
for mode in "$@"; do
    case "$mode" in
        tests) tests ;;
        table) table ;;
        ab) ab ;;
        bench) table; ab ;;
        counters) counters ;;
        limits) limits ;;
        all) tests; table; ab ;;
        *) echo "usage: $0 [--prepare] | [table|tests|ab|bench|counters|limits|all]..." >&2; exit 2 ;;
    esac
done

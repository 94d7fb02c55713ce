#!/usr/bin/env bash
# Runs the kernels' unit tests (the only module with `unsafe`) under Miri: every unsafe block's
# claims are checked as the tests drive them, on 1, 2 and 3 threads: out-of-bounds and misaligned
# accesses, reads of uninitialised memory (the kernels write into spare `Vec` capacity and
# `set_len` after), aliasing violations (Tree Borrows) and data races between the rayon tasks
# (Miri's race detector: two tasks writing one position would be reported). Exit 1 on any finding.
#   scripts/miri.sh [TEST_FILTER...]   (default: kernels::)
# Needs: rustup toolchain install nightly && rustup component add --toolchain nightly miri rust-src
#
# Under `cfg(miri)` the size thresholds that pick the loops (plan::GRAIN 256, kernels::RANDOM_BYTES
# 8 KiB, the tile sizes) and the tests' shapes (kernels::sized) are scaled down together, so the
# small shapes an interpreter can afford still reach the parallel, prefetched, tiled and grouped
# loops. The tests are split over two Miri processes (one per core); slow: most tests take minutes each, the fresh-scatter one over an hour.
#
# Flags: Tree Borrows, because crossbeam-epoch (under rayon) is known not to pass Stacked Borrows
# (crossbeam-rs/crossbeam#545; crossbeam's own Miri CI uses Tree Borrows); permissive provenance
# for crossbeam's integer-to-pointer casts; leaks ignored, because rayon's global pool threads
# are never joined.
set -euo pipefail
cd "$(dirname "$0")/.."
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-ignore-leaks}"
filters=("$@")
if [ ${#filters[@]} -eq 0 ]; then
  groups=("kernels::scatter" "kernels::gather kernels::take kernels::copy kernels::segment kernels::words")
else
  groups=("${filters[*]}")
fi
# Builds once, so that the parallel runs below do not contend for the build.
cargo +nightly miri test -p gather --lib --no-run
mkdir -p target
pids=()
for i in "${!groups[@]}"; do
  # shellcheck disable=SC2086 # a group is several filters
  cargo +nightly miri test -p gather --lib -- ${groups[$i]} >"target/miri-$i.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    echo "miri [${groups[$i]}]: $(grep -E '^test result' "target/miri-$i.log" | tail -1)"
  else
    status=1
    echo "miri [${groups[$i]}]: FAILED, see target/miri-$i.log"
    grep -E "^error|^test .*FAILED|panicked" "target/miri-$i.log" | head -20 || true
  fi
done
if [ "$status" -eq 0 ]; then echo "miri: clean"; else echo "miri: FINDINGS (exit $status)"; fi
exit "$status"

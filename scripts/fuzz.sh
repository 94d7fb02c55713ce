#!/usr/bin/env bash
# Builds the fuzz targets (fuzz/, cargo-fuzz + libFuzzer, AddressSanitizer on the nightly toolchain)
# and runs each for a fixed time, starting from the checked-in corpus fuzz/corpus/<target>.
#   [FUZZ_PARALLEL=1] scripts/fuzz.sh [SECONDS_PER_TARGET (default 600)] [TARGET...]
# Needs: rustup toolchain install nightly; cargo install cargo-fuzz.
# New inputs go to target/fuzz-corpus/<target> (not the checked-in corpus); crashes to
# fuzz/artifacts/<target>. Prints executions, coverage and features per target at the end.
# FUZZ_MERGE=1 then merges the new inputs into fuzz/corpus/<target> (libFuzzer's -merge=1 keeps
# only inputs that add coverage), ready to commit.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-600}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(gather_family scatter_family index_family dynamic_ops readers inline_tensors)
fi
# Huge requested allocations must come back as errors, not as sanitizer reports.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}"
# 16 codegen units: with cargo-fuzz's default of one, rustc held 18.8 GB while compiling the
# instrumented `gather` crate (OOM on a 24 GiB machine) and took over 20 minutes.
build_flags=(--fuzz-dir fuzz --codegen-units "${FUZZ_CODEGEN_UNITS:-16}")
# FUZZ_SKIP_BUILD=1 runs the binaries already built (say, while the sources have moved on).
[ "${FUZZ_SKIP_BUILD:-0}" = 1 ] || cargo +nightly fuzz build "${build_flags[@]}"
bin=fuzz/target/x86_64-unknown-linux-gnu/release
# One target: runs it, then writes its one-line summary to target/fuzz-<target>.summary.
run_one() {
  local t="$1" work="target/fuzz-corpus/$1" log="target/fuzz-$1.log" status=0
  mkdir -p "$work" "fuzz/corpus/$t" "fuzz/artifacts/$t"
  "$bin/$t" -artifact_prefix="fuzz/artifacts/$t/" "$work" "fuzz/corpus/$t" \
    -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -malloc_limit_mb=1000000000 \
    -print_final_stats=1 >"$log" 2>&1 || status=$?
  local execs cov
  execs=$(grep -m1 "stat::number_of_executed_units" "$log" | awk '{print $2}')
  cov=$(grep -E "^#[0-9]+.*(DONE|pulse|NEW|REDUCE)" "$log" | tail -1 | grep -oE "cov: [0-9]+ ft: [0-9]+" || true)
  if [ "$status" -ne 0 ]; then
    echo "$t: FINDING (exit $status), see $log and fuzz/artifacts/$t" >"target/fuzz-$t.summary"
  else
    echo "$t: ${execs:-?} executions in ${secs}s, ${cov:-?}, no finding" >"target/fuzz-$t.summary"
  fi
}
# FUZZ_PARALLEL=1 runs every target at once (each for the full time; they share the cores).
for t in "${targets[@]}"; do
  echo "== $t: ${secs}s"
  if [ "${FUZZ_PARALLEL:-0}" = 1 ]; then run_one "$t" & else run_one "$t"; fi
done
wait
echo
found=0
for t in "${targets[@]}"; do
  cat "target/fuzz-$t.summary"
  grep -q FINDING "target/fuzz-$t.summary" && found=1
  if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    before=$(ls "fuzz/corpus/$t" | wc -l)
    "$bin/$t" -merge=1 -timeout=30 -rss_limit_mb=4096 -malloc_limit_mb=1000000000 \
      "fuzz/corpus/$t" "target/fuzz-corpus/$t" >"target/fuzz-$t.merge.log" 2>&1
    echo "  corpus: $before -> $(ls "fuzz/corpus/$t" | wc -l) inputs in fuzz/corpus/$t"
  fi
done
exit "$found"

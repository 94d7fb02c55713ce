#!/usr/bin/env bash
# Runs the tests that exercise the unsafe kernels under AddressSanitizer (nightly toolchain): the
# kernels' and the planner's unit tests, the ops' unit tests that drive them through every layout,
# and the integration tests named on the command line. Any out-of-bounds access, use after free or
# leak aborts the run with a report (exit 1). Much faster than scripts/memcheck.sh (valgrind), so
# it runs the kernel tests at their full sizes; memcheck.sh adds uninitialised-read checks.
#   scripts/asan.sh [TEST_FILTER...]   (default: kernels:: plan:: ops::)
# Needs: rustup toolchain install nightly.
set -euo pipefail
cd "$(dirname "$0")/.."
filters=("$@")
[ ${#filters[@]} -eq 0 ] && filters=(kernels:: plan:: ops::)
target=$(rustc -vV | sed -n 's/^host: //p')
# --target keeps the sanitizer flags off build scripts and proc macros; a separate target dir keeps
# the instrumented build apart from the normal one.
export RUSTFLAGS="-Zsanitizer=address -Cdebug-assertions=on"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export CARGO_TARGET_DIR=target/asan
# Proptest cases are cut down: each case exercises the same code, and instrumented code is slower.
export PROPTEST_CASES="${PROPTEST_CASES:-32}"
status=0
for f in "${filters[@]}"; do
  echo "== asan: $f"
  cargo +nightly test -p gather --lib --target "$target" -- --test-threads 2 "$f" 2>&1 \
    | grep -E "^test result|ERROR: AddressSanitizer|SUMMARY|panicked|FAILED" || status=1
done
if [ "$status" -eq 0 ]; then echo "asan: clean"; else echo "asan: ERRORS"; fi
exit "$status"

#!/usr/bin/env bash
# Runs the huge-tensor tests (crates/gather/tests/huge.rs: more than 2^31 elements, i32 indices
# near i32::MAX), which are #[ignore]d in the normal test run. Needs about 7 GiB of free memory.
# Prints each call's peak extra memory and the process's maximum resident set size.
#   scripts/huge.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release -p gather --test huge --no-run
status=0
/usr/bin/time -v -o target/huge-time.txt \
  cargo test --release -p gather --test huge -- --ignored --test-threads 1 --nocapture || status=$?
grep -E "Maximum resident|Elapsed|Exit status" target/huge-time.txt
exit "$status"

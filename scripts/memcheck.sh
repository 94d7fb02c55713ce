#!/usr/bin/env bash
# Runs the tests that exercise the unsafe kernels under valgrind memcheck: the kernels' and the
# planner's unit tests, and the ops' unit tests that drive them through every layout. Any invalid
# read/write, use of uninitialised memory or leak fails the run (exit 1).
#   scripts/memcheck.sh [TEST_FILTER...]   (default: kernels:: plan:: ops::)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "memcheck: valgrind is not installed" >&2; exit 2; }
filters=("$@")
[ ${#filters[@]} -eq 0 ] && filters=(kernels:: plan:: ops::)
bin=$(cargo test -p gather --lib --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "gather" and m.get("executable"):
        print(m["executable"])')
status=0
for f in "${filters[@]}"; do
  echo "== memcheck: $f"
  # Proptest cases are cut down: memcheck runs ~50x slower, and each case exercises the same code.
  PROPTEST_CASES=16 valgrind --tool=memcheck --error-exitcode=1 --leak-check=full \
    --errors-for-leak-kinds=definite --show-leak-kinds=definite --track-origins=yes \
    --suppressions=/dev/null --quiet "$bin" --test-threads 2 "$f" 2>&1 | tail -n 25 || status=$?
done
if [ "$status" -eq 0 ]; then echo "memcheck: clean"; else echo "memcheck: ERRORS (exit $status)"; fi
exit "$status"

#!/usr/bin/env bash
# Runs the concurrency stress test (crates/gather/tests/stress.rs) N times in a row (default 100),
# built once in release mode. Fails at the first failing run and says which.
#   scripts/stress.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-100}"
bin=$(cargo test --release -p gather --test stress --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "stress" and m.get("executable"):
        print(m["executable"])')
start=$(date +%s)
for i in $(seq 1 "$n"); do
  if ! "$bin" --test-threads 3 >/tmp/stress_run.log 2>&1; then
    echo "stress: run $i of $n FAILED; its output:" >&2
    cat /tmp/stress_run.log >&2
    exit 1
  fi
  printf '\rstress: %d/%d passed' "$i" "$n"
done
echo
echo "stress: $n runs in a row passed in $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# Runs the test suite (or the test files given) with two busy-loop processes holding both cores, as a
# user's laptop or a shared CI runner can be: the suite must pass like this, not only on a quiet machine.
#   scripts/busy-test.sh                        the whole suite, 3 times in a row, stopping at the first failure
#   scripts/busy-test.sh test/e2e/x.test.ts     only these files, 3 times
# BUSY_RUNS (3) sets how many runs, BUSY_LOOPS (2) how many busy loops.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${BUSY_RUNS:-3}
loops=${BUSY_LOOPS:-2}
pids=()
stop_loops() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_loops EXIT
trap 'exit 130' INT TERM

for _ in $(seq "$loops"); do
  node -e 'for (;;) {}' &
  pids+=("$!")
done

for run in $(seq "$runs"); do
  echo "busy-test: run $run of $runs with $loops busy loops" >&2
  if ! npm test -- "$@"; then
    echo "busy-test: run $run of $runs failed" >&2
    exit 1
  fi
done
echo "busy-test: $runs runs passed" >&2

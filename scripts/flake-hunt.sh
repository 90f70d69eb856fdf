#!/usr/bin/env bash
# Run the whole test suite N times with CPU hogs beside it and list every
# failure: a test that fails under load is a test with a cause to find
# (sleeps used as synchronisation, fixed ports, deadlines a loaded machine
# misses), not one to retry.
# Usage: scripts/flake-hunt.sh [N] [HOGS]   (N defaults to 10; HOGS, busy
# loops beside the suite, to the number of CPUs)
# Each run's log is kept in target/flake-hunt/run-K.log; the summary lists
# each failed test with the runs it failed in. Exit status: 0 when no run
# failed.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
hogs=${2:-$(nproc)}
out=target/flake-hunt
mkdir -p "$out"
rm -f "$out"/run-*.log "$out"/failures

# Build first, unloaded: the runs measure the tests, not the compiler.
cargo test --workspace --all-features --locked --no-run >/dev/null 2>&1

pids=()
stop_hogs() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_hogs EXIT
for ((h = 0; h < hogs; h++)); do
  (while :; do :; done) &
  pids+=($!)
done

failed_runs=0
for ((k = 1; k <= n; k++)); do
  log=$out/run-$k.log
  start=$(date +%s)
  if CI=true cargo test --workspace --all-features --locked --no-fail-fast >"$log" 2>&1; then
    echo "run $k: passed in $(($(date +%s) - start)) s"
  else
    failed_runs=$((failed_runs + 1))
    # Each "test NAME ... FAILED" line, and each test binary that failed
    # (one killed by a signal has no FAILED line of its own).
    { sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log"
      sed -n -e 's/^error: test failed, to rerun pass `\(.*\)`$/binary \1/p' \
        -e 's/^ *`\(-p .*\)`$/binary \1/p' "$log"
    } | sed "s/^/$k /" >> "$out/failures"
    echo "run $k: FAILED in $(($(date +%s) - start)) s (log $log)"
  fi
done
stop_hogs

echo "$failed_runs of $n runs failed (with $hogs busy loops beside the suite)"
if [ -s "$out/failures" ]; then
  echo "failures (test: runs):"
  awk '{ k = $1; $1 = ""; sub(/^ /, ""); runs[$0] = runs[$0] " " k } END { for (t in runs) print "  " t ":" runs[t] }' \
    "$out/failures" | sort
fi
[ "$failed_runs" -eq 0 ]

#!/usr/bin/env bash
# cpu-clock profiles of the product path's 1 MiB RDMA Write:
# `rddp perf server` and `rddp perf client --op write --size 1M` over MPA/TCP with
# CRC on, each under `perf record -e cpu-clock` (a software event: it works in a
# VM without PMU access). Prints each side's top costs (self time, by symbol) and
# keeps the full reports in target/profile/. docs/journal.md, "Where the time goes", explains them.
#
# Usage: scripts/profile.sh [ITERS]   (default 4000 one-MiB Writes)
# Needs perf (linux-perf) and perf_event_paranoid <= 2 or root.
set -euo pipefail
cd "$(dirname "$0")/.."
iters=${1:-4000}
command -v perf >/dev/null || { echo "perf (linux-perf) is needed" >&2; exit 1; }
out=target/profile
mkdir -p "$out"
# Line tables for symbols and inlined frames; a target dir of its own so the
# usual release build is not rebuilt.
CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
  cargo build -q --release --target-dir target/profile-build -p rddp-cli --bin rddp
bin=target/profile-build/release/rddp
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
perf record -q -e cpu-clock -F 2000 -g --call-graph dwarf,16384 -o "$out/server.data" -- \
  "$bin" perf server --listen "127.0.0.1:$port" >/dev/null 2>&1 &
pids+=($!)
sleep 1
perf record -q -e cpu-clock -F 2000 -g --call-graph dwarf,16384 -o "$out/client.data" -- \
  "$bin" perf client --connect "127.0.0.1:$port" --op write --size 1M --iters "$iters" --json \
  > "$out/client.json"
wait "${pids[0]}" 2>/dev/null || true
for side in client server; do
  perf report -q -i "$out/$side.data" --no-children --sort symbol --stdio -g none \
    --percent-limit 0.5 2>/dev/null > "$out/$side.txt" || true
  echo "== $side: top costs (self, cpu-clock) =="
  grep -v '^$' "$out/$side.txt" | head -12
done
echo "== client result: $(cat "$out/client.json")"

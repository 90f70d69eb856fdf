#!/usr/bin/env bash
# User-space instructions per round trip of a 64-octet Send ping-pong over MPA
# (CRC on), both ends of `rddp perf` under callgrind and pinned to one CPU (so
# each wait finds its answer at the first look: about one busy-poll look a
# message, as in a native run). Instruction counts do not move with the
# machine's noise the way latencies do: a change to the per-message path
# shows here even where `scripts/bench-perf.sh`'s ping-pong row cannot tell it
# from the noise (docs/journal.md, "Instructions per round trip").
#
# Usage: scripts/callgrind-pingpong.sh [ITERS=20000]
# Prints, for the client and the server: instructions a round trip in all, and
# in the measured loop; the callgrind files stay in target/callgrind/ for
# `callgrind_annotate --inclusive=yes`.
set -euo pipefail
cd "$(dirname "$0")/.."
iters=${1:-20000}
if ! command -v valgrind >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
  else
    echo "missing: valgrind (run as root or install it)" >&2
    exit 1
  fi
fi
cargo build -q --release -p rddp-cli --bin rddp
bin=target/release/rddp
out=target/callgrind
mkdir -p "$out"
log="$out/pingpong.server.log"
: >"$log"
taskset -c 0 valgrind -q --tool=callgrind --callgrind-out-file="$out/pingpong.server" \
  "$bin" perf server --listen 127.0.0.1:0 >/dev/null 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
# Under valgrind the server takes a while to listen: its first line says where.
addr=
for _ in $(seq 300); do
  addr=$(sed -n 's/.*listening on \([0-9.:]*\).*/\1/p' "$log")
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { echo "the server did not start: $(cat "$log")" >&2; exit 1; }
taskset -c 0 valgrind -q --tool=callgrind --callgrind-out-file="$out/pingpong.client" \
  "$bin" perf client --connect "$addr" --op send --pingpong --size 64 \
  --iters "$iters" --json >/dev/null
wait $server
for side in client server; do
  f="$out/pingpong.$side"
  total=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
  loop=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
    awk '/perf::run::measure::\{\{closure\}\}|perf::server::Server::run::\{\{closure\}\}/ && !n++ {gsub(",","",$1); print $1}')
  echo "$side: $((total / iters)) instructions a round trip, $(( ${loop:-0} / iters )) in its run of the test"
done

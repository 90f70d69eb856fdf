#!/usr/bin/env bash
# `rddp perf` (verbs queue pairs, RDMA Write over MPA/TCP) against iperf3 (plain
# TCP) with the same message/write size, in the same run; prints the median of
# RUNS runs of each and their ratio.
#
# Usage: scripts/bench-perf.sh [SIZE=1048576] [ITERS=2000] [RUNS=5]
# Needs iperf3 (installed when run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1048576}
iters=${2:-2000}
runs=${3:-5}

if ! command -v iperf3 >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo 'iperf3 iperf3/start_daemon boolean false' | debconf-set-selections
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3
  else
    echo "iperf3 is missing (run as root or install it)" >&2
    exit 1
  fi
fi

cargo build -q --release -p rddp-cli
bin=target/release/rddp
median() { sort -g | awk '{a[NR]=$1} END {m=int((NR+1)/2); if (NR%2) print a[m]; else printf "%.2f\n", (a[m]+a[m+1])/2}'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

rddp=() ; tcp=()
for r in $(seq "$runs"); do
  port=$(free_port)
  "$bin" perf server --listen "127.0.0.1:$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.3
  g=$("$bin" perf client --connect "127.0.0.1:$port" --op write --size "$size" --iters "$iters" --json \
      | sed -n 's/.*"gbit_per_s":\([0-9.]*\).*/\1/p' | head -1)
  kill "$srv" 2>/dev/null || true
  wait "$srv" 2>/dev/null || true
  rddp+=("$g")
  port=$(free_port)
  iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.3
  t=$(iperf3 -c 127.0.0.1 -p "$port" -l "$size" -n $((size * iters)) -f g 2>/dev/null \
      | awk '/receiver/ {for (i=1;i<=NF;i++) if ($i=="Gbits/sec") print $(i-1)}')
  wait "$srv" || true
  tcp+=("$t")
  echo "run $r: rddp perf write ${g}  iperf3 ${t} Gbit/s" >&2
done
m1=$(printf '%s\n' "${rddp[@]}" | median)
m2=$(printf '%s\n' "${tcp[@]}" | median)
echo "message size $size, $iters per run, median of $runs runs (Gbit/s):"
echo "  rddp perf, RDMA Write over MPA (CRC on): $m1"
echo "  iperf3 (TCP):                            $m2"
awk -v a="$m1" -v b="$m2" 'BEGIN { if (b > 0) printf "  ratio:                                   %.2f\n", a / b }'

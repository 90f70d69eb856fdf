#!/usr/bin/env bash
# Loopback throughput of rddp's MPA driver against iperf3 (plain TCP) with the
# same write size, in the same run; prints the median of RUNS runs of each.
#
# Usage: scripts/bench-mpa-tcp.sh [SIZE=131072] [TOTAL=2147483648] [RUNS=5]
# Needs iperf3 (installed when run as root). MPA runs without Markers: CRC on
# with direct placement, CRC on with the copying receive path, CRC off (direct).
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-131072}
total=${2:-2147483648}
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

cargo build -q --release -p rddp-mpa --example mpa_tcp_bench
bin=target/release/examples/mpa_tcp_bench

median() { sort -g | awk '{a[NR]=$1} END {m=int((NR+1)/2); if (NR%2) print a[m]; else printf "%.2f\n", (a[m]+a[m+1])/2}'; }

# A free port for iperf3: bind port 0 and read what the kernel chose.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mpa=() ; mpa_copy=() ; mpa_nocrc=() ; tcp=()
for r in $(seq "$runs"); do
  mpa+=("$("$bin" "$size" "$total" 1 0 1 | awk '{print $3}')")
  mpa_copy+=("$("$bin" "$size" "$total" 1 0 0 | awk '{print $3}')")
  mpa_nocrc+=("$("$bin" "$size" "$total" 0 0 1 | awk '{print $3}')")
  port=$(free_port)
  iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.3
  g=$(iperf3 -c 127.0.0.1 -p "$port" -l "$size" -n "$total" -f g 2>/dev/null \
      | awk '/receiver/ {for (i=1;i<=NF;i++) if ($i=="Gbits/sec") print $(i-1)}')
  wait "$srv" || true
  tcp+=("$g")
  echo "run $r: mpa(crc) ${mpa[-1]}  mpa(crc, copy) ${mpa_copy[-1]}  mpa(no crc) ${mpa_nocrc[-1]}  iperf3 ${g} Gbit/s" >&2
done
m1=$(printf '%s\n' "${mpa[@]}" | median)
m2=$(printf '%s\n' "${mpa_nocrc[@]}" | median)
m4=$(printf '%s\n' "${mpa_copy[@]}" | median)
m3=$(printf '%s\n' "${tcp[@]}" | median)
echo "write size $size, $total octets per run, median of $runs runs (Gbit/s):"
echo "  rddp MPA, CRC on, direct placement: $m1"
echo "  rddp MPA, CRC on, copying receive:  $m4"
echo "  rddp MPA, CRC off, direct placement: $m2"
echo "  iperf3 (TCP):                       $m3"
awk -v a="$m1" -v b="$m3" 'BEGIN { if (b > 0) printf "  MPA (CRC, direct) / iperf3:         %.2f\n", a / b }'

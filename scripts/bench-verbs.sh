#!/usr/bin/env bash
# Unmodified perftest binaries over rddp's libibverbs/librdmacm (`rddp exec`)
# against their baselines, each pair measured alternately in the same run:
# ROUNDS rounds, medians of each side, and the median of the rounds' ratios.
#
#   work                          through the library              baseline
#   RDMA Write 1 MiB, Gbit/s      ib_write_bw -R -s 1M             rddp perf --op write --size 1M
#                                 (both ends under rddp exec)      (CRC on, its default; and --crc off,
#                                                                  as the library's connections)
#   Send 64 B latency, one way    ib_send_lat -R -s 64 (t_typical) sockperf ping-pong --tcp -m 64 (p50)
#                                 both ends on CPU 0, and unpinned: each tool in both settings
#
# Usage: scripts/bench-verbs.sh   Environment: ROUNDS (5), ITERS (2000 Writes),
# LAT_ITERS (20000 round trips), PP_SECS (3, sockperf's seconds).
# Needs perftest and sockperf (installed when run as root), ss and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${ROUNDS:-5}
iters=${ITERS:-2000}
lat_iters=${LAT_ITERS:-20000}
pp_secs=${PP_SECS:-3}

need=()
command -v ib_write_bw >/dev/null || need+=(perftest)
command -v sockperf >/dev/null || need+=(sockperf)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "missing: ${need[*]} (run as root or install them)" >&2
    exit 1
  fi
fi

cargo build -q --release --locked -p rddp-cli --bin rddp -p rddp-verbs-abi
bin=target/release/rddp

# Every process this script starts is ended by its id when it exits.
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

median() { sort -g | awk '{a[NR]=$1} END {m=int((NR+1)/2); if (NR%2) print a[m]; else print (a[m]+a[m+1])/2}'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
json_field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" | head -1; }
# Waits until something listens on TCP PORT, without connecting to it (a probe
# connection would be an MPA peer that never speaks to perftest's server).
wait_listen() {
  for _ in $(seq 400); do
    [ -n "$(ss -Hltn "sport = :$1")" ] && return 0
    sleep 0.05
  done
  echo "bench-verbs: nothing listens on port $1" >&2
  return 1
}

# perftest through the library: server and client under rddp exec. PIN=1 runs
# both on CPU 0. Prints the client's result line.
perftest() {
  local tool=$1; shift
  local port pin=() srv out
  port=$(free_port)
  [ "${PIN:-0}" = 1 ] && pin=(taskset -c 0)
  "${pin[@]}" "$bin" exec -q -- "$tool" -R -p "$port" "$@" >/dev/null 2>&1 &
  srv=$!; pids+=("$srv")
  wait_listen "$port"
  out=$("${pin[@]}" "$bin" exec -q -- "$tool" -R -p "$port" "$@" 127.0.0.1 2>/dev/null || true)
  wait "$srv" 2>/dev/null || true
  echo "$out"
}
# ib_write_bw's average Gbit/s (the fourth column of its result line).
r_write() {
  perftest ib_write_bw -s 1048576 -n "$iters" --report_gbits | awk '$1 == 1048576 {print $4}'
}
# ib_send_lat's t_typical, us (the fifth column).
r_lat() { perftest ib_send_lat -s 64 -n "$lat_iters" | awk '$1 == 64 {print $5}'; }
r_latpin() { PIN=1 r_lat; }

rddp_perf() {
  local port srv out
  port=$(free_port)
  "$bin" perf server --listen "127.0.0.1:$port" >/dev/null 2>&1 &
  srv=$!; pids+=("$srv")
  wait_listen "$port"
  out=$("$bin" perf client --connect "127.0.0.1:$port" --json "$@" || true)
  wait "$srv" 2>/dev/null || true
  echo "$out" | json_field gbit_per_s
}
b_write() { rddp_perf --op write --size 1M --iters "$iters"; }
b_writenocrc() { rddp_perf --op write --size 1M --iters "$iters" --crc off; }

# sockperf's TCP ping-pong of 64 octets, p50 one way (us).
sockperf_pp() {
  local port pin=() srv p
  port=$(free_port)
  [ "${PIN:-0}" = 1 ] && pin=(taskset -c 0)
  "${pin[@]}" sockperf sr --tcp -i 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  srv=$!; pids+=("$srv")
  wait_listen "$port"
  p=$("${pin[@]}" sockperf pp --tcp -i 127.0.0.1 -p "$port" -m 64 -t "$pp_secs" 2>/dev/null \
      | sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p')
  kill "$srv" 2>/dev/null || true
  wait "$srv" 2>/dev/null || true
  echo "$p"
}
b_lat() { sockperf_pp; }
b_latpin() { PIN=1 sockperf_pp; }

declare -A V
# Odd rounds run the baselines first, even rounds perftest: neither always
# finds the machine as the other left it.
keys_b=(write writenocrc lat latpin)
keys_r=(write lat latpin)
for r in $(seq "$rounds"); do
  run_b() { for k in "${keys_b[@]}"; do V[b_$k]+="$(b_$k) "; done; }
  run_r() { for k in "${keys_r[@]}"; do V[r_$k]+="$(r_$k) "; done; }
  if (( r % 2 )); then run_b; run_r; else run_r; run_b; fi
  line="round $r/$rounds:"
  for k in "${!V[@]}"; do line+=" $k $(awk '{print $NF}' <<<"${V[$k]}")"; done
  echo "$line" >&2
done

med() { tr ' ' '\n' | grep -v '^$' | median; }
# The median of the rounds' ratios A/B (two lists of the same rounds).
ratio_med() {
  paste <(tr ' ' '\n' <<<"$1" | grep -v '^$') <(tr ' ' '\n' <<<"$2" | grep -v '^$') \
    | awk '$2 > 0 {printf "%.4f\n", $1 / $2}' | median
}
row() { # name perftest-key baseline-key format
  printf '| %s | %s | %s | %.2f |\n' "$1" "$(med <<<"${V[r_$2]}" | xargs printf "$4")" \
    "$(med <<<"${V[b_$3]}" | xargs printf "$4")" "$(ratio_med "${V[r_$2]}" "${V[b_$3]}")"
}
# The latency row with each tool in the setting that suits it on this machine:
# perftest polls busy (two spinning processes on one CPU take turns), sockperf
# blocks (unpinned, a wake-up on the other CPU can cost more than the trip).
best() {
  local r b
  r=$(printf '%s\n' "$(med <<<"${V[r_lat]}")" "$(med <<<"${V[r_latpin]}")" | sort -g | head -1)
  b=$(printf '%s\n' "$(med <<<"${V[b_lat]}")" "$(med <<<"${V[b_latpin]}")" | sort -g | head -1)
  printf '| %s | %.2f | %.2f | %.2f |\n' "$1" "$r" "$b" "$(awk -v a="$r" -v b="$b" 'BEGIN { print a / b }')"
}
{
  echo "| work | perftest through rddp exec | baseline | ratio (median of rounds' ratios) |"
  echo "|---|---|---|---|"
  row "ib_write_bw -R 1 MiB, Gbit/s, against rddp perf --op write 1M (CRC on)" write write %.2f
  row "the same, against rddp perf with --crc off (as the library negotiates)" write writenocrc %.2f
  row "ib_send_lat -R 64 B, one way, us, against sockperf ping-pong p50, both on CPU 0" latpin latpin %.2f
  row "the same, unpinned" lat lat %.2f
  best "ib_send_lat against sockperf, each in the faster of its two settings here (ratio of medians)"
  echo
  echo "($rounds rounds, alternately in the same run, $(nproc) cores, Linux $(uname -r | cut -d- -f1), $(date -u +%Y-%m-%d), main at $(git rev-parse --short HEAD); scripts/bench-verbs.sh)"
} | tee target/bench-verbs.md

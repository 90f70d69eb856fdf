#!/usr/bin/env bash
# The product path (verbs queue pairs over MPA/TCP, CRC on, as `rddp perf` and
# `rddp target` run them) against plain-socket baselines, each pair measured
# alternately in the same run: ROUNDS rounds, medians, ratios. Prints the
# benchmark table and writes it to target/bench-perf.md; with --write it also
# replaces the table between the bench-perf markers in docs/benchmarks.md.
#
#   work                      rddp                               baseline
#   RDMA Write 1 MiB          rddp perf --op write --size 1M     iperf3 -l 1M
#   RDMA Read 1 MiB           rddp perf --op read --size 1M      iperf3 -l 1M
#   Send 64 KiB               rddp perf --op send --size 64K     iperf3 -l 64K
#   Send 64 B message rate    rddp perf --op send --size 64      tcp_msg_rate (this repo)
#   ping-pong 64 B, p50       rddp perf --op send --pingpong     sockperf ping-pong --tcp
#                             (both ends of each pinned to CPU 0)
#   Send 64 B, pinned         as Send 64 B, server (receiver) on CPU 0 and client
#                             (sender) on CPU 1, both programs; no target of its
#                             own: it shows what the scheduler's placement of
#                             three busy threads on two cores costs the row above
#                             (docs/journal.md, "Send 64 B: two modes"); on a
#                             one-CPU machine it runs unpinned
#   1,000 QPs 64 KiB Writes   rddp perf --qps 1000 (aggregate)   the same octets with --qps 1
#                             (both with --rcvbuf 1M: a fixed SO_RCVBUF, as iperf3 -w)
#   the same, autotuning      rddp perf --qps 1000 (aggregate)   tcp_many (this repo): plain TCP
#                             (no target of its own)             on as many connections, the same
#                                                                octets, 64 KiB writes, mio
#   DDP over SCTP 64 KiB      rddp perf --transport sctp         sctp_perf raw: plain
#                             --op write --size 64K              usrsctp unordered messages
#   idle queue pairs          rddp target + idle_mpa (N MPA connections): threads
#                             and RSS per connection beyond its buffers
#
# Usage: scripts/bench-perf.sh [--write] [--quick] [--against REV]
#   --write: replace the table in docs/benchmarks.md (--readme: the same).
#   --quick: 3 rounds, fewer iterations (a smoke run; say so when quoting it).
#   --against REV: every row's baseline is the same rddp run with the rddp of
#     commit REV (built in a worktree under target/bench-old), alternately in
#     the same rounds: the table says what a change did to each row (a ratio
#     below 1, above 1 for the ping-pong's latency, is worse). No idle row.
# Environment: ROUNDS (5), ROWS (the rows to run, by key, e.g. ROWS="many
# manyauto"; all by default: write read send64k msg64 msg64pin pp many manyauto
# sctp idle; not with --write), IDLE (1000 connections), MANY (1000 queue pairs
# of the aggregate row), BATCH (1: messages per
# write(2) in the baseline, = FPDUs per sendmsg of `rddp perf`'s Sends, each
# written as it is posted; `rddp perf --post-list N` gathers N per sendmsg, and
# its honest baseline is BATCH=N: docs/journal.md, "Per-message costs of Sends").
# Needs iperf3, sockperf, libusrsctp2, taskset, python3 (the first three
# installed when run as root).
#
# What rddp perf times (its `seconds`; Gbit/s = bytes x 8 / seconds): each queue
# pair's data phase, from its first data work request to its end of data (the
# last Read's completion; for Writes and Sends, which complete when the LLP took
# them, the server's Result, which it sends once it has its End, delivered only
# after every earlier octet was placed: one round trip). Connection setup (MPA),
# Hello, the advertisement, the size's Begin and Ack and the buffers' filling
# are outside it. With --qps N every queue pair has begun before any starts its
# data, and the figure is all N queue pairs' octets over the span from the first
# data start to the last end of data (`control_messages_timed` in the JSON: 2 a
# queue pair, its End and Result; `qp_seconds_max`: the longest own phase).
# The aggregate row: MANY queue pairs of K64/MANY 64 KiB Writes each (30), the
# one-QP figure the same K64 Writes (the same octets, the same way) on one.
set -euo pipefail
cd "$(dirname "$0")/.."

write=0; quick=0; against=
while [ $# -gt 0 ]; do
  case $1 in
    --write|--readme) write=1 ;;
    --quick) quick=1 ;;
    --against) against=${2:?--against needs a commit}; shift ;;
    *) echo "usage: $0 [--write] [--quick] [--against REV]" >&2; exit 2 ;;
  esac
  shift
done
[ -z "$against" ] || [ $write = 0 ] || { echo "--against and --write do not go together" >&2; exit 2; }
all_rows="write read send64k msg64 msg64pin pp many manyauto sctp idle"
rows=${ROWS:-$all_rows}
for k in $rows; do
  [[ " $all_rows " == *" $k "* ]] || { echo "ROWS: no row '$k' (rows: $all_rows)" >&2; exit 2; }
done
[ -z "${ROWS:-}" ] || [ $write = 0 ] || { echo "ROWS and --write do not go together: the table is whole" >&2; exit 2; }
# Whether row KEY runs (ROWS).
runs() { [[ " $rows " == *" $1 "* ]]; }
rounds=${ROUNDS:-$([ $quick = 1 ] && echo 3 || echo 5)}
idle_n=${IDLE:-1000}
many=${MANY:-1000}
batch=${BATCH:-1}
# Iterations per measurement: big ones move 2 GiB (quick: 512 MiB).
if [ $quick = 1 ]; then big=512; k64=8000; small=50000; pp=5000; pp_secs=1; sctp_mib=64
else big=2000; k64=30000; small=200000; pp=20000; pp_secs=3; sctp_mib=256; fi
# The aggregate row: each of MANY queue pairs moves k64/MANY 64 KiB Writes (at
# least 8), the one-QP figure the same total on one queue pair.
many_iters=$(( k64 / many > 8 ? k64 / many : 8 ))

need=()
command -v iperf3 >/dev/null || need+=(iperf3)
command -v sockperf >/dev/null || need+=(sockperf)
# The SCTP row loads libusrsctp at run time (usrsctp-ffi); without it that row
# would come out empty and the run would stop there.
ldconfig -p 2>/dev/null | grep -q 'libusrsctp\.so' || need+=(libusrsctp2)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo 'iperf3 iperf3/start_daemon boolean false' | debconf-set-selections
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "missing: ${need[*]} (run as root or install them)" >&2
    exit 1
  fi
fi

cargo build -q --release -p rddp-cli --bin rddp --example tcp_msg_rate --example tcp_many --example idle_mpa
cargo build -q --release -p rddp-sctp --example sctp_perf
bin=target/release/rddp
ex=target/release/examples

# Every process this script starts is ended by its id when it exits.
pids=()
old_src=target/bench-old/src
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -z "$against" ] || git worktree remove --force "$old_src" 2>/dev/null || true
}
trap cleanup EXIT

if [ -n "$against" ]; then
  old_rev=$(git rev-parse --short "$against^{commit}")
  git worktree remove --force "$old_src" 2>/dev/null || true
  git worktree add -q --detach "$old_src" "$old_rev"
  CARGO_TARGET_DIR=target/bench-old/target \
    cargo build -q --release --manifest-path "$old_src/Cargo.toml" -p rddp-cli --bin rddp
  old_bin=target/bench-old/target/release/rddp
fi

median() { sort -g | awk '{a[NR]=$1} END {m=int((NR+1)/2); if (NR%2) print a[m]; else print (a[m]+a[m+1])/2}'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
json_field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" | head -1; }
wait_port() { for _ in $(seq 100); do python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),0.1)" 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# rddp perf client ARGS... against a fresh server; prints FIELD of its JSON line.
# PIN=1 pins both ends to CPU 0; PIN_SERVER=C and PIN_CLIENT=C pin one end each.
# The link options (--qps N, --transport T) go to both ends.
rddp_perf() {
  local field=$1; shift
  local port pin=() cpin=() srv out link=() a
  port=$(free_port)
  [ "${PIN:-0}" = 1 ] && pin=(taskset -c 0) && cpin=(taskset -c 0)
  [ -n "${PIN_SERVER:-}" ] && pin=(taskset -c "$PIN_SERVER")
  [ -n "${PIN_CLIENT:-}" ] && cpin=(taskset -c "$PIN_CLIENT")
  for a in $(seq $#); do
    case ${!a} in --qps|--transport|--rcvbuf) local b=$((a + 1)); link+=("${!a}" "${!b}") ;; esac
  done
  "${pin[@]}" "$bin" perf server --listen "127.0.0.1:$port" "${link[@]}" >/dev/null 2>&1 &
  srv=$!; pids+=("$srv")
  sleep 0.3
  out=$("${cpin[@]}" "$bin" perf client --connect "127.0.0.1:$port" --json "$@" || true)
  wait "$srv" 2>/dev/null || true
  # Payload octets copied in user space at both ends, and octets moved.
  echo "$(echo "$out" | json_field payload_copied_octets) $(echo "$out" | json_field bytes)" >>"$copies_log"
  echo "$out" | json_field "$field"
}

# iperf3 with writes of LEN octets moving TOTAL octets; prints Gbit/s (receiver).
iperf() {
  local len=$1 total=$2 port srv g
  port=$(free_port)
  iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  srv=$!; pids+=("$srv")
  sleep 0.3
  g=$(iperf3 -c 127.0.0.1 -p "$port" -l "$len" -n "$total" -f g 2>/dev/null \
      | awk '/receiver/ {for (i=1;i<=NF;i++) if ($i=="Gbits/sec") print $(i-1)}')
  wait "$srv" 2>/dev/null || true
  echo "$g"
}

# sockperf TCP ping-pong of 64-octet messages, both ends on CPU 0; prints p50 (us,
# one way: sockperf reports half the round trip, as rddp perf does).
sockperf_pp() {
  local port srv p
  port=$(free_port)
  taskset -c 0 sockperf sr --tcp -i 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  srv=$!; pids+=("$srv")
  wait_port "$port"
  p=$(taskset -c 0 sockperf pp --tcp -i 127.0.0.1 -p "$port" -m 64 -t "$pp_secs" 2>/dev/null \
      | sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p')
  kill "$srv" 2>/dev/null || true
  wait "$srv" 2>/dev/null || true
  echo "$p"
}

declare -A R B
copies_log=target/bench-perf.copies
mkdir -p target
: >"$copies_log"
add() { R[$1]+="$2 "; B[$1]+="$3 "; }
last() { awk '{printf "%.4g", $NF}' <<<"$1"; }
# Each row's baseline (b_*) and rddp run (r_*); `pair` runs the two in turn.
b_write() { iperf 1M $((big << 20)); }
r_write() { rddp_perf gbit_per_s --op write --size 1M --iters "$big"; }
b_read() { iperf 1M $((big << 20)); }
r_read() { rddp_perf gbit_per_s --op read --size 1M --iters "$big"; }
b_send64k() { iperf 64K $((k64 << 16)); }
r_send64k() { rddp_perf gbit_per_s --op send --size 64K --iters "$k64"; }
b_msg64() { "$ex/tcp_msg_rate" 64 "$small" "$batch" | json_field msgs_per_s; }
r_msg64() { rddp_perf msgs_per_s --op send --size 64 --iters "$small"; }
# Pinned: the receiver on CPU 0, the sender on CPU 1 (the last CPU there is).
cpu1=$(( $(nproc) > 1 ? 1 : 0 ))
b_msg64pin() { "$ex/tcp_msg_rate" 64 "$small" "$batch" "$cpu1" 0 | json_field msgs_per_s; }
r_msg64pin() { PIN_SERVER=0 PIN_CLIENT=$cpu1 rddp_perf msgs_per_s --op send --size 64 --iters "$small"; }
b_pp() { sockperf_pp; }
r_pp() { PIN=1 rddp_perf p50_us --op send --pingpong --size 64 --iters "$pp"; }
# Both with a fixed 1 MiB SO_RCVBUF on every socket (iperf3's -w; autotuning
# never grows the windows of connections that each move 2 MB).
b_many() { rddp_perf gbit_per_s --rcvbuf 1048576 --op write --size 64K --iters $(( many_iters * many )); }
r_many() { rddp_perf gbit_per_s --rcvbuf 1048576 --qps "$many" --op write --size 64K --iters "$many_iters"; }
# No target of its own: the same without --rcvbuf (the kernel's autotuning)
# against plain TCP on as many connections moving the same octets.
b_manyauto() { "$ex/tcp_many" "$many" $(( many_iters << 16 )) 65536 | json_field gbit_per_s; }
r_manyauto() { rddp_perf gbit_per_s --qps "$many" --op write --size 64K --iters "$many_iters"; }
b_sctp() { "$ex/sctp_perf" 1 "$sctp_mib" raw 2>/dev/null | sed -n 's/^median.* raw \([0-9.]*\) Gbit.*/\1/p'; }
r_sctp() { rddp_perf gbit_per_s --transport sctp --op write --size 64K --iters $(( sctp_mib * 16 )); }
# Odd rounds run the baseline first, even rounds rddp: neither always finds the
# machine as the other left it.
failed() { echo "bench-perf: the $2 run of the $1 row failed (round $r)" >&2; exit 1; }
pair() {
  local t g
  if (( r % 2 )); then t=$(b_$1) || failed "$1" baseline; g=$(r_$1) || failed "$1" rddp
  else g=$(r_$1) || failed "$1" rddp; t=$(b_$1) || failed "$1" baseline; fi
  add "$1" "${g:-0}" "${t:-0}"
}
# The rows each round runs, in this order: those ROWS names, but the idle
# row (measured once, after the rounds).
keys=()
for k in $all_rows; do
  if [ "$k" != idle ] && runs "$k"; then keys+=("$k"); fi
done
if [ -n "$against" ]; then
  # Each row's baseline: the same rddp run with the old binary (bash's locals
  # are seen by the functions called: rddp_perf runs $bin).
  for k in "${keys[@]}"; do eval "b_$k() { local bin=\$old_bin; r_$k; }"; done
fi
for r in $(seq "$rounds"); do
  for k in "${keys[@]}"; do pair "$k"; done
  line="round $r/$rounds (rddp/baseline):"
  for k in "${keys[@]}"; do
    line+=" $k $(last "${R[$k]}")/$(last "${B[$k]}")"
  done
  echo "$line" >&2
done
med() { tr ' ' '\n' | grep -v '^$' | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
fmt() { awk -v v="$1" -v f="$2" 'BEGIN { printf f, v }'; }

if [ -n "$against" ]; then
  crow() { # name key printf-format
    runs "$2" || return 0
    local a b; a=$(echo "${R[$2]}" | med); b=$(echo "${B[$2]}" | med)
    printf '| %s | %s | %s | %s |\n' "$1" "$(fmt "$a" "$3")" "$(fmt "$b" "$3")" "$(ratio "$a" "$b")"
  }
  {
    echo "| work (verbs QP over MPA/TCP, CRC on) | rddp now ($(git rev-parse --short HEAD)) | rddp at $old_rev | now / then |"
    echo "|---|---|---|---|"
    crow "RDMA Write 1 MiB, Gbit/s" write %.1f
    crow "RDMA Read 1 MiB, Gbit/s" read %.1f
    crow "Send 64 KiB, Gbit/s" send64k %.1f
    crow "Send 64 B, messages/s" msg64 %.0f
    crow "Send 64 B, messages/s, receiver on CPU 0 and sender on CPU $cpu1" msg64pin %.0f
    crow "Send ping-pong 64 B, p50 one way, us (lower is better)" pp %.1f
    crow "$many queue pairs of 64 KiB Writes, aggregate Gbit/s (--rcvbuf 1M)" many %.2f
    crow "$many queue pairs of 64 KiB Writes, autotuning, aggregate Gbit/s" manyauto %.2f
    crow "DDP over SCTP (verbs QP), 64 KiB Writes, Gbit/s" sctp %.2f
    echo
    echo "($rounds rounds, medians, alternately in the same run, $(nproc) cores, Linux $(uname -r | cut -d- -f1), $(date -u +%Y-%m-%d)$([ $quick = 1 ] && echo ', quick' || true); scripts/bench-perf.sh --against $old_rev)"
  } | tee target/bench-against.md
  exit 0
fi

# Idle queue pairs (the row idle): `rddp target` with small buffers, IDLE
# connections held open.
if runs idle; then
  buf=4096; rcount=2; rsize=4096
  port=$(free_port)
  "$bin" target --listen "127.0.0.1:$port" --buffer-size $buf --recv-count $rcount --recv-size $rsize \
    >/dev/null 2>target/idle_target.err &
  tgt=$!; pids+=("$tgt")
  wait_port "$port"
  sleep 0.3
  status() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$tgt/status" 2>/dev/null || echo 0; }
  rss0=$(status VmRSS)
  "$ex/idle_mpa" "127.0.0.1:$port" "$idle_n" >target/idle_mpa.out 2>&1 &
  idle=$!; pids+=("$idle")
  ready=failed
  for _ in $(seq 600); do
    grep -q '^ready' target/idle_mpa.out 2>/dev/null && { ready=ok; break; }
    kill -0 "$idle" 2>/dev/null || break
    sleep 0.5
  done
  sleep 1
  threads=$(status Threads)
  rss1=$(status VmRSS)
  if ! kill -0 "$tgt" 2>/dev/null; then
    ready=failed
    echo "rddp target exited during the idle measurement: $(tail -1 target/idle_target.err)" >> target/idle_mpa.out
  fi
  per_kib=$(awk -v a="$rss0" -v b="$rss1" -v n="$idle_n" -v reg=$(( (buf + rcount * rsize) / 1024 )) \
    'BEGIN { printf "%.1f", (b - a) / n - reg }')
  kill "$idle" "$tgt" 2>/dev/null || true
  wait "$idle" "$tgt" 2>/dev/null || true
  if [ $ready != ok ]; then
    echo "idle connections failed: $(tail -1 target/idle_mpa.out)" >&2
    threads="(failed: $(tail -1 target/idle_mpa.out))"; per_kib="-"
  fi
fi

row() { # name key unit baseline-name target printf-format
  runs "$2" || return 0
  local a b; a=$(echo "${R[$2]}" | med); b=$(echo "${B[$2]}" | med)
  printf '| %s | %s%s | %s: %s | %s | %s |\n' "$1" "$(fmt "$a" "$6")" "$3" "$4" "$(fmt "$b" "$6")" \
    "$(ratio "$a" "$b")" "$5"
}
rowlat() {
  runs pp || return 0
  local a b; a=$(echo "${R[pp]}" | med); b=$(echo "${B[pp]}" | med)
  printf '| %s | %s us | sockperf: %s us | %sx slower | <= 1.3x |\n' "$1" "$(fmt "$a" %.1f)" \
    "$(fmt "$b" %.1f)" "$(ratio "$a" "$b")"
}
table=$(
  echo "| work (verbs QP over MPA/TCP, CRC on) | rddp | baseline | ratio | target |"
  echo "|---|---|---|---|---|"
  row "RDMA Write 1 MiB, Gbit/s" write "" "iperf3 -l 1M" ">= 0.95" %.1f
  row "RDMA Read 1 MiB, Gbit/s" read "" "iperf3 -l 1M" ">= 0.9" %.1f
  row "Send 64 KiB, Gbit/s" send64k "" "iperf3 -l 64K" ">= 0.9" %.1f
  row "Send 64 B, messages/s" msg64 "" "tcp_msg_rate, $batch per write" ">= 0.8" %.0f
  row "Send 64 B, messages/s, receiver on CPU 0 and sender on CPU $cpu1" msg64pin "" "tcp_msg_rate, the same" "(none)" %.0f
  rowlat "Send ping-pong 64 B, p50 one way, both ends on CPU 0"
  row "$many queue pairs of 64 KiB Writes, aggregate Gbit/s (both --rcvbuf 1M)" many "" "one queue pair" ">= 0.8" %.2f
  row "$many queue pairs of 64 KiB Writes, autotuning, aggregate Gbit/s" manyauto "" "tcp_many, $many plain TCP connections" "(none)" %.2f
  row "DDP over SCTP (verbs QP), 64 KiB Writes, Gbit/s" sctp "" "usrsctp unordered messages" ">= 0.9" %.2f
  awk 'NF == 2 { c += $1; b += $2; n++ } NF != 2 { miss++ }
    END { printf "| user-space copies of payload, both ends of every rddp run above | %d octets of %.1f GiB moved (%d runs%s) | | | only Sends under 1 KiB read alone |\n",
          c, b / 2^30, n, miss ? ", " miss " without a count" : "" }' "$copies_log"
  ! runs idle || echo "| \`rddp target\`, $idle_n idle MPA connections | $threads threads, $per_kib KiB per connection beyond its $(( (buf + rcount * rsize) / 1024 )) KiB of buffers | | | <= cores + 4 threads, <= 32 KiB |"
)
# The machine and the code are part of the figures (the ratios move with
# both): the CPU model, the kernel and the commit go into the stamp.
cpu=$(awk -F': *' '/^model name/ && !n {n = $2} /^cpu family/ && !f {f = $2} /^model[[:space:]]*:/ && !m {m = $2}
  END { if (n != "") printf "%s (family %s, model %s)", n, f, m }' /proc/cpuinfo 2>/dev/null)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo ' with local changes' || true)
stamp="$rounds rounds, medians, $(nproc) cores of ${cpu:-an unknown CPU}, Linux $(uname -r | cut -d- -f1), $(date -u +%Y-%m-%d), main at $commit$dirty$([ $quick = 1 ] && echo ', quick' || true)"
mkdir -p target
{ echo "$table"; echo; echo "($stamp; scripts/bench-perf.sh)"; } | tee target/bench-perf.md

if [ $write = 1 ]; then
  python3 - "$stamp" <<'EOF'
import re, sys
stamp = sys.argv[1]
table = open("target/bench-perf.md").read().split("\n\n(")[0]
body = f"<!-- bench-perf:begin -->\n{table}\n\n({stamp}; `scripts/bench-perf.sh --write`)\n<!-- bench-perf:end -->"
s = open("docs/benchmarks.md").read()
new, n = re.subn(r"<!-- bench-perf:begin -->.*?<!-- bench-perf:end -->", lambda m: body, s, flags=re.S)
if n != 1:
    sys.exit("docs/benchmarks.md has no bench-perf markers")
open("docs/benchmarks.md", "w").write(new)
print("docs/benchmarks.md table updated")
EOF
fi

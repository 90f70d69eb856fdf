#!/usr/bin/env bash
# Soak: mixed RDMA Write / RDMA Read / Send traffic of random
# sizes over 100 queue pairs with --verify and periodic reconnects, between an
# `rddp perf server --forever` and an `rddp perf client --op mixed`, for DURATION
# seconds. --verify checks every octet of every message (docs/perf.md: each
# Send at the server, each Read's sink at its completion and again before its
# next Read, each Write read back before its octets are written again). Every
# SAMPLE seconds it records each process's VmRSS, threads and file descriptors
# and the client's counters; at the end it prints the series, the errors, the
# octets verified, and whether memory stayed flat. Exit 0 only with no error,
# no wrong octet, octets verified and flat memory.
#
#   scripts/soak.sh DURATION            e.g. scripts/soak.sh 600
#
# Environment: RDDP (binary; default: build target/release/rddp), QPS (100),
# RECONNECT (seconds between a queue pair's reconnects, 10), SEED (1), SIZE
# (largest message, 32K), SAMPLE (5), OUT (directory for the logs, a new one
# under /tmp), TRANSPORT (mpa or sctp, mpa), FAULTS (arguments of
# scripts/faults/netem_bridge.py, e.g. "--loss 0.01 --dup 0.01 --reorder 0.25
# --reorder-corr 0.5 --delay 1": the server and the client then run in two
# network namespaces joined through the impairing bridge, scripts/faults/netns.sh;
# needs root, ip, ethtool and python3; empty: loopback, no bridge), STALL
# (seconds without progress before either side gives up, 10; SCTP through
# loss backs its retransmission timer off past 10 s at times).
#
# Flat memory: for each process, the largest VmRSS of the last fifth of the run
# may exceed the largest of the second fifth (after warm-up: every queue pair
# connected and reconnected at least once at the defaults) by at most
# max(16 MiB, 10 %) (the allocator settles over the first minute: +6 % in
# 60 s runs, decelerating); threads and file descriptors by max(16, 10 %).
set -euo pipefail

DURATION=${1:?usage: scripts/soak.sh DURATION_SECONDS}
QPS=${QPS:-100}
RECONNECT=${RECONNECT:-10}
SEED=${SEED:-1}
SIZE=${SIZE:-32K}
SAMPLE=${SAMPLE:-5}
TRANSPORT=${TRANSPORT:-mpa}
FAULTS=${FAULTS:-}
STALL=${STALL:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$(mktemp -d /tmp/rddp-soak.XXXXXX)}
mkdir -p "$OUT"
case $TRANSPORT in mpa | sctp) ;; *) echo "soak: TRANSPORT is mpa or sctp" >&2; exit 2 ;; esac

if [ -z "${RDDP:-}" ]; then
  (cd "$ROOT" && nice -n 10 cargo build --release --locked -q -p rddp-cli)
  RDDP=$ROOT/target/release/rddp
fi
[ -x "$RDDP" ] || { echo "soak: no rddp binary at $RDDP" >&2; exit 2; }

SERVER=""; CLIENT=""; BRIDGE=""
HOST=127.0.0.1
IN_S=(); IN_C=()   # the namespaces' `ip netns exec`, with FAULTS
cleanup() {
  [ -n "$CLIENT" ] && kill "$CLIENT" 2>/dev/null || true
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
  [ -n "$CLIENT" ] && wait "$CLIENT" 2>/dev/null || true
  [ -n "$SERVER" ] && wait "$SERVER" 2>/dev/null || true
  if [ -n "$FAULTS" ]; then ft_down; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$FAULTS" ]; then
  [ "$(id -u)" = 0 ] || { echo "soak: FAULTS needs root (network namespaces)" >&2; exit 2; }
  # shellcheck source=faults/netns.sh
  source "$ROOT/scripts/faults/netns.sh"
  ft_up_bridged
  # shellcheck disable=SC2086 # FAULTS is a list of arguments
  # The bridge stops by itself after --duration (600 s unless told): it must
  # outlive the run.
  ft_bg "$NS_M" nice -n 5 python3 "$ROOT/scripts/faults/netem_bridge.py" mA mB --seed "$SEED" \
    --duration "$((${DURATION%.*} + 300))" --stats "$OUT/bridge.json" --ready "$OUT/bridge.ready" \
    $FAULTS 2>"$OUT/bridge.err"
  BRIDGE=$FT_LAST
  # A loaded machine may take many seconds to start it: 120 s at most.
  for _ in $(seq 1200); do
    [ -e "$OUT/bridge.ready" ] && break
    kill -0 "$BRIDGE" 2>/dev/null || break
    sleep 0.1
  done
  [ -e "$OUT/bridge.ready" ] || { echo "soak: the bridge did not start" >&2; cat "$OUT/bridge.err" >&2; exit 2; }
  HOST=$IP_B
  IN_S=(ip netns exec "$NS_B"); IN_C=(ip netns exec "$NS_A")
fi

# `nice ip netns exec rddp ...`: each execs the next, so $! is rddp's PID.
nice -n 10 ${IN_S[@]+"${IN_S[@]}"} "$RDDP" perf server --listen "$HOST:0" --forever \
  --rx-depth 32 --transport "$TRANSPORT" --stall-secs "$STALL" >"$OUT/server.out" 2>"$OUT/server.err" &
SERVER=$!
ADDR=""
# Until it says where it listens, or exits (120 s at most: a debug build on a
# loaded machine may take many seconds to start).
for _ in $(seq 1200); do
  ADDR=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$OUT/server.err" | head -1)
  [ -n "$ADDR" ] && break
  kill -0 "$SERVER" 2>/dev/null || break
  sleep 0.1
done
[ -n "$ADDR" ] || { echo "soak: the server did not start" >&2; cat "$OUT/server.err" >&2; exit 2; }

nice -n 10 ${IN_C[@]+"${IN_C[@]}"} "$RDDP" perf client --connect "$ADDR" --op mixed \
  --transport "$TRANSPORT" --qps "$QPS" --duration "$DURATION" --reconnect "$RECONNECT" \
  --seed "$SEED" --size "$SIZE" --stall-secs "$STALL" --verify >"$OUT/client.out" 2>"$OUT/client.err" &
CLIENT=$!

# pid -> "rss_kib threads fds"
probe() {
  local rss thr fds
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  thr=$(awk '/^Threads:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  fds=$(ls "/proc/$1/fd" 2>/dev/null | wc -l)
  echo "${rss:-0} ${thr:-0} $fds"
}

echo "t c_rss_kib c_threads c_fds s_rss_kib s_threads s_fds" >"$OUT/samples.txt"
START=$(date +%s.%N)
NEXT=$SAMPLE
while kill -0 "$CLIENT" 2>/dev/null; do
  NOW=$(awk -v s="$START" -v n="$(date +%s.%N)" 'BEGIN {print n - s}')
  if awk -v a="$NOW" -v b="$NEXT" 'BEGIN {exit !(a >= b)}'; then
    C=$(probe "$CLIENT") || break
    S=$(probe "$SERVER") || { echo "soak: the server died" >&2; break; }
    echo "$NEXT $C $S" >>"$OUT/samples.txt"
    NEXT=$((NEXT + SAMPLE))
  fi
  sleep 0.2
done
set +e
wait "$CLIENT"; CLIENT_RC=$?
set -e
CLIENT=""
sleep 1   # the server's last connections end after the client's Bye
if [ -n "$BRIDGE" ]; then
  ft_stop "$BRIDGE" 10   # it writes its statistics on TERM
fi

LAST=$(grep '"done":true' "$OUT/client.out" | tail -1 || true)
field() { echo "$LAST" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
C_ERRORS=$(field errors); C_CORRUPT=$(field corrupt)
VERIFIED=$(field verified_bytes); VERIFIED=${VERIFIED:-0}
W_VERIFIED=$(field write_verified_bytes); W_VERIFIED=${W_VERIFIED:-0}
LATE=$(field late); LATE=${LATE:-0}
S_ERRORS=$(grep -c "rddp perf server: connection" "$OUT/server.err" || true)
# Wrong octets in Sends: of the connections that ended well (server.out) and of
# those that failed (server.err, "... (before: ..., N corrupt bytes)").
S_CORRUPT=$(awk '/corrupt bytes\)?$/ {s += $(NF-2)} END {print s + 0}' "$OUT/server.out" "$OUT/server.err")
S_CONNS=$(grep -c "corrupt bytes" "$OUT/server.out" || true)
[ -n "$LAST" ] || { C_ERRORS=1; C_CORRUPT=0; echo "soak: the client gave no final line (rc $CLIENT_RC)" >&2; }

echo "rddp soak: $QPS queue pairs over $TRANSPORT, ${DURATION} s, reconnect every ${RECONNECT} s, seed $SEED, sizes 1..$SIZE, stall ${STALL} s, --verify${FAULTS:+, bridge: $FAULTS}"
echo
printf '%6s | %10s %8s %6s | %10s %8s %6s\n' "t[s]" "client RSS" threads fds "server RSS" threads fds
awk 'NR > 1 {printf "%6d | %7.1f MiB %8d %6d | %7.1f MiB %8d %6d\n", $1, $2/1024, $3, $4, $5/1024, $6, $7}' "$OUT/samples.txt"
echo
echo "client: $(echo "$LAST" | sed 's/"error_messages":\[[^]]*\],//')"
echo "server: $S_CONNS connections served, $S_CORRUPT corrupt octets in Sends, $S_ERRORS connection errors"
if [ -s "$OUT/bridge.json" ]; then echo "bridge: $(tr -d '\n' <"$OUT/bridge.json" | cut -c1-600)"; fi
sed -n '1,5p' "$OUT/client.err" "$OUT/server.err" | grep -v "listening on" | sed 's/^/  /' || true

# Flat: the last fifth against the second fifth (largest value of each).
VERDICT=$(awk -v d="$DURATION" '
  NR == 1 { next }
  { t = $1
    for (i = 2; i <= 7; i++) {
      if (t > d * 0.2 && t <= d * 0.4 && $i > base[i]) base[i] = $i
      if (t > d * 0.8 && $i > fin[i]) fin[i] = $i
    } }
  END {
    split("client_rss client_threads client_fds server_rss server_threads server_fds", name)
    ok = 1; out = ""
    for (i = 2; i <= 7; i++) {
      if (!(i in base) || !(i in fin)) { ok = 0; out = out " " name[i-1] "=no-samples"; continue }
      rss = (i == 2 || i == 5)
      slack = rss ? 16384 : 16
      if (base[i] * 0.10 > slack) slack = base[i] * 0.10
      grow = fin[i] - base[i]
      flat = grow <= slack
      if (!flat) ok = 0
      out = out sprintf(" %s=%d->%d%s", name[i-1], base[i], fin[i], flat ? "" : "(GROWING)")
    }
    print (ok ? "flat" : "NOT-FLAT") out
  }' "$OUT/samples.txt")
echo "memory (largest of the 2nd fifth -> of the last fifth; RSS in KiB): $VERDICT"

ERRORS=$(( ${C_ERRORS:-1} + ${C_CORRUPT:-0} + S_ERRORS + S_CORRUPT ))
# A run that verified nothing proves nothing.
[ "$VERIFIED" -gt 0 ] || { ERRORS=$((ERRORS + 1)); echo "soak: no octet verified" >&2; }
FLAT=false; case $VERDICT in flat*) FLAT=true ;; esac
echo "soak-result {\"errors\":$ERRORS,\"client_errors\":${C_ERRORS:-1},\"corrupt\":$(( ${C_CORRUPT:-0} + S_CORRUPT )),\"verified_bytes\":$VERIFIED,\"write_verified_bytes\":$W_VERIFIED,\"late\":$LATE,\"server_errors\":$S_ERRORS,\"transport\":\"$TRANSPORT\",\"faults\":\"$FAULTS\",\"flat_memory\":$FLAT,\"logs\":\"$OUT\"}"
[ "$ERRORS" -eq 0 ] && [ "$FLAT" = true ]

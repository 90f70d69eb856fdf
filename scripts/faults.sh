#!/usr/bin/env bash
# Real network faults between two network namespaces; docs/faults.md.
#
#   scripts/faults.sh [--short] [--out DIR] [--seed N]
#
# `rddp perf --verify` runs between namespace A (client, 10.91.0.1) and B
# (server, 10.91.0.2) through a middle namespace M, where
# scripts/faults/netem_bridge.py forwards every frame with seeded impairments
# (this kernel has no netem). Cases:
#
#   MPA/TCP, Write, Read and Send:  loss 1 %, duplication 1 %, reordering 25 %
#     (each alone; --short: all three at once): must complete byte-exact.
#   MPA/TCP, CRC on, 0.1 % of the data frames corrupted with the TCP checksum
#     fixed (so TCP delivers the bad octet): every corrupted FPDU that reached
#     MPA is refused by the CRC (the refused FPDU is the one the bridge hit),
#     Terminate 2/0/0x02 goes over the wire, 0 corrupt octets delivered.
#   MPA/TCP, CRC off, same corruption: the damage that gets through.
#   DDP/SCTP (usrsctp over UDP), Write, Read and Send, through the same
#     impairments and corruption (UDP checksum fixed: SCTP's CRC32c must
#     catch it): must complete byte-exact.
#
# Prints one table; --out DIR keeps results.jsonl (one record per run) and
# summary.json (what tests assert on). Exit 0 only if every check passed.
# Needs root (namespaces); installs iproute2, ethtool, python3, libusrsctp-dev
# with apt when missing. RDDP=path uses that rddp binary instead of building
# one (the cargo test passes its own).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/scripts/faults
SHORT=0
OUT=""
SEED=${SEED:-1}
while [ $# -gt 0 ]; do
  case $1 in
    --short) SHORT=1 ;;
    --out) OUT=$2; shift ;;
    --seed) SEED=$2; shift ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "faults.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$(id -u)" != 0 ]; then
  echo "faults.sh: needs root (it creates network namespaces)" >&2
  exit 2
fi

# --- what it needs ---
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v ethtool >/dev/null || need+=(ethtool)
[ -x /usr/bin/python3 ] || need+=(python3)
dpkg -s libusrsctp-dev >/dev/null 2>&1 || need+=(libusrsctp-dev)
# shellcheck source=faults/netns.sh
source "$HERE/netns.sh"
ft_install faults.sh ${need[@]+"${need[@]}"}
PY=/usr/bin/python3
ft_rddp faults.sh
W=$(mktemp -d /tmp/rddp-faults.XXXXXX)
cleanup() {
  ft_down
  if [ -n "$OUT" ]; then
    mkdir -p "$OUT"
    cp "$W"/results.jsonl "$W"/summary.json "$OUT"/ 2>/dev/null || true
  fi
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ft_up_bridged
RESULTS=$W/results.jsonl
: >"$RESULTS"

SIZE=65536
if [ $SHORT = 1 ]; then ITERS=256; CORRUPT_RUNS=4; else ITERS=2048; CORRUPT_RUNS=20; fi
# A run that should die at the first corrupted FPDU offers far more than it
# needs (0.1 % of ~1448-octet frames: about one per 1.4 MB).
DIE_ITERS=4096
LOSS="--loss 0.01"
DUP="--dup 0.01"
REORDER="--reorder 0.25 --reorder-corr 0.5 --delay 1"
ALL="$LOSS $DUP $REORDER"
CORRUPT="--corrupt 0.001"
N=0

# run_case NAME KIND TRANSPORT OP CRC ITERS BRIDGE_ARGS...
run_case() {
  local name=$1 kind=$2 transport=$3 op=$4 crc=$5 iters=$6
  shift 6
  N=$((N + 1))
  local d=$W/run$N seed=$((SEED * 1000 + N)) i t0 cl_rc=0
  mkdir -p "$d"
  ft_bg "$NS_M" "$PY" "$HERE/netem_bridge.py" mA mB --seed "$seed" --stats "$d/bridge.json" \
    --ready "$d/ready" "$@" 2>"$d/bridge.err"
  local br=$FT_LAST
  for ((i = 0; i < 100; i++)); do [ -e "$d/ready" ] && break; sleep 0.05; done
  ft_perf_server "$NS_B" "$d" --listen "$IP_B:0" --transport "$transport" --crc "$crc"
  local sv=$FT_SERVER
  t0=$(date +%s.%N)
  if [ -n "$FT_PORT" ]; then
    nsA timeout 300 "$RDDP" perf client --connect "$IP_B:$FT_PORT" --transport "$transport" \
      --crc "$crc" --op "$op" --size "$SIZE" --iters "$iters" --verify --json \
      >"$d/client.out" 2>"$d/client.err" || cl_rc=$?
  else
    echo "server did not listen" >"$d/client.err"
    cl_rc=255
  fi
  ft_perf_server_end "$sv"
  ft_stop "$br" 10
  "$PY" "$HERE/record.py" --dir "$d" --name "$name" --kind "$kind" --transport "$transport" \
    --op "$op" --crc "$crc" --iters "$iters" --size "$SIZE" --client-rc "$cl_rc" \
    --server-rc "$FT_SERVER_RC" --t0 "$t0" --impair "$*" >>"$RESULTS"
  "$PY" "$HERE/summarize.py" --progress "$RESULTS" >&2
}

ops=(write read send)
# corruption direction: where the data flows (Read: B -> A, the rest A -> B)
cdir() { if [ "$1" = read ]; then echo rev; else echo fwd; fi; }

if [ $SHORT = 1 ]; then
  for op in "${ops[@]}"; do run_case "loss+dup+reorder" clean mpa "$op" on "$ITERS" $ALL; done
else
  for op in "${ops[@]}"; do
    run_case "none (bridge only)" clean mpa "$op" on "$ITERS"
    run_case "loss 1%" clean mpa "$op" on "$ITERS" $LOSS
    run_case "dup 1%" clean mpa "$op" on "$ITERS" $DUP
    run_case "reorder 25%" clean mpa "$op" on "$ITERS" $REORDER
    run_case "loss+dup+reorder" clean mpa "$op" on "$ITERS" $ALL
  done
fi
for op in "${ops[@]}"; do
  for ((r = 0; r < CORRUPT_RUNS; r++)); do
    run_case "corrupt 0.1%" crc-on mpa "$op" on "$DIE_ITERS" $CORRUPT --corrupt-dir "$(cdir "$op")" --track-mpa
  done
done
crc_off_ops=(send)
[ $SHORT = 1 ] || crc_off_ops=(send write read)
for op in "${crc_off_ops[@]}"; do
  run_case "corrupt 0.1%" crc-off mpa "$op" off "$ITERS" $CORRUPT --corrupt-dir "$(cdir "$op")" --track-mpa
done
for op in "${ops[@]}"; do
  if [ $SHORT = 1 ]; then
    run_case "loss+dup+reorder+corrupt" clean sctp "$op" on "$ITERS" $ALL $CORRUPT
  else
    run_case "none (bridge only)" clean sctp "$op" on "$ITERS"
    run_case "loss 1%" clean sctp "$op" on "$ITERS" $LOSS
    run_case "dup 1%" clean sctp "$op" on "$ITERS" $DUP
    run_case "reorder 25%" clean sctp "$op" on "$ITERS" $REORDER
    run_case "corrupt 0.1%" clean sctp "$op" on "$ITERS" $CORRUPT
    run_case "loss+dup+reorder+corrupt" clean sctp "$op" on "$ITERS" $ALL $CORRUPT
  fi
done

"$PY" "$HERE/summarize.py" --table "$RESULTS" --summary "$W/summary.json"

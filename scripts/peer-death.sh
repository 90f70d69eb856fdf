#!/usr/bin/env bash
# Peer death at length (CI runs the short form through
# `cargo test -p rddp-cli --test cli -- peer_death::`, its `cycles` module included):
#   scripts/peer-death.sh [CYCLES] [CUTS]
# CYCLES connect / SIGKILL cycles in one process (default 10000; the leak check
# compares cycle 1 with the last), then CUTS runs of each link-cut test (default
# 20; root: two network namespaces each) with the time from the cut to the last
# completion: min / median / max.
set -euo pipefail
CYCLES=${1:-10000}
CUTS=${2:-20}
cd "$(dirname "$0")/.."
t() { nice -n 10 cargo test -q --locked -p rddp-cli "$@"; }

echo "== $CYCLES connect/SIGKILL cycles over MPA, then over SCTP"
RDDP_PEER_DEATH_CYCLES=$CYCLES RDDP_PEER_DEATH_SCTP_CYCLES=$CYCLES \
  t --test cli -- peer_death::cycles:: --nocapture 2>&1 |
  grep -E "after cycle|cycles in|panicked|test result"

echo "== SIGKILL mid-transfer and link cuts, $CUTS runs each"
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
for _ in $(seq "$CUTS"); do
  t --test cli -- peer_death:: --skip peer_death::cycles:: --nocapture --test-threads 1 2>&1 | tee -a "$LOG" |
    grep -E "panicked|FAILED" || true
done
for kind in "SIGKILL" "link cut (transfer)" "link cut (idle)" \
  "SCTP SIGKILL" "SCTP link cut (transfer)" "SCTP link cut (idle)"; do
  # Lines of this kind ("SIGKILL:" is not "SCTP SIGKILL:").
  awk -v k="$kind" 'index($0, k ":") && (k ~ /^SCTP/ || !index($0, "SCTP " k ":"))' "$LOG" |
    sed -n 's/.*within \([0-9.]*\)\(ms\|µs\|ns\|s\) .*/\1 \2/p' |
    awk '{ v = $1; if ($2 == "ms") v /= 1e3; if ($2 == "µs") v /= 1e6; if ($2 == "ns") v /= 1e9; print v }' |
    sort -g | awk -v k="$kind" '{ a[NR] = $1 }
      END { if (NR == 0) { print k ": no runs"; exit }
            printf "%-20s %d runs: death to last completion min %.3f s, median %.3f s, max %.3f s\n",
                   k, NR, a[1], a[int((NR + 1) / 2)], a[NR] }'
done

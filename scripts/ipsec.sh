#!/usr/bin/env bash
# rddp inside an IKEv2/ESP tunnel between two network namespaces; docs/reliability.md, "IPsec".
#
#   scripts/ipsec.sh [--out DIR] [--iters N]
#
# RFC 5042 (with RFC 3723) requires ESP (per-packet data origin authentication, integrity, replay
# protection), ESP tunnel mode and IKE for peer authentication and key
# management; rddp leaves them to the host (docs/security.md). This script is
# that host: strongSwan (Debian packages) runs IKEv2 with a pre-shared key in each
# namespace and ESP in tunnel mode between the inner addresses 10.92.0.1 (A) and
# 10.92.0.2 (B). This kernel has no ESP (no CONFIG_INET_ESP, no modules), so ESP
# runs in userspace: strongSwan's kernel-libipsec plugin (a TUN device, ESP in
# UDP on port 4500).
#
# Then `rddp perf --verify` (Write, Read, Send) runs over MPA/TCP and over SCTP
# (usrsctp over UDP) between the inner addresses while tcpdump captures the
# outer link (vB). tshark must find only UDP-encapsulated ESP (and IKE) there:
# no TCP, no SCTP, no plain UDP, no MPA. A control run over the outer addresses
# (no tunnel) must be seen in clear by the same check, so the check can fail.
# Prints one table; exit 0 only if every check passed. Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/scripts/faults
OUT=""
ITERS=256
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift ;;
    --iters) ITERS=$2; shift ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "ipsec.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "ipsec.sh: needs root (network namespaces)" >&2; exit 2; }

pkgs=(strongswan-charon strongswan-swanctl libcharon-extra-plugins libstrongswan-standard-plugins
  tcpdump tshark iproute2 iputils-ping libusrsctp-dev)
need=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
[ -x /usr/bin/python3 ] || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
fi
# shellcheck source=faults/netns.sh
source "$HERE/netns.sh"
ft_install ipsec.sh ${need[@]+"${need[@]}"}
PY=/usr/bin/python3
ft_rddp ipsec.sh
W=$(mktemp -d /tmp/rddp-ipsec.XXXXXX)
cleanup() {
  ft_down
  if [ -n "$OUT" ]; then mkdir -p "$OUT" && cp -r "$W"/. "$OUT"/ 2>/dev/null || true; fi
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ft_up_direct
IN_A=10.92.0.1
IN_B=10.92.0.2
# The inner addresses sit on the veth ends, not on lo: with them on lo, usrsctp's
# association setup inside the tunnel timed out (it does not seem to take an
# address on lo as its own). Routes to them go through the tunnel (table 220).
ip -n "$NS_A" addr add "$IN_A/32" dev vA
ip -n "$NS_B" addr add "$IN_B/32" dev vB

# --- IKEv2 + ESP: one charon per namespace, each with its own /run and vici socket
# RFC 7146: AES-GCM should be supported, AES-CBC-128 + HMAC-SHA1 is the required
# pair, Extended Sequence Numbers must be implemented with IPsec v3. ESN is tried
# first; kernel-libipsec refuses to install such an SA ("ESN not supported"),
# and then the same proposals without ESN are used (the table says which).
ESP_ESN=${ESP_ESN:-aes128gcm16-esn,aes128-sha1-esn}
ESP=${ESP:-aes128gcm16,aes128-sha1}
conf() { # side esp-proposals
  local side=$1 esp=$2 me peer lin rin
  if [ "$side" = A ]; then me=$IP_A; peer=$IP_B; lin=$IN_A; rin=$IN_B
  else me=$IP_B; peer=$IP_A; lin=$IN_B; rin=$IN_A; fi
  cat >"$W/$side.swanctl.conf" <<EOF
connections {
  rddp {
    version = 2
    local_addrs = $me
    remote_addrs = $peer
    encap = yes
    proposals = aes128-sha256-modp2048
    local {
      auth = psk
      id = $me
    }
    remote {
      auth = psk
      id = $peer
    }
    children {
      rddp {
        local_ts = $lin/32
        remote_ts = $rin/32
        mode = tunnel
        esp_proposals = $esp
        replay_window = 32
        start_action = trap
      }
    }
  }
}
secrets {
  ike-rddp {
    id-a = $IP_A
    id-b = $IP_B
    secret = rddp-test-only-psk-not-a-secret
  }
}
EOF
}
for side in A B; do
  if [ $side = A ]; then ns=$NS_A; else ns=$NS_B; fi
  cat >"$W/$side.strongswan.conf" <<EOF
charon {
  load = random nonce openssl aesni aes gcm sha1 sha2 hmac kdf gmp pem pkcs1 x509 pubkey kernel-libipsec kernel-netlink socket-default vici
  install_virtual_ip = no
  filelog {
    log {
      path = $W/$side.charon.log
      default = 1
      flush_line = yes
    }
  }
  plugins {
    vici {
      socket = unix://$W/$side.vici
    }
  }
}
EOF
  # charon writes /run/charon.pid: a private /run (ip netns exec gives a mount namespace).
  ft_bg "$ns" env STRONGSWAN_CONF="$W/$side.strongswan.conf" \
    sh -c 'mount -t tmpfs none /run && exec /usr/lib/ipsec/charon' >"$W/$side.charon.out" 2>&1
done
for ((i = 0; i < 100; i++)); do [ -S "$W/A.vici" ] && [ -S "$W/B.vici" ] && break; sleep 0.1; done
sw() { local side=$1; shift; STRONGSWAN_CONF="$W/$side.strongswan.conf" swanctl "$@" --uri "unix://$W/$side.vici"; }
up() { # esp-proposals
  local side
  for side in A B; do
    conf $side "$1"
    sw $side --load-all --file "$W/$side.swanctl.conf" >"$W/$side.load" 2>&1
  done
  sw A --initiate --child rddp --timeout 15 >"$W/initiate" 2>&1
}
ESN_NOTE="ESN offered ($ESP_ESN) and taken"
if ! up "$ESP_ESN"; then
  if grep -q "ESN not supported" "$W/A.charon.log" "$W/B.charon.log"; then
    ESN_NOTE="ESN offered ($ESP_ESN): refused by kernel-libipsec ('IPsec SA: ESN not supported'), so without ESN"
  else
    ESN_NOTE="ESN offered ($ESP_ESN): no SA (see the charon logs), so without ESN"
  fi
  up "$ESP" || { cat "$W/initiate" >&2; exit 1; }
fi
sw A --list-sas >"$W/sas" 2>&1
grep -q ESTABLISHED "$W/sas" && grep -q INSTALLED "$W/sas" || { cat "$W/sas" >&2; exit 1; }
# "rddp: #4, reqid 1, INSTALLED, TUNNEL-in-UDP, ESP:AES_GCM_16-128" and the IKE line
ESP_SA=$(grep -m1 INSTALLED "$W/sas" | sed 's/^ *//' || true)
ESP_ALG="IKE $(grep -m1 -E '^ +[A-Z0-9_]+[-/]' "$W/sas" | sed 's/^ *//' || true)"
nsA ping -c 3 -q -W 2 "$IN_B" >/dev/null || { echo "no ping through the tunnel" >&2; exit 1; }

# --- rddp perf over the inner addresses, the outer link captured
ft_bg "$NS_B" tcpdump -i vB -n -U -s 128 -w "$W/outer.pcap" 2>"$W/tcpdump.err"
TD=$FT_LAST
for ((i = 0; i < 50; i++)); do grep -q listening "$W/tcpdump.err" 2>/dev/null && break; sleep 0.1; done
RESULTS=$W/results.jsonl
: >"$RESULTS"
perf() { # label transport op server-ip
  local label=$1 t=$2 op=$3 dst=$4 d cl=0
  d=$W/$label-$t-$op
  mkdir -p "$d"
  ft_perf_server "$NS_B" "$d" --listen "$dst:0" --transport "$t"
  nsA timeout 300 "$RDDP" perf client --connect "$dst:$FT_PORT" --transport "$t" --op "$op" \
    --size 65536 --iters "$ITERS" --verify --json >"$d/client.out" 2>"$d/client.err" || cl=$?
  ft_perf_server_end "$FT_SERVER"
  "$PY" "$HERE/record.py" --dir "$d" --name "$label" --kind clean --transport "$t" --op "$op" \
    --crc on --iters "$ITERS" --size 65536 --client-rc "$cl" --server-rc "$FT_SERVER_RC" \
    --t0 "$(date +%s)" --impair "" >>"$RESULTS"
}
for t in mpa sctp; do for op in write read send; do perf tunnel "$t" "$op" "$IN_B"; done; done
sleep 0.5
ft_stop "$TD" 5
# Control: the same tool over the outer addresses (no tunnel), captured the same way.
# --immediate-mode: the control runs are short; without it packets in a capture
# block the kernel has not yet handed over (1 s timeout) are lost at SIGTERM.
ft_bg "$NS_B" tcpdump -i vB -n -U --immediate-mode -s 128 -w "$W/control.pcap" 2>"$W/tcpdump2.err"
TD=$FT_LAST
for ((i = 0; i < 50; i++)); do grep -q listening "$W/tcpdump2.err" 2>/dev/null && break; sleep 0.1; done
ITERS_SAVED=$ITERS
ITERS=16
for t in mpa sctp; do perf control "$t" write "$IP_B"; done
ITERS=$ITERS_SAVED
sleep 0.5
ft_stop "$TD" 5

"$PY" "$HERE/ipsec_check.py" --results "$RESULTS" --outer "$W/outer.pcap" --control "$W/control.pcap" \
  --sa "${ESP_SA:-?}" --alg "${ESP_ALG:-?}" --esn "$ESN_NOTE" --summary "$W/summary.json"

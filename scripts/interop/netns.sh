#!/usr/bin/env bash
# The routed guest network of run-guest.sh -n: network namespace NAME holding
# a tap device, tap0, the host's side of the guest's network (10.0.2.2/24; the
# guest is 10.0.2.15, as on QEMU's user network). QEMU, started in NAME, opens
# tap0; host commands run in NAME reach the guest's every port. Deleting the
# namespace deletes tap0. Needs root (CAP_NET_ADMIN).
# usage: netns.sh up NAME | netns.sh down NAME
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
case $1 in
  up)
    ip netns add "$2"
    if ! { ip -n "$2" link set lo up &&
      ip -n "$2" tuntap add tap0 mode tap &&
      ip -n "$2" addr add 10.0.2.2/24 dev tap0 &&
      ip -n "$2" link set tap0 up; }; then
      ip netns delete "$2"
      exit 1
    fi ;;
  down) ip netns delete "$2" ;;
  *) exit 2 ;;
esac

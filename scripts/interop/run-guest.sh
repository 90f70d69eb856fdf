#!/usr/bin/env bash
# Boot the interop guest (Debian 12 kernel, siw, rdma-core, perftest) under QEMU,
# run one guest command, stream the guest console to stdout, power off.
# Builds the guest first when the cache is missing (scripts/interop/build-guest.sh).
#
# usage: run-guest.sh [options] 'GUEST SHELL TEXT'
#   -s VARIANT   siw build loaded at boot: default crc strict crc+strict p2p crc+p2p rev1
#                (the guest text can switch with `siw VARIANT`)
#   -f HP:GP     forward host 127.0.0.1:HP to the guest's tcp port GP (repeatable)
#   -n NETNS     a routed network instead of QEMU's user network: the tap device
#                of network namespace NETNS (scripts/interop/netns.sh; made here
#                and deleted at the end unless it exists), the host's side
#                10.0.2.2; -B and -H commands run in NETNS and reach the guest's
#                every port at 10.0.2.15 (no -f). For tools that tell each other
#                ephemeral ports (libfabric's pingpong).
#   -B CMD       host command started before boot (bash), killed when the run ends
#   -H CMD       host command started when the guest first prints "### RDDP-READY"
#                (a `serve` step listening); the run waits for it, up to 60 s
#   -S DIR       share host DIR read-write at /mnt/host in the guest (9p)
#   -t SECONDS   limit for the guest command (default 120); the whole run gets 60 s more
#   -a ACCEL     tcg | kvm | auto (default auto: kvm only with VMX/SVM and no PVM)
#   -m MB        guest memory (default 768)
#   -q           print only the "### RDDP-" lines and step output, not the boot log
# In the guest text: the guest is 10.0.2.15, the host's 127.0.0.1 is 10.0.2.2, and
#   step NAME SECONDS CMD...        runs a guest client
#   serve NAME PORT SECONDS CMD...  runs a guest server, prints READY once it listens
#   siw VARIANT                     reloads siw with another build
# Exit status: the guest command's; 124 if the run timed out; 125 if the guest never
# reported one; else the -H command's if it failed.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${RDDP_INTEROP_CACHE:-/var/cache/rddp-interop}

VARIANT=default FWDS=() NETNS= BG= HOSTCMD= SHARE= TMO=120 ACCEL=auto MEM=768 QUIET=0
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
while getopts "s:f:n:B:H:S:t:a:m:qh" o; do
  case $o in
    s) VARIANT=$OPTARG ;;
    f) FWDS+=("$OPTARG") ;;
    n) NETNS=$OPTARG ;;
    B) BG=$OPTARG ;;
    H) HOSTCMD=$OPTARG ;;
    S) SHARE=$(cd "$OPTARG" && pwd) || exit 2 ;;
    t) TMO=$OPTARG ;;
    a) ACCEL=$OPTARG ;;
    m) MEM=$OPTARG ;;
    q) QUIET=1 ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
[ -z "$NETNS" ] || [ ${#FWDS[@]} -eq 0 ] || usage
say() { echo "[run-guest] $*" >&2; }

"$HERE/build-guest.sh" --check || "$HERE/build-guest.sh" || { say "the guest build failed"; exit 1; }
command -v qemu-system-x86_64 >/dev/null || { say "qemu-system-x86_64 is missing"; exit 1; }

if [ "$ACCEL" = auto ]; then
  ACCEL=tcg
  # A PVM /dev/kvm (no VMX/SVM) cannot run a stock kernel; TCG can.
  if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] && grep -qw -e vmx -e svm /proc/cpuinfo; then
    ACCEL=kvm
  fi
fi
case $ACCEL in
  kvm) ACC=(-accel kvm -cpu host) ;;
  tcg) ACC=(-accel tcg -cpu max) ;;
  *) say "bad -a $ACCEL"; exit 2 ;;
esac

RUN=$(mktemp -d /tmp/rddp-interop.XXXXXX)
QPID= BPID= HPID= TPID= NSMADE=0
cleanup() {
  local p
  for p in $HPID $BPID; do
    kill -0 "$p" 2>/dev/null && kill -TERM -- "-$p" 2>/dev/null
  done
  if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
    kill -TERM "$QPID" 2>/dev/null
    sleep 0.5
    kill -0 "$QPID" 2>/dev/null && kill -KILL "$QPID" 2>/dev/null
  fi
  [ -n "$TPID" ] && kill "$TPID" 2>/dev/null
  # Deleting the namespace deletes its tap device.
  [ $NSMADE = 1 ] && "$HERE/netns.sh" down "$NETNS" 2>/dev/null
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The per-run overlay: a second cpio appended to the cached one.
mkdir -p "$RUN/ov/rddp"
printf '%s\n' "$1" >"$RUN/ov/rddp/cmd.sh"
printf 'RDDP_CMD_TIMEOUT=%s\nRDDP_SIW=%s\nRDDP_SHARE=%s\n' "$TMO" "$VARIANT" "$([ -n "$SHARE" ] && echo 1 || echo 0)" >"$RUN/ov/rddp/env"
(cd "$RUN/ov" && find . | "$CACHE/initramfs.d/bin/busybox" cpio -o -H newc 2>/dev/null) >"$RUN/ov.cpio"
cat "$CACHE/initramfs.cpio" "$RUN/ov.cpio" >"$RUN/initrd"

NET=user,id=n0,ipv6=off
for f in "${FWDS[@]}"; do NET="$NET,hostfwd=tcp:127.0.0.1:${f%%:*}-:${f##*:}"; done
# The commands that run in the routed network's namespace (QEMU, -B, -H).
INNS=()
if [ -n "$NETNS" ]; then
  if [ ! -e "/run/netns/$NETNS" ]; then
    "$HERE/netns.sh" up "$NETNS" || { say "cannot make network namespace $NETNS"; exit 1; }
    NSMADE=1
  fi
  NET=tap,id=n0,ifname=tap0,script=no,downscript=no
  INNS=(ip netns exec "$NETNS")
fi
# oops=panic: a kernel oops (siw 6.1 has a few, docs/interop.md) powers the
# guest off at once (panic=-1, -no-reboot) instead of leaving the steps after
# it to wait out their limits; the console keeps the oops for the record.
QARGS=(-name rddp-interop -machine pc "${ACC[@]}" -smp 1 -m "$MEM" -nographic -no-reboot
  -kernel "$CACHE/vmlinux" -initrd "$RUN/initrd"
  -append "console=ttyS0 loglevel=4 panic=-1 oops=panic rdinit=/init tsc=reliable edd=off"
  -netdev "$NET" -device virtio-net-pci,netdev=n0,romfile=
  -monitor none -serial "file:$RUN/console")
[ -n "$SHARE" ] && QARGS+=(-virtfs "local,path=$SHARE,mount_tag=share,security_model=none,id=fs0")

if [ -n "$BG" ]; then
  # setsid from a background child does not fork: $! is the new group's id
  setsid "${INNS[@]}" bash -c "($BG) 2>&1 | sed -u 's/^/[host-bg] /'" </dev/null &
  BPID=$!
fi

T0=$(date +%s%N)
: >"$RUN/console"
# (`ip netns exec` execs QEMU: $! is QEMU's pid.)
"${INNS[@]}" qemu-system-x86_64 "${QARGS[@]}" </dev/null >"$RUN/qemu.log" 2>&1 &
QPID=$!
strip() { sed -u -e 's/\r//g' -e 's/\x1b\[[?0-9;]*[a-zA-Z]//g' -e 's/\x1bc//g'; }
if [ $QUIET = 1 ]; then
  # (no `$` address: sed would hold every line back until the next one arrives)
  tail -n +1 -F --pid="$QPID" "$RUN/console" 2>/dev/null | strip |
    sed -u -n '/### RDDP-BOOTED/,/^### RDDP-NO-SUCH-LINE$/p' &
else
  tail -n +1 -F --pid="$QPID" "$RUN/console" 2>/dev/null | strip &
fi
TPID=$!

LIMIT=$((TMO + 60)) TIMED_OUT=0 HOSTRAN=0
while kill -0 "$QPID" 2>/dev/null; do
  if [ -n "$HOSTCMD" ] && [ $HOSTRAN = 0 ] && grep -q '^### RDDP-READY' "$RUN/console"; then
    HOSTRAN=1
    setsid "${INNS[@]}" bash -c "($HOSTCMD) 2>&1 | sed -u 's/^/[host] /'; echo \${PIPESTATUS[0]} >'$RUN/host.rc'" </dev/null &
    HPID=$!
  fi
  if [ $(( ($(date +%s%N) - T0) / 1000000000 )) -ge $LIMIT ]; then
    TIMED_OUT=1
    say "no end after ${LIMIT}s: stopping qemu (pid $QPID)"
    kill -TERM "$QPID"
    break
  fi
  sleep 0.1
done
wait "$QPID" 2>/dev/null
wait "$TPID" 2>/dev/null
TPID=
if [ -n "$HPID" ]; then
  for _ in $(seq 600); do kill -0 "$HPID" 2>/dev/null || break; sleep 0.1; done
  wait "$HPID" 2>/dev/null
fi
[ -s "$RUN/qemu.log" ] && sed 's/^/[qemu] /' "$RUN/qemu.log" >&2
GRC=$(tr -d '\r' <"$RUN/console" | sed -n 's/^### RDDP-END rc=\([0-9]*\).*/\1/p' | tail -1)
if [ -z "$GRC" ]; then
  say "the guest never reported its end; the console's last lines:"
  tail -n 25 "$RUN/console" | strip | sed 's/^/[console] /' >&2
fi
HRC=$(cat "$RUN/host.rc" 2>/dev/null || true)
say "accel $ACCEL, siw $VARIANT, $(( ($(date +%s%N) - T0) / 1000000 )) ms, guest rc ${GRC:-none}${HOSTCMD:+, host rc ${HRC:-none}}"
[ $TIMED_OUT = 1 ] && exit 124
[ -n "$GRC" ] || exit 125
[ "$GRC" = 0 ] || exit "$GRC"
[ -z "$HOSTCMD" ] || [ -z "$HRC" ] || [ "$HRC" = 0 ] || exit "$HRC"
exit 0

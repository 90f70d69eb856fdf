#!/bin/sh
# PID 1 of the interop guest (busybox ash). Loads the RDMA modules and a siw
# build, brings up eth0 as 10.0.2.15/24 (no default route: only 10.0.2.2, which
# QEMU's user network maps to the host's 127.0.0.1, is reachable), creates siw0 on
# eth0, runs /rddp/cmd.sh from the per-run overlay, and powers off.
#
# Lines starting with "### RDDP-" are for the host (run-guest.sh and the tests):
#   ### RDDP-BOOTED ...                 modules loaded, siw0 up
#   ### RDDP-STEP-BEGIN NAME            a step's output follows
#   ### RDDP-READY NAME                 a step's guest server listens: start the host side
#   ### RDDP-STEP-END NAME rc=N         the step is over
#   ### RDDP-END rc=N                   the command is over, the guest powers off
# cmd.sh is sourced, so it can use the helpers below (siw, step, serve).
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
exec </dev/console >/dev/console 2>&1

mark() { echo "### RDDP-$*"; }
fatal() { mark "FAIL $*"; mark "END rc=125"; poweroff -f; sleep 10; }

RDDP_CMD_TIMEOUT=120 RDDP_SIW=default RDDP_SHARE=0
[ -f /rddp/env ] && . /rddp/env
KVER=$(uname -r)

for m in virtio_pci virtio_net crc32c_generic libcrc32c ib_core ib_uverbs iw_cm ib_cm rdma_cm rdma_ucm; do
  modprobe "$m" || fatal "modprobe $m"
done
ip link set lo up
ip link set eth0 up || fatal "no eth0"
ip addr add 10.0.2.15/24 dev eth0
# siw 6.1 counts the memory it pins for a registration against RLIMIT_MEMLOCK
# (8 MiB here), root or not (siw_umem_get): perftest's -a registers more.
ulimit -l unlimited
if [ "$RDDP_SHARE" = 1 ]; then
  modprobe 9pnet_virtio && modprobe 9p &&
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 share /mnt/host || fatal "9p mount"
fi

# siw VARIANT: (re)load that siw build and create siw0 on eth0.
siw() {
  if [ -d /sys/module/siw ]; then
    rdma link delete siw0 2>/dev/null
    rmmod siw || { echo "cannot unload siw"; return 1; }
  fi
  insmod "/siw/$1.ko" || { echo "no siw build $1"; return 1; }
  rdma link add siw0 type siw netdev eth0 || return 1
  RDDP_SIW=$1
  mark "SIW $1"
}

# The kernel's lines since the last call (siw reports received Terminates there),
# prefixed "[dmesg] ".
kmsg() {
  dmesg -c 2>/dev/null | grep -v -e 'speed is unknown' -e 'SoftiWARP attached' -e 'SoftiWARP detached' |
    sed 's/^/[dmesg] /'
}

# step NAME SECONDS COMMAND...: run COMMAND (a guest client) for at most SECONDS.
step() {
  local name=$1 t=$2
  shift 2
  mark "STEP-BEGIN $name siw=$RDDP_SIW"
  timeout -s KILL "$t" sh -c "$*"
  local rc=$?
  kmsg
  mark "STEP-END $name rc=$rc"
}

# serve NAME PORT SECONDS COMMAND...: start COMMAND (a guest server), say READY once
# it listens on tcp PORT (or has ended without), and wait at most SECONDS for it to
# finish. The wait for the listener has no bound of its own: the step's SECONDS
# end the server, and with it the wait. (A fixed 15 s here said READY before a
# perftest server started under TCG on a loaded host listened: its host client was
# refused and the step failed.)
serve() {
  local name=$1 port=$2 t=$3
  shift 3
  mark "STEP-BEGIN $name siw=$RDDP_SIW"
  timeout -s KILL "$t" sh -c "$*" &
  local pid=$! hex
  hex=$(printf '%04X' "$port")
  # state 0A is LISTEN in /proc/net/tcp
  until grep -q ":$hex [0-9A-F:]* 0A" /proc/net/tcp 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || break
    usleep 50000
  done
  mark "READY $name"
  wait "$pid"
  local rc=$?
  kmsg
  mark "STEP-END $name rc=$rc"
}

siw "$RDDP_SIW" >/dev/null || fatal "siw $RDDP_SIW"
dmesg -c >/dev/null
mark "BOOTED kernel $KVER siw $RDDP_SIW uptime $(cut -d' ' -f1 /proc/uptime)s"

cd /tmp
( . /rddp/cmd.sh ) &
cmd=$!
( sleep "$RDDP_CMD_TIMEOUT"; mark "TIMEOUT after ${RDDP_CMD_TIMEOUT}s"; kill -9 "$cmd" ) &
dog=$!
wait "$cmd"
rc=$?
kill "$dog" 2>/dev/null
kmsg
[ "$RDDP_SHARE" = 1 ] && { sync; umount /mnt/host; }
mark "END rc=$rc"
sync
poweroff -f
sleep 10

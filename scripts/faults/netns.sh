# shellcheck shell=bash
# Two hosts on one machine, for scripts/faults.sh and scripts/ipsec.sh (source it).
#
#   direct : A (vA 10.91.0.1) <==veth==> B (vB 10.91.0.2)
#   bridged: A (vA 10.91.0.1) <==> M (mA | netem_bridge.py | mB) <==> B (vB 10.91.0.2)
#
# The namespaces are this run's own: their names carry the shell's PID
# (rddpf<PID>-a, -b, -m), and ft_down removes exactly those (and the processes
# this script started in them, by PID). No namespace has a default route, so
# nothing leaves them. Call `trap ft_down EXIT` right after sourcing.

FT_TAG=${FT_TAG:-rddpf$$}
NS_A=$FT_TAG-a
NS_B=$FT_TAG-b
NS_M=$FT_TAG-m
IP_A=${IP_A:-10.91.0.1}
IP_B=${IP_B:-10.91.0.2}
FT_NS=()   # namespaces this run created
FT_PIDS=() # background processes this run started

nsA() { ip netns exec "$NS_A" "$@"; }
nsB() { ip netns exec "$NS_B" "$@"; }
nsM() { ip netns exec "$NS_M" "$@"; }

# Start "$@" in namespace $1 in the background; its PID is in $FT_LAST.
# (Not `nsB cmd &`: a backgrounded function is a subshell, so $! would not be
# the program's PID.)
ft_bg() {
  local ns=$1
  shift
  ip netns exec "$ns" "$@" &
  FT_LAST=$!
  FT_PIDS+=("$FT_LAST")
}

# Stop one background process started with ft_bg (TERM, then KILL after $2 s).
ft_stop() {
  local pid=$1 grace=${2:-5} i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < grace * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

ft_down() {
  local p n
  for p in "${FT_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${FT_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  FT_PIDS=()
  for n in "${FT_NS[@]}"; do
    # Anything still running inside our namespaces was started by this run.
    for p in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    # Deleting a namespace destroys its veth ends (and their peers).
    ip netns del "$n" 2>/dev/null || true
  done
  FT_NS=()
}

_ft_ns() {
  local n
  for n in "$@"; do
    if ip netns list | awk '{print $1}' | grep -qxF "$n"; then
      echo "namespace $n exists already (another run with this PID?)" >&2
      return 1
    fi
    ip netns add "$n"
    FT_NS+=("$n")
    # IPv4 only: no IPv6 link-local chatter (router solicitations) on the links.
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$n" link set lo up
  done
}

# Per-frame impairment needs MTU-sized frames with full checksums.
_ft_offload_off() { # ns dev
  ip netns exec "$1" ethtool -K "$2" tso off gso off gro off tx off rx off >/dev/null 2>&1 ||
    echo "warning: ethtool -K $2 failed in $1" >&2
}

ft_up_direct() {
  _ft_ns "$NS_A" "$NS_B"
  ip link add vA netns "$NS_A" type veth peer name vB netns "$NS_B"
  ip -n "$NS_A" addr add "$IP_A/24" dev vA
  ip -n "$NS_B" addr add "$IP_B/24" dev vB
  ip -n "$NS_A" link set vA up
  ip -n "$NS_B" link set vB up
  nsA ping -c1 -W2 "$IP_B" >/dev/null
}

ft_up_bridged() {
  _ft_ns "$NS_A" "$NS_B" "$NS_M"
  ip link add vA netns "$NS_A" type veth peer name mA netns "$NS_M"
  ip link add vB netns "$NS_B" type veth peer name mB netns "$NS_M"
  ip -n "$NS_A" addr add "$IP_A/24" dev vA
  ip -n "$NS_B" addr add "$IP_B/24" dev vB
  local d
  for d in "$NS_A vA" "$NS_B vB" "$NS_M mA" "$NS_M mB"; do
    # shellcheck disable=SC2086
    set -- $d
    ip -n "$1" link set "$2" up
    _ft_offload_off "$1" "$2"
  done
  nsM sysctl -qw net.ipv4.ip_forward=0
}

# --- shared by the scripts' set-up and runs

# Install with apt the Debian packages named after $1 (the calling script's
# name, for the message); nothing when none is named.
ft_install() { # who pkgs...
  local who=$1
  shift
  [ $# -gt 0 ] || return 0
  echo "$who: installing $*" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# $RDDP: the rddp binary given, or one built here (release).
ft_rddp() { # who
  if [ -z "${RDDP:-}" ]; then
    (cd "$ROOT" && cargo build --release -p rddp-cli --locked -q)
    RDDP=$ROOT/target/release/rddp
  fi
  [ -x "$RDDP" ] || { echo "$1: no rddp binary at $RDDP" >&2; exit 2; }
}

# Start `rddp perf server <args> --json` in namespace $1, output in dir $2
# (server.out, server.err). Its PID is in $FT_SERVER, the port it listens on in
# $FT_PORT (empty if it did not say within 10 s).
ft_perf_server() { # ns dir args...
  local ns=$1 d=$2 i
  shift 2
  ft_bg "$ns" timeout 300 "$RDDP" perf server "$@" --json >"$d/server.out" 2>"$d/server.err"
  FT_SERVER=$FT_LAST
  FT_PORT=""
  for ((i = 0; i < 200; i++)); do
    FT_PORT=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$d/server.err" | head -1)
    [ -n "$FT_PORT" ] && break
    sleep 0.05
  done
}

# The server exits once its connection has ended (well or not): wait 15 s for
# it, then stop it. Its exit status is in $FT_SERVER_RC.
ft_perf_server_end() { # pid
  local sv=$1 i
  FT_SERVER_RC=0
  for ((i = 0; i < 150; i++)); do kill -0 "$sv" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$sv" 2>/dev/null && ft_stop "$sv" 2
  wait "$sv" 2>/dev/null || FT_SERVER_RC=$?
}

#!/usr/bin/env bash
# Stress test of the usrsctp close race (sctplab/usrsctp#676, #709; see
# docs/usrsctp-close-race.md) and of the upcall reload (a NULL upcall written
# between usrsctp's test of it and its call). Builds Debian's libusrsctp
# source with a delay inserted in each window
# (scripts/usrsctp-race/widen-window.patch),
# loads it through LD_LIBRARY_PATH (usrsctp-ffi dlopens libusrsctp.so.2) and
# runs SCTP tests in a loop:
#   1. with the reaper off (RDDP_USRSCTP_CLOSE_AT_ONCE=1: every socket closed
#      at once, as before the reaper), rddp-sctp's `path` must crash within
#      BEFORE runs (it stops at the first crash): the harness can see the race;
#   2. with the reaper on and both windows widened, rddp-sctp's `path` and
#      `refusal` and rddp's verbs queue pair over SCTP
#      (`exchange::over_sctp`) must pass RUNS runs each (`refusal` crashed
#      here when a dropped socket's upcall was set to NULL).
# Each is a module of its crate's one test binary (`api`), selected by filter.
# Usage: scripts/usrsctp-race.sh [RUNS]   (RUNS defaults to 200)
# Environment: BEFORE (default 1000: the first crash came at runs 2 to 100 in
# most loops, and in two loops of 200 not at all: a run is about 0.1 s, and the
# loop stops at the crash), RDDP_RACE_DELAY_US (default 1000),
# RDDP_UPCALL_DELAY_US (the second window, step 2 only; default 1000), HOGS
# (busy loops beside the runs, default 0: the window needs preemption, which a
# loaded machine gives; 2 on a 2-core machine found what a quiet one did not).
# Needs root to install what it builds with (dpkg-dev, cmake, gcc) the first
# time; the build is kept under target/usrsctp-race.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-200}
before=${BEFORE:-1000}
export RDDP_RACE_DELAY_US=${RDDP_RACE_DELAY_US:-1000}
work=$PWD/target/usrsctp-race
mkdir -p "$work"

need=()
for t in dpkg-source:dpkg-dev cmake:cmake cc:gcc patch:patch; do
  command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "missing: ${need[*]} (run as root or install them)" >&2; exit 1; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

lib=$work/build/usrsctplib/libusrsctp.so.2
if [ ! -e "$lib" ] || [ scripts/usrsctp-race/widen-window.patch -nt "$lib" ]; then
  rm -rf "$work/src" "$work/build" "$work/pkg"
  mkdir -p "$work/pkg"
  # Debian's source of the library the suite runs against.
  if ! (cd "$work/pkg" && apt-get source -qq --download-only libusrsctp >/dev/null 2>&1); then
    [ "$(id -u)" = 0 ] || { echo "apt-get source libusrsctp failed (no deb-src?)" >&2; exit 1; }
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    # Source lists for the distribution's main archive, as the binary ones.
    uri=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
    [ -n "$uri" ] || uri=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list)
    printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
      "$uri" "$suite" /usr/share/keyrings/debian-archive-keyring.gpg \
      > /etc/apt/sources.list.d/rddp-deb-src.sources
    apt-get update -qq
    (cd "$work/pkg" && apt-get source -qq --download-only libusrsctp >/dev/null 2>&1)
  fi
  # (apt checked the files against the signed archive: the .dsc's own
  # signature, whose key is not installed, is not needed.)
  dpkg-source -x "$work"/pkg/libusrsctp_*.dsc "$work/src" >/dev/null 2>&1
  (cd "$work/src" && patch -s -p1 < "$OLDPWD/scripts/usrsctp-race/widen-window.patch")
  cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -Dsctp_build_shared_lib=1 -Dsctp_build_programs=0 -Dsctp_werror=0 >/dev/null
  cmake --build "$work/build" --target usrsctp -j "$(nproc)" >/dev/null
fi
for f in rddp_race_delay rddp_upcall_delay; do
  nm -D "$lib" | grep -w "$f" >/dev/null || { echo "$lib lacks $f (the widened windows)" >&2; exit 1; }
done

# The test binaries, built as the suite builds them: one line "CRATE PATH"
# each (both are called `api`, so they are told apart by their crate).
bins=$(cargo test --locked --all-features --no-run --message-format=json \
    -p rddp-sctp -p rddp --test api 2>/dev/null |
  sed -n 's/.*"src_path":"[^"]*\/crates\/\([^/"]*\)\/tests\/[^"]*".*"executable":"\([^"]*\)".*/\1 \2/p')
bin() { echo "$bins" | awk -v c="$1" '$1 == c { print $2 }'; }

# Run the test binary of crate $1 (CRATE or CRATE:FILTER) up to $2 times with
# the widened library and extra environment $3, stopping at the first failure
# when $4 is "first"; prints "FAILED RUNS" and keeps the last failure's tail.
loop() {
  local exe fails=0 i filter=()
  exe=$(bin "${1%%:*}")
  [ "${1#*:}" = "$1" ] || filter=("${1#*:}")
  for ((i = 1; i <= $2; i++)); do
    if ! env $3 LD_LIBRARY_PATH="$(dirname "$lib")" timeout 120 "$exe" -q "${filter[@]}" >"$work/out" 2>&1; then
      fails=$((fails + 1))
      # The whole tail: a test run in its own process prints its panic
      # above the summary lines.
      tail -n 60 "$work/out" > "$work/last-failure"
      [ "${4:-}" = first ] && break
    fi
  done
  echo "$fails $((i > $2 ? $2 : i))"
}

hog_pids=()
stop_hogs() { for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_hogs EXIT
for ((h = 0; h < ${HOGS:-0}; h++)); do
  (while :; do :; done) &
  hog_pids+=($!)
done

status=0
read -r n ran < <(loop rddp-sctp:path:: "$before" RDDP_USRSCTP_CLOSE_AT_ONCE=1 first)
if [ "$n" -eq 0 ]; then
  echo "FAIL: reaper off, path never crashed in $ran runs: the harness cannot see the race" >&2
  status=1
else
  echo "reaper off: path crashed at run $ran (delay ${RDDP_RACE_DELAY_US} us): $(grep -m 1 -E 'free|corrupt|signal' "$work/last-failure" || tail -n 1 "$work/last-failure")"
fi
for t in rddp-sctp:path:: rddp-sctp:refusal:: rddp:exchange::over_sctp; do
  read -r n ran < <(loop "$t" "$runs" "RDDP_UPCALL_DELAY_US=${RDDP_UPCALL_DELAY_US:-1000}")
  echo "reaper on:  $t failed $n of $ran runs"
  if [ "$n" -ne 0 ]; then
    echo "FAIL: $t under the widened race; last failure:" >&2
    cat "$work/last-failure" >&2
    status=1
  fi
done
exit $status

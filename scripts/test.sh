#!/usr/bin/env bash
# Run the whole test suite. Works on a fresh machine with the Rust toolchain:
# installs the system packages the tests need (when run as root), then runs every
# test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the suite needs: libusrsctp-dev (userspace SCTP, loaded at run
# time by usrsctp-ffi) and tshark (the MPA and SCTP wire checks; with CI set, a
# missing one fails those tests).
need_pkgs=(libusrsctp-dev tshark)
missing=()
for p in "${need_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    # wireshark-common asks whether non-root users may capture: answer no, quietly.
    echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "missing packages: ${missing[*]} (run as root or install them)" >&2
    exit 1
  fi
fi

cargo test --workspace --all-features --locked "$@"

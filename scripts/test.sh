#!/usr/bin/env bash
# Run the whole test suite. Works on a fresh machine with the Rust toolchain:
# installs the system packages the tests need (when run as root), then runs every
# test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the suite needs: tshark for the MPA wire check (rddp-mpa
# tests/wire_check.rs; with CI set, a missing tshark fails that test).
need_pkgs=(tshark)
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

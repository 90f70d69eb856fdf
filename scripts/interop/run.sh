#!/usr/bin/env bash
# The siw interop suite in one command, on a fresh machine with the Rust
# toolchain: builds the guest (Debian 12 kernel, siw built from linux-source-6.1,
# rdma-core and perftest, all from Debian packages; installs QEMU when run as
# root; cached in ${RDDP_INTEROP_CACHE:-/var/cache/rddp-interop}), then runs
# crates/rddp-cli/tests/cli/interop_siw.rs, whose checks share one TCG boot.
#
#   scripts/interop/run.sh                 the whole suite (CI runs it too)
#   scripts/interop/run.sh rping_          tests whose names contain "rping_"
#   RDDP_INTEROP_ONLY=mpa-p2p scripts/interop/run.sh   only those guest steps
#   RDDP_INTEROP_LOG=/tmp/i.log ...        keep the guest script and console
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/interop/build-guest.sh
start=$(date +%s)
cargo test -p rddp-cli --locked --test cli -- interop_siw:: --nocapture "$@"
echo "interop suite: $(( $(date +%s) - start )) s" >&2

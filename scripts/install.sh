#!/usr/bin/env bash
# Install rddp for users: PREFIX/bin/rddp and PREFIX/lib/rddp-verbs/ (the
# verbs library under the names `rddp exec` puts first on the library path:
# libibverbs.so.1, librdmacm.so.1, and the stand-ins libmlx5.so.1 and
# libefa.so.1; docs/verbs-abi.md). `cargo install` installs binaries only,
# so the library needs this step.
# Usage: scripts/install.sh [PREFIX]   (PREFIX defaults to ~/.local)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-$HOME/.local}
cargo build --release --locked -p rddp-cli -p rddp-verbs-abi
target=${CARGO_TARGET_DIR:-target}/release
install -d "$prefix/bin" "$prefix/lib/rddp-verbs"
install -m 755 "$target/rddp" "$prefix/bin/rddp"
install -m 755 "$target/librddp_verbs_abi.so" "$prefix/lib/rddp-verbs/librddp_verbs_abi.so"
for name in libibverbs.so.1 librdmacm.so.1 libmlx5.so.1 libefa.so.1; do
  ln -sfn librddp_verbs_abi.so "$prefix/lib/rddp-verbs/$name"
done
echo "installed $prefix/bin/rddp and $prefix/lib/rddp-verbs/"

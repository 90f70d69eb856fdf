#!/usr/bin/env bash
# Build (once) the interop guest: a Debian 12 kernel with the kernel's soft-iWARP
# driver (siw) and the rdma-core tools (rping, perftest), all from Debian packages.
# The result lives outside the repository, in $RDDP_INTEROP_CACHE (default
# /var/cache/rddp-interop), and is reused by every later run.
#
#   scripts/interop/build-guest.sh          build whatever is missing (idle when cached)
#   scripts/interop/build-guest.sh --force  re-resolve the packages and rebuild
#   scripts/interop/build-guest.sh --check  exit 0 when the cache is complete, else 1
#
# Why it builds siw itself: Debian's 6.1 kernel config has CONFIG_RDMA_SIW unset,
# so no Debian package ships siw.ko. It is compiled out of tree from the
# drivers/infiniband/sw/siw sources in linux-source-6.1 (the kernel's own version),
# against linux-headers of that kernel, with gcc-12 (the compiler Debian used).
# siw 6.1's MPA knobs are compile-time constants in siw_main.c, so each variant
# (CRC required, CRC strict, peer-to-peer, Rev 1) is its own build; all of them go
# into the initramfs and the guest loads the one a check asks for.
#
# Host packages it needs (installed with apt-get when run as root):
# qemu-system-x86, gcc-12, make, binutils, xz-utils.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${RDDP_INTEROP_CACHE:-/var/cache/rddp-interop}
# siw builds put in the guest: name -> the siw_main.c constants it changes.
VARIANTS="default crc strict crc+strict p2p crc+p2p rev1"
# Debian packages unpacked into the guest's user space.
GUEST_PKGS="busybox-static rdma-core ibverbs-providers libibverbs1 librdmacm1 rdmacm-utils
 perftest ibverbs-utils iproute2 libnl-3-200 libnl-route-3-200 libmnl0 libbpf1 libelf1 libcap2
 libbsd0 libmd0 libselinux1 libpcre2-8-0 libdb5.3 libc6 libgcc-s1 zlib1g tcpdump libpcap0.8
 libdbus-1-3 libsystemd0 libgcrypt20 libgpg-error0 liblz4-1 liblzma5 libzstd1 libssl3
 libcap-ng0 libudev1 libibumad3 libpci3 libfabric1 libfabric-bin libpsm2-2 libpsm-infinipath1
 libnuma1 libuuid1 libatomic1"

log() { echo "[interop-build] $*" >&2; }
die() { log "error: $*"; exit 1; }

host_tools() {
  local miss=()
  command -v qemu-system-x86_64 >/dev/null || miss+=(qemu-system-x86)
  command -v gcc-12 >/dev/null || miss+=(gcc-12)
  command -v make >/dev/null || miss+=(make)
  command -v readelf >/dev/null || miss+=(binutils)
  command -v xz >/dev/null || miss+=(xz-utils)
  [ ${#miss[@]} -eq 0 ] && return
  [ "$(id -u)" = 0 ] || die "missing host packages: ${miss[*]} (run as root to install them, or apt-get install them)"
  log "apt-get install ${miss[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${miss[@]}" >/dev/null
}

# The kernel that linux-image-amd64 points at, pinned in $CACHE/kernel.env the
# first time so that later runs use exactly the same build.
resolve_kernel() {
  if [ -f "$CACHE/kernel.env" ]; then . "$CACHE/kernel.env"; return; fi
  local pkg
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)/\1/p' | head -1)
  if [ -z "$pkg" ]; then
    apt-get update -qq || true
    pkg=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)/\1/p' | head -1)
  fi
  [ -n "$pkg" ] || die "apt cannot resolve linux-image-amd64 (is this Debian 12 with its apt sources?)"
  KVER=${pkg#linux-image-}
  KDEB=$(apt-cache show "$pkg" | sed -n 's/^Version: //p' | head -1)
  local series
  series=$(echo "$KVER" | cut -d. -f1,2)
  cat >"$CACHE/kernel.env" <<EOF
KVER=$KVER
KDEB=$KDEB
KIMAGE=$pkg
KHEADERS=linux-headers-$KVER
KCOMMON=linux-headers-${KVER%-amd64}-common
KKBUILD=linux-kbuild-$series
KSOURCE=linux-source-$series
EOF
  . "$CACHE/kernel.env"
}

deb() { compgen -G "$CACHE/debs/${1}_*.deb" | head -1 || true; }

download() {
  mkdir -p "$CACHE/debs"
  local want=() p
  for p in $GUEST_PKGS "$KIMAGE" "$KHEADERS" "$KCOMMON" "$KKBUILD"; do
    [ -n "$(deb "$p")" ] || want+=("$p")
  done
  # The source must be the running kernel's own version.
  [ -n "$(deb "$KSOURCE")" ] || want+=("$KSOURCE=$KDEB")
  [ ${#want[@]} -eq 0 ] && return
  log "apt-get download ${want[*]}"
  (cd "$CACHE/debs" && apt-get download -q "${want[@]}" 2>&1 | grep -v -e '^Get:' -e 'unsandboxed' >&2) || true
  for p in "${want[@]}"; do
    [ -n "$(deb "${p%%=*}")" ] || die "apt-get download $p failed"
  done
}

# The unpacked tree is kept while it was made from the same package list.
unpack() { # unpack STAMPDIR DEB...
  local dir=$1; shift
  [ "$(cat "$dir/.done" 2>/dev/null)" = "$*" ] && return
  log "unpacking $(basename "$dir") ($# packages)"
  rm -rf "$dir"; mkdir -p "$dir"
  local d
  for d in "$@"; do dpkg -x "$(deb "$d")" "$dir"; done
  echo "$*" >"$dir/.done"
}

kbuild_tree() {
  local kb="$CACHE/kbuild"
  [ -f "$kb/.done" ] && return
  unpack "$kb" "$KHEADERS" "$KCOMMON" "$KKBUILD"
  # The arch headers include the common ones by absolute path: point it here.
  sed -i "s#^include /usr/src/#include $kb/usr/src/#" "$kb/usr/src/linux-headers-$KVER/Makefile"
}

siw_source() {
  local src="$CACHE/siw-src"
  [ -f "$src/.done" ] && return
  log "extracting drivers/infiniband/sw/siw from $KSOURCE $KDEB"
  rm -rf "$src" "$CACHE/siw-src.tmp"; mkdir -p "$CACHE/siw-src.tmp"
  dpkg-deb --fsys-tarfile "$(deb "$KSOURCE")" | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' \
    | xz -dc | tar -x -C "$CACHE/siw-src.tmp" --wildcards '*/drivers/infiniband/sw/siw/*'
  mv "$CACHE"/siw-src.tmp/*/drivers/infiniband/sw/siw "$src"
  rm -rf "$CACHE/siw-src.tmp"
  touch "$src/.done"
}

# One siw.ko per variant; each knob is a one-line edit of siw_main.c, checked.
build_variant() {
  local name=$1 dir="$CACHE/siw/$1"
  [ -f "$dir/siw.ko" ] && return
  rm -rf "$dir"; mkdir -p "$dir"
  cp "$CACHE"/siw-src/*.[ch] "$CACHE"/siw-src/Makefile "$dir/"
  local knob pat
  for knob in ${name//+/ }; do
    case $knob in
      default) continue ;;
      crc) pat='s/^const bool mpa_crc_required;/const bool mpa_crc_required = true;/' ;;
      strict) pat='s/^const bool mpa_crc_strict;/const bool mpa_crc_strict = true;/' ;;
      p2p) pat='s/^const bool peer_to_peer;/const bool peer_to_peer = true;/' ;;
      rev1) pat='s/^u_char mpa_version = MPA_REVISION_2;/u_char mpa_version = MPA_REVISION_1;/' ;;
      *) die "unknown siw knob $knob" ;;
    esac
    cp "$dir/siw_main.c" "$dir/siw_main.c.orig"
    sed -i "$pat" "$dir/siw_main.c"
    ! cmp -s "$dir/siw_main.c" "$dir/siw_main.c.orig" || die "siw knob '$knob' not found in siw_main.c"
    rm "$dir/siw_main.c.orig"
  done
  log "building siw.ko ($name)"
  make -s -C "$CACHE/kbuild/usr/src/linux-headers-$KVER" M="$dir" CONFIG_RDMA_SIW=m CC=gcc-12 \
    -j"$(nproc)" modules >"$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; die "siw build ($name) failed"; }
  strip --strip-debug "$dir/siw.ko"
}

# The uncompressed ELF kernel, so QEMU boots it through its PVH entry: under TCG
# the bzImage's own xz decompressor costs about 5 s of every boot.
vmlinux() {
  [ -f "$CACHE/vmlinux" ] && return
  local z="$CACHE/kernel/boot/vmlinuz-$KVER" off
  log "extracting vmlinux from $z"
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$z" | head -1 | cut -d: -f1)
  [ -n "$off" ] || die "no xz stream in $z"
  tail -c +$((off + 1)) "$z" | xz -dc --single-stream >"$CACHE/vmlinux.tmp" 2>/dev/null || true
  [ "$(head -c 4 "$CACHE/vmlinux.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] || die "vmlinux is not ELF"
  mv "$CACHE/vmlinux.tmp" "$CACHE/vmlinux"
}

# What the initramfs is made from: its scripts, the kernel, the guest's
# packages and the siw builds.
stamp() {
  echo "$(cat "$HERE/guest-init.sh" "$HERE/mkinitramfs.sh" "$CACHE/kernel.env" \
    <(echo $GUEST_PKGS) | sha256sum | cut -c1-16) $VARIANTS"
}

initramfs() {
  local stamp
  stamp=$(stamp)
  [ -f "$CACHE/initramfs.cpio" ] && [ "$(cat "$CACHE/initramfs.stamp" 2>/dev/null)" = "$stamp" ] && return
  log "building the initramfs"
  "$HERE/mkinitramfs.sh" "$CACHE" "$KVER" "$VARIANTS"
  echo "$stamp" >"$CACHE/initramfs.stamp"
}

complete() {
  [ -f "$CACHE/kernel.env" ] && [ -f "$CACHE/vmlinux" ] && [ -f "$CACHE/initramfs.cpio" ] || return 1
  [ "$(cat "$CACHE/initramfs.stamp" 2>/dev/null)" = "$(stamp)" ]
}

main() {
  if [ "${1:-}" = --check ]; then complete; return; fi
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock"
  flock 9
  if [ "${1:-}" = --force ]; then
    rm -rf "$CACHE/kernel.env" "$CACHE/kernel" "$CACHE/kbuild" "$CACHE/siw-src" "$CACHE/siw" \
      "$CACHE/user" "$CACHE/vmlinux" "$CACHE/initramfs.cpio" "$CACHE/initramfs.stamp"
  elif complete; then
    return
  fi
  host_tools
  resolve_kernel
  download
  unpack "$CACHE/kernel" "$KIMAGE"
  kbuild_tree
  siw_source
  local v
  for v in $VARIANTS; do build_variant "$v"; done
  unpack "$CACHE/user" $GUEST_PKGS
  vmlinux
  initramfs
  log "ready: $CACHE (kernel $KVER $KDEB; siw builds: $VARIANTS)"
}
main "$@"

#!/usr/bin/env bash
# mkinitramfs.sh CACHE KVER "VARIANTS": the interop guest's initramfs (uncompressed
# newc cpio; TCG would spend longer decompressing it than reading it), built only
# from what build-guest.sh unpacked under CACHE:
#   CACHE/user    the guest's Debian user space (rdma-core, perftest, busybox, ...)
#   CACHE/kernel  the unpacked linux-image package (modules)
#   CACHE/siw/V   one siw.ko per variant V
# Libraries are found from each binary's DT_NEEDED entries inside CACHE/user only,
# so a missing package fails here, not in the guest; modules from their .modinfo
# "depends=" lists.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=$1 KVER=$2 VARIANTS=$3
U="$CACHE/user"
KM="$CACHE/kernel/lib/modules/$KVER"
ST="$CACHE/initramfs.d"
ARCH=x86_64-linux-gnu

BINARIES="usr/bin/rdma usr/bin/ibv_devices usr/bin/ibv_devinfo usr/bin/rping usr/bin/ucmatose
 usr/bin/ib_write_bw usr/bin/ib_read_bw usr/bin/ib_send_bw usr/bin/ib_write_lat usr/bin/ib_read_lat
 usr/bin/ib_send_lat usr/bin/rdma_server usr/bin/rdma_client usr/bin/tcpdump usr/bin/fi_info
 usr/bin/fi_pingpong"
# Links dpkg's alternatives would make (unpacking runs no maintainer script):
# NAME=TARGET, both relative to the unpacked tree.
ALTERNATIVES="usr/lib/$ARCH/libpsm_infinipath.so.1=usr/lib/libpsm1/libpsm_infinipath.so.1.16"
# dlopen()ed, so no DT_NEEDED names them: libgcc_s (glibc's thread unwinding, rping's
# threads use it) and the siw verbs provider.
DLOPENED="lib/$ARCH/libgcc_s.so.1 $(cd "$U" && echo usr/lib/$ARCH/libibverbs/libsiw-rdmav*.so)"
CONFIG="etc/libibverbs.d/siw.driver"
MODULES="virtio_pci virtio_net crc32c_generic libcrc32c ib_core ib_uverbs ib_cm iw_cm rdma_cm
 rdma_ucm 9p 9pnet_virtio"
LIBDIRS="lib/$ARCH usr/lib/$ARCH lib usr/lib"

rm -rf "$ST"
mkdir -p "$ST"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,run,root,mnt/host,siw,lib/modules}
chmod 1777 "$ST/tmp"

# Copy U/REL to ST/REL; a symlink is kept as a symlink and its target copied too.
copy_rel() {
  local rel=$1 src="$U/$1" dst="$ST/$1"
  mkdir -p "$(dirname "$dst")"
  if [ -L "$src" ]; then
    local t
    t=$(readlink "$src")
    [ -e "$dst" ] || [ -L "$dst" ] || ln -s "$t" "$dst"
    case $t in
      /*) copy_rel "${t#/}" ;;
      *) copy_rel "$(realpath -ms --relative-to=/ "/$(dirname "$rel")/$t")" ;;
    esac
  elif [ -e "$src" ]; then
    [ -e "$dst" ] || cp -p "$src" "$dst"
  else
    echo "mkinitramfs: $rel is missing from the unpacked packages" >&2
    exit 1
  fi
}

# The file U/REL names, its symlinks followed inside U (never the host's files).
resolve_u() {
  local rel=$1 t n=0
  while [ -L "$U/$rel" ] && [ $n -lt 20 ]; do
    t=$(readlink "$U/$rel")
    case $t in
      /*) rel=${t#/} ;;
      *) rel=$(realpath -ms --relative-to=/ "/$(dirname "$rel")/$t") ;;
    esac
    n=$((n + 1))
  done
  echo "$U/$rel"
}

find_lib() {
  local d
  for d in $LIBDIRS; do
    if [ -e "$U/$d/$1" ] || [ -L "$U/$d/$1" ]; then echo "$d/$1"; return; fi
  done
  return 1
}

cp "$U/bin/busybox" "$ST/bin/busybox"
ln -s busybox "$ST/bin/sh"
cp "$HERE/guest-init.sh" "$ST/init"
chmod 755 "$ST/init"

for a in $ALTERNATIVES; do
  [ -e "$U/${a%%=*}" ] || ln -sfn "/${a#*=}" "$U/${a%%=*}"
done
declare -A seen=()
todo=()
for rel in $BINARIES $DLOPENED; do copy_rel "$rel"; todo+=("$rel"); done
for rel in $CONFIG; do copy_rel "$rel"; done
copy_rel lib64/ld-linux-x86-64.so.2
while [ ${#todo[@]} -gt 0 ]; do
  rel=${todo[-1]}; unset 'todo[-1]'
  for name in $(readelf -d "$(resolve_u "$rel")" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=1
    lib=$(find_lib "$name") || { echo "mkinitramfs: $name (needed by $rel) is in no unpacked package" >&2; exit 1; }
    copy_rel "$lib"
    todo+=("$lib")
  done
done
printf '/lib/%s\n/usr/lib/%s\n' "$ARCH" "$ARCH" >"$ST/etc/ld.so.conf"
ldconfig -r "$ST"

printf 'root:x:0:0:root:/root:/bin/sh\ntcpdump:x:0:0::/:/bin/sh\n' >"$ST/etc/passwd"
printf 'root:x:0:\ntcpdump:x:0:\n' >"$ST/etc/group"
printf '127.0.0.1 localhost\n10.0.2.15 guest\n10.0.2.2 host\n' >"$ST/etc/hosts"
printf 'hosts: files\npasswd: files\ngroup: files\n' >"$ST/etc/nsswitch.conf"
: >"$ST/etc/resolv.conf"

# Kernel modules and their dependency closure (siw's own from its .modinfo).
depends() { readelf -p .modinfo "$1" | sed -n 's/.*depends=\(.*\)$/\1/p' | tr ',' ' '; }
declare -A kofile=()
while IFS= read -r f; do
  n=$(basename "$f" .ko); kofile[${n//-/_}]=$f
done < <(find "$KM/kernel" -name '*.ko')
declare -A got=()
want=($MODULES $(depends "$CACHE/siw/default/siw.ko"))
while [ ${#want[@]} -gt 0 ]; do
  m=${want[-1]//-/_}; unset 'want[-1]'
  [ -n "${got[$m]:-}" ] && continue
  [ -n "${kofile[$m]:-}" ] || { echo "mkinitramfs: kernel module $m not found" >&2; exit 1; }
  got[$m]=1
  want+=($(depends "${kofile[$m]}"))
  dst="$ST/lib/modules/$KVER/${kofile[$m]#"$KM"/}"
  mkdir -p "$(dirname "$dst")"
  cp "${kofile[$m]}" "$dst"
done
cp "$KM"/modules.builtin "$KM"/modules.builtin.modinfo "$KM"/modules.order "$ST/lib/modules/$KVER/"
"$ST/bin/busybox" depmod -b "$ST" "$KVER"
# The siw builds sit outside the module tree (same module name each): the guest
# insmods the one a check asks for.
for v in $VARIANTS; do cp "$CACHE/siw/$v/siw.ko" "$ST/siw/$v.ko"; done
echo "mkinitramfs: modules ${!got[*]} siw; siw builds $VARIANTS" >&2

(cd "$ST" && find . | LC_ALL=C sort | "$ST/bin/busybox" cpio -o -H newc 2>/dev/null) >"$CACHE/initramfs.cpio.tmp"
mv "$CACHE/initramfs.cpio.tmp" "$CACHE/initramfs.cpio"
echo "mkinitramfs: $(du -h "$CACHE/initramfs.cpio" | cut -f1) initramfs" >&2

#!/usr/bin/env bash
# Build the qemu lab VM's image: a Debian root made with debootstrap,
# provisioned by the same vm/provision.sh (--guest) as every other machine,
# with the suite's own stock kernel and its headers (linux-image-amd64,
# linux-headers-amd64), so the guest builds cclab's modules against the
# kernel it runs and needs nothing from the host's headers.
#
#   vm/build-image.sh OUT SUITE
#     OUT       directory to create (built next to it as OUT.tmp, renamed when done)
#     SUITE     Debian suite, e.g. trixie (kernel 6.12: bpf_rdonly_cast, so the
#               coupled eBPF mptcpw loads)
#
# Environment: MIRROR (Debian archive), SECURITY_MIRROR, DEBS (a .deb cache
# kept between builds).  Output: root.img (ext4, raw), vmlinuz, initrd.img,
# image.json (the kernel's ABI name and package version among what it says).
# Normally run by `make vm` (controller/vm), not by hand.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C.UTF-8

if [ $# -ne 2 ]; then
	echo "usage: vm/build-image.sh OUT SUITE" >&2
	exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "vm/build-image.sh: run as root (debootstrap and chroot need it)" >&2
	exit 1
fi

out=$1
suite=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mirror=${MIRROR:-http://deb.debian.org/debian}
security_mirror=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}
debs=${DEBS:-$(dirname "$out")/debs}

work=$out.tmp
root=$work/root

# Unmount everything under the work directory (deepest first), then remove it;
# never delete through a mount (the chroot binds /dev and the .deb cache).
cleanup() {
	local m
	while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done < <(awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r)
	if grep -q " $work/" /proc/self/mounts; then
		echo "vm-image: not removing $work: something is still mounted under it" >&2
	else
		rm -rf --one-file-system "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf 'vm-image: %s\n' "$*"; }

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 HOME=/root "$@"; }

bind() {
	mkdir -p "$2"
	mount --rbind "$1" "$2"
	mount --make-rslave "$2"
}

if [ -e "$work" ]; then
	cleanup
fi
mkdir -p "$root" "$debs/partial"
# The root tree is built in memory where there is room (dpkg's many small
# writes, and removing the tree afterwards, cost minutes on some disks).
avail_kb=$(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo)
if [ "${avail_kb:-0}" -ge $((8 * 1024 * 1024)) ]; then
	mount -t tmpfs -o size=6g,mode=755 cclab-vm-root "$root"
fi

step "debootstrap $suite (minbase) from $mirror"
debootstrap --variant=minbase --cache-dir="$debs" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
	tail -n 20 "$work/debootstrap.log" >&2
	echo "vm-image: debootstrap failed (log above); check that $mirror is reachable" >&2
	exit 1
}

# No documentation, no daemons started in the chroot, no recommends, fast dpkg.
cat >"$root/etc/dpkg/dpkg.cfg.d/cclab" <<'EOF'
force-unsafe-io
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
cat >"$root/etc/apt/apt.conf.d/90cclab" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
EOF
echo cclab-vm >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tcclab-vm\n' >"$root/etc/hosts"

mount -t proc proc "$root/proc"
bind /dev "$root/dev"
bind "$debs" "$root/var/cache/apt/archives"

step "provision (vm/provision.sh --guest)"
install -m 755 "$here/provision.sh" "$root/tmp/provision.sh"
in_root /tmp/provision.sh --guest
rm -f "$root/tmp/provision.sh"

# Debian's initrd is not used (see below): keep its generation short.
mkdir -p "$root/etc/initramfs-tools/conf.d"
echo MODULES=list >"$root/etc/initramfs-tools/conf.d/cclab.conf"

step "kernel: linux-image-amd64 + linux-headers-amd64 of $suite"
in_root apt-get install -y -qq linux-image-amd64 linux-headers-amd64 busybox-static >"$work/kernel.log" 2>&1 || {
	tail -n 5 "$work/kernel.log" >&2
	echo "vm-image: installing $suite's kernel failed (log above); check that $mirror is reachable" >&2
	exit 1
}
kver=$(ls "$root/lib/modules")
if [ "$(echo "$kver" | wc -w)" -ne 1 ] || [ ! -d "$root/usr/src/linux-headers-$kver" ]; then
	echo "vm-image: expected one kernel with its headers in the image, found: $kver" >&2
	exit 1
fi
kversion=$(in_root dpkg-query -W -f='${Version}' "linux-image-$kver")
step "kernel $kver $kversion"

install -m 755 "$here/guest/init.py" "$root/usr/local/sbin/cclab-init"

# Small and reproducible: no package lists, caches or logs in the image.
rm -f "$root/usr/sbin/policy-rc.d"
umount "$root/var/cache/apt/archives"
umount -l "$root/dev"
umount "$root/proc"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/log/*.log "$root"/var/log/apt/*

# The VM's own initrd: the modules for a virtio disk with ext4 and a few lines
# of busybox, no udev (Debian's initrd spends ~6 s of an emulated boot there).
step "initrd: virtio_blk + ext4 modules, busybox"
ird=$root/tmp/initrd
mkdir -p "$ird/bin" "$ird/dev" "$ird/proc" "$ird/root" "$ird/modules"
cp "$root/usr/bin/busybox" "$ird/bin/busybox"
for m in virtio_pci virtio_blk ext4; do
	in_root modprobe -S "$kver" --show-depends "$m"
done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' >"$work/modules.list"
while read -r ko; do
	cp "$root$ko" "$ird/modules/"
	basename "$ko" >>"$ird/modules/order"
done <"$work/modules.list"
install -m 755 "$here/guest/initrd-init" "$ird/init"
in_root sh -c 'cd /tmp/initrd && find . | cpio -o -H newc --quiet' >"$work/initrd.img"
rm -rf "$ird"

mkdir -p "$work/out"
cp "$root/boot/vmlinuz-$kver" "$work/out/vmlinuz"
mv "$work/initrd.img" "$work/out/initrd.img"

used_mb=$(du -sm "$root" | cut -f1)
size_mb=$((used_mb + used_mb / 4 + 512))
step "root.img: ext4, ${size_mb} MiB (${used_mb} MiB used)"
mkfs.ext4 -q -F -L cclabroot -d "$root" -E lazy_itable_init=1,lazy_journal_init=1 \
	"$work/out/root.img" "${size_mb}M"

printf '{"kernel": "%s", "kernel_version": "%s", "suite": "%s", "mirror": "%s", "built": "%s"}\n' \
	"$kver" "$kversion" "$suite" "$mirror" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$work/out/image.json"

rm -rf "$out"
mv "$work/out" "$out"
step "done: $out"

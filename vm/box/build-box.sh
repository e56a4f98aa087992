#!/usr/bin/env bash
# Build cclab's Vagrant box for libvirt: a Debian root made with debootstrap,
# provisioned as `make deps` provisions a host (vm/provision.sh --box --kmod:
# compilers, kernel headers, Mininet, iperf3, bpftool), with what Vagrant
# needs (a `vagrant` user with passwordless sudo and Vagrant's insecure public
# key, sshd, DHCP on the first NIC) and a wheelhouse of cclab's Python
# dependencies that pip in the box uses instead of PyPI, so that `make demo`
# runs inside with no route out.
#
#   vm/box/build-box.sh          build the box unless cached; print its path
#   vm/box/build-box.sh --path   print where the box for these inputs is (built or not)
#
# The box is cached under CCLAB_BOX_CACHE (/var/cache/cclab/box) in a
# directory named by the suite and a hash of its inputs (the files baked into
# it, pyproject.toml's Python dependencies, the suite, the mirror): an unchanged tree
# never rebuilds.  Environment: CCLAB_BOX_SUITE (trixie), CCLAB_VM_MIRROR.
#
# The box boots its kernel directly (the box's own Vagrantfile hands vmlinuz
# and initrd.img, shipped in the box, to libvirt): box.img is one ext4
# filesystem, no partition table, no boot loader.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C.UTF-8

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${CCLAB_BOX_CACHE:-/var/cache/cclab/box}
suite=${CCLAB_BOX_SUITE:-trixie}
mirror=${CCLAB_VM_MIRROR:-http://deb.debian.org/debian}
security_mirror=${CCLAB_VM_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# Vagrant's insecure public key, as the vagrant package ships it
vagrant_pub=${VAGRANT_PUB:-$(ls /usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub 2>/dev/null | tail -n 1)}
#: the box's disk as the guest sees it (GiB); qcow2 stores only what is used
disk_gib=8

inputs=(vm/box/build-box.sh vm/box/Vagrantfile vm/box/dpkg.cfg vm/box/dhcp.network vm/box/initramfs-hook
	vm/provision.sh)
# the Python packages of the wheelhouse: pyproject.toml's build requirements,
# dependencies and test extras (the whole file where Python cannot read TOML)
python_deps() {
	/usr/bin/python3 - "$1" <<-'PY'
		import sys, tomllib
		p = tomllib.load(open(sys.argv[1], "rb"))
		print("\n".join(p["build-system"]["requires"] + ["wheel"] + p["project"]["dependencies"]
		      + p["project"]["optional-dependencies"]["test"]))
	PY
}
box_id() {
	{
		for f in "${inputs[@]}"; do
			printf '%s\0' "$f"
			cat "$repo/$f"
			printf '\0'
		done
		python_deps "$repo/pyproject.toml" 2>/dev/null || cat "$repo/pyproject.toml"
		printf '%s\0%s\0%s\0' "$suite" "$mirror" "$security_mirror"
		cat "$vagrant_pub" 2>/dev/null || true
	} | sha256sum | cut -c1-12
}
out=$cache/$suite-$(box_id)
box=$out/cclab.box

case "${1:-}" in
--path)
	echo "$box"
	exit 0
	;;
"") ;;
*)
	echo "usage: vm/box/build-box.sh [--path]" >&2
	exit 2
	;;
esac

if [ -f "$box" ]; then
	echo "$box"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "box: run as root (debootstrap and chroot need it)" >&2
	exit 1
fi
if [ ! -s "$vagrant_pub" ]; then
	echo "box: Vagrant's insecure public key not found (install vagrant: make box does)" >&2
	exit 1
fi
for tool in debootstrap mkfs.ext4 qemu-img; do
	command -v "$tool" >/dev/null || {
		echo "box: $tool is not installed (make box installs it: vm/provision.sh --vagrant-host)" >&2
		exit 1
	}
done

mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
if [ -f "$box" ]; then # another build finished while we waited
	echo "$box"
	exit 0
fi

t0=$(date +%s)
debs=$cache/debs-$suite
pipcache=$cache/pip
work=$out.tmp
root=$work/root

# The chroot's mounts besides its root (a tmpfs where there is room): /proc,
# /dev, and the .deb and pip caches kept between builds.
binds=("/dev:/dev" "$debs:/var/cache/apt/archives" "$pipcache:/root/.cache/pip")
unmount_chroot() {
	local m
	for m in /root/.cache/pip /var/cache/apt/archives /dev /proc; do
		! mountpoint -q "$root$m" || umount -l "$root$m"
	done
}
# Remove the work directory, never through a mount (--one-file-system).
cleanup() {
	unmount_chroot
	! mountpoint -q "$root" || umount -l "$root"
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf 'box: %s\n' "$*" >&2; }
chrooted() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 HOME=/root "$@"; }
# the chroot's log of one step; its tail on failure
logged() {
	local name=$1
	shift
	"$@" >"$work/$name.log" 2>&1 || {
		tail -n 20 "$work/$name.log" >&2
		say "$name failed (log above)"
		exit 1
	}
}

[ ! -e "$work" ] || cleanup
mkdir -p "$root" "$debs/partial" "$pipcache"
avail_kb=$(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo)
if [ "${avail_kb:-0}" -ge $((10 * 1024 * 1024)) ]; then
	mount -t tmpfs -o size=7g,mode=755 cclab-box-root "$root"
fi

say "debootstrap $suite (minbase) from $mirror"
logged debootstrap debootstrap --variant=minbase --cache-dir="$debs" "$suite" "$root" "$mirror"

install -m 644 "$here/dpkg.cfg" "$root/etc/dpkg/dpkg.cfg.d/cclab"
printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\nAcquire::Languages "none";\n' \
	>"$root/etc/apt/apt.conf.d/90cclab"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
	"$mirror" "$suite" "$mirror" "$suite" "$security_mirror" "$suite" >"$root/etc/apt/sources.list"
# The suite's own kernel (trixie: 6.12, as in the lab VM), whose packages take
# initramfs-tools: the hook below keeps its initrd small (the backports
# kernel 7.3 pulled in dracut instead, whose generic 40 MB initrd ignored it).
echo cclab >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tcclab\n' >"$root/etc/hosts"
# only the virtio disk and ext4 in the initrd: a short generation, a short boot
mkdir -p "$root/etc/initramfs-tools/conf.d" "$root/etc/initramfs-tools/hooks"
echo MODULES=list >"$root/etc/initramfs-tools/conf.d/cclab.conf"
install -m 755 "$here/initramfs-hook" "$root/etc/initramfs-tools/hooks/cclab"

mount -t proc proc "$root/proc"
for b in "${binds[@]}"; do
	mkdir -p "$root${b#*:}"
	mount --rbind "${b%%:*}" "$root${b#*:}"
	mount --make-rslave "$root${b#*:}"
done
cp /etc/resolv.conf "$root/etc/resolv.conf"

say "provision (vm/provision.sh --box --kmod)"
install -m 755 "$repo/vm/provision.sh" "$root/tmp/provision.sh"
logged provision chrooted /tmp/provision.sh --box --kmod
rm -f "$root/tmp/provision.sh"
kver=$(ls "$root/lib/modules")
if [ "$(echo "$kver" | wc -w)" -ne 1 ] || [ ! -d "$root/usr/src/linux-headers-$kver" ]; then
	say "expected one kernel with its headers in the box, found: $kver"
	exit 1
fi

say "wheelhouse: cclab's Python dependencies (pyproject.toml, with [test])"
wheels=/opt/cclab/wheels
mapfile -t deps < <(python_deps "$repo/pyproject.toml")
# PyPI trusted as the host trusts it (e.g. a host behind a TLS-inspecting proxy with its own CA)
install -m 644 "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$root/tmp/host-ca.crt"
logged wheelhouse chrooted python3 -m pip wheel --disable-pip-version-check -q --cert /tmp/host-ca.crt \
	--wheel-dir "$wheels" "${deps[@]}"
rm -f "$root/tmp/host-ca.crt"
# installed too (under /usr/local): a venv made with --system-site-packages,
# as `make venv` makes it, then installs cclab alone
logged pip-install chrooted python3 -m pip install --disable-pip-version-check -q --break-system-packages \
	--no-index --find-links "$wheels" "${deps[@]}"
# pip in the box (also in a venv) takes packages from the wheelhouse only
printf '# cclab box: Python packages from the wheelhouse, not PyPI (delete this file to use PyPI)\n[global]\nno-index = true\nfind-links = %s\n' \
	"$wheels" >"$root/etc/pip.conf"

say "vagrant user, sshd, DHCP"
chrooted useradd --create-home --shell /bin/bash --groups sudo vagrant
echo 'vagrant:vagrant' | chrooted chpasswd
echo 'vagrant ALL=(ALL) NOPASSWD: ALL' >"$root/etc/sudoers.d/vagrant"
chmod 440 "$root/etc/sudoers.d/vagrant"
install -d -m 700 "$root/home/vagrant/.ssh"
install -m 600 "$vagrant_pub" "$root/home/vagrant/.ssh/authorized_keys"
chrooted chown -R vagrant:vagrant /home/vagrant/.ssh
install -m 644 "$here/dhcp.network" "$root/etc/systemd/network/80-cclab-dhcp.network"
printf 'UseDNS no\n' >"$root/etc/ssh/sshd_config.d/cclab.conf"
# every box makes its own host keys at its first boot
rm -f "$root"/etc/ssh/ssh_host_*
mkdir -p "$root/etc/systemd/system/ssh.service.d"
printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
	>"$root/etc/systemd/system/ssh.service.d/cclab.conf"
printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' >"$root/etc/fstab"
chrooted systemctl enable systemd-networkd ssh >/dev/null 2>&1
# nothing waits for a network that is not needed to boot
chrooted systemctl mask systemd-networkd-wait-online apt-daily.timer apt-daily-upgrade.timer \
	e2scrub_all.timer fstrim.timer >/dev/null 2>&1

# Small and reproducible: no package lists, caches or logs in the box.
rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/resolv.conf"
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd.img"
unmount_chroot
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/root/.cache
: >"$root/etc/machine-id"

# what the box is, in the box (vm/provision.sh reads it there) and beside its image
mkdir -p "$root/etc/cclab"
printf '{"suite": "%s", "kernel": "%s", "mirror": "%s", "built": "%s"}\n' \
	"$suite" "$kver" "$mirror" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$root/etc/cclab/box.json"
cp "$root/etc/cclab/box.json" "$work/box.json"

used_mb=$(du -sm "$root" | cut -f1)
say "box.img: ext4 of ${disk_gib} GiB (${used_mb} MiB used), qcow2"
mkfs.ext4 -q -F -L cclabroot -d "$root" -E lazy_itable_init=1,lazy_journal_init=1 "$work/root.raw" "${disk_gib}G"
if mountpoint -q "$root"; then umount "$root"; fi
qemu-img convert -O qcow2 -c -o compression_type=zstd "$work/root.raw" "$work/box.img"
rm -f "$work/root.raw"
printf '{"provider": "libvirt", "format": "qcow2", "virtual_size": %d}\n' "$disk_gib" >"$work/metadata.json"
install -m 644 "$here/Vagrantfile" "$work/Vagrantfile"
mkdir -p "$work/out"
tar -C "$work" -cf "$work/out/cclab.box" metadata.json Vagrantfile box.img vmlinuz initrd.img box.json

rm -rf "$out"
mv "$work/out" "$out"
# boxes of older inputs of this suite are dead weight; the caches stay
for d in "$cache/$suite"-*; do
	if [ "$d" != "$out" ] && [ -d "$d" ] && [ "${d%.tmp}" = "$d" ]; then
		rm -rf "$d"
	fi
done
say "built in $(($(date +%s) - t0)) s: $(du -h "$box" | cut -f1)"
echo "$box"

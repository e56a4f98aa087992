#!/usr/bin/env bash
# Install what cclab needs from the distribution's packages (Debian 12,
# Ubuntu 22.04 and newer). Idempotent: installs only what is missing, and
# refreshes the package lists only when something is.
#
#   sudo vm/provision.sh            # what `make demo` and `make test` need
#   sudo vm/provision.sh --kmod     # also kernel headers to build the .ko modules
#   sudo vm/provision.sh --vm-host  # also what builds and boots the qemu lab VM
#                                   # (`make vm` runs this)
#   sudo vm/provision.sh --vagrant-host  # also what builds the Vagrant box and brings
#                                   # it up under libvirt (`make box` runs this)
#   vm/provision.sh --box --kmod    # the Vagrant box's root (run in its chroot by
#                                   # vm/box/build-box.sh): a host's set, plus
#                                   # a kernel, sshd, sudo, systemd
#   vm/provision.sh --guest         # the qemu lab VM's root (run in its chroot by
#                                   # vm/build-image.sh): what runs experiments,
#                                   # no compilers; the Python deps from Debian
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
	echo "vm/provision.sh: run as root (sudo)" >&2
	exit 1
fi

# What runs an experiment.
runtime=(
	bridge-utils
	ethtool
	iperf3
	iproute2
	iputils-ping
	mininet
	net-tools
	python3
	python3-venv
	# the tests' independent capture of what a link forwarded
	tcpdump
	util-linux
)
# What builds cclab (BPF objects, modules, the harness) and its venv.
build=(
	clang
	gcc
	gcc-multilib
	libbpf-dev
	# linux/if_packet.h and linux/virtio_net.h for cclab-delay
	linux-libc-dev
	llvm
	make
	python3-pip
)
# The lab VM has no PyPI: cclab's Python dependencies come from Debian, and
# it runs Mininet's clean-up tools and modprobe itself (no systemd there).
# It builds cclab's modules against its own kernel's headers (build-image.sh
# installs them): a compiler and make, nothing else of the host's build set.
guest=(
	gcc
	kmod
	make
	procps
	psmisc
	python3-matplotlib
	python3-pytest
	python3-rich
)
# switches = "ovs" on the host: ovsdb-server and ovs-vswitchd (cclab starts its own; the os-ken app
# comes from PyPI with the venv, so the lab VM, which has no PyPI, goes without).
ovs=(
	openvswitch-switch
)
# The FPGA element (fpga/): Icarus runs its cocotb testbenches, Verilator lints
# it (and builds the in-the-loop model), Yosys synthesizes it (`make fpga-synth`;
# nextpnr for ECP5 comes from PyPI with the venv).
fpga=(
	iverilog
	verilator
	yosys
)
# What builds and boots the qemu lab VM on the host.
vm_host=(
	debootstrap
	e2fsprogs
	qemu-system-x86
)

# The Vagrant box is a host (the demo and the tests run in it) that boots:
# its kernel (initramfs-tools: the box's hook keeps the initrd small), systemd
# with udev and networkd, sshd and sudo for Vagrant, rsync for Vagrant's rsync
# folder sync.  It leaves out the FPGA tools: under software emulation
# Verilating the in-the-loop model alone would take the better part of an hour.
box=(
	dbus
	initramfs-tools
	kmod
	linux-image-amd64
	openssh-server
	procps
	psmisc
	rsync
	sudo
	systemd-sysv
	udev
)
# What builds the Vagrant box (debootstrap, qemu-img) and brings it up with
# vagrant-libvirt: the libvirt daemons (qemu driver), libvirt's dnsmasq and
# firewall for its management network, rsync for the folder sync.
vagrant_host=(
	debootstrap
	dnsmasq-base
	e2fsprogs
	iptables
	libvirt-clients
	libvirt-daemon-driver-qemu
	libvirt-daemon-system
	qemu-system-x86
	qemu-utils
	rsync
	vagrant
	vagrant-libvirt
)

#: what vm/box/build-box.sh leaves in the box's root
BOX_MARK=/etc/cclab/box.json
kmod=0
vm=0
vagrant=0
role=host
for arg in "$@"; do
	case "$arg" in
	--kmod) kmod=1 ;;
	--guest) role=guest ;;
	--vm-host) vm=1 ;;
	--box) role=box ;;
	--vagrant-host) vagrant=1 ;;
	*)
		echo "vm/provision.sh: unknown option $arg (use --kmod, --guest, --vm-host, --box, --vagrant-host)" >&2
		exit 2
		;;
	esac
done
# in a booted box (`make deps` there) the box's own set: it has no route out to install more
if [ "$role" = host ] && [ -e "$BOX_MARK" ]; then
	role=box
fi
case "$role" in
guest) packages=("${runtime[@]}" "${guest[@]}") ;;
box) packages=("${runtime[@]}" "${build[@]}" "${ovs[@]}" "${box[@]}") ;;
*) packages=("${runtime[@]}" "${build[@]}" "${ovs[@]}" "${fpga[@]}") ;;
esac
if [ "$vm" = 1 ]; then
	packages+=("${vm_host[@]}")
fi
if [ "$vagrant" = 1 ]; then
	packages+=("${vagrant_host[@]}")
fi

# bpftool: its own package on Debian; part of linux-tools on older Ubuntu.
if apt-cache show bpftool >/dev/null 2>&1; then
	packages+=(bpftool)
else
	packages+=(linux-tools-common "linux-tools-$(uname -r)")
fi
if [ "$kmod" = 1 ]; then
	if apt-cache show linux-headers-amd64 >/dev/null 2>&1; then
		packages+=(linux-headers-amd64 dkms)
	else
		packages+=("linux-headers-$(uname -r)" dkms)
	fi
fi

# QEMU before 8.1 has a race in multi-threaded software emulation (TCG) that
# upstream fixed in 8.1 ("accel/tcg: Always lock pages before translation"):
# a guest translates code while another vCPU changes it, and the guest's kernel
# oopses at random, in code it patched or in its network stack.  Where KVM is
# unusable the lab VM and the box run under TCG, so on Debian 12, whose QEMU is
# 7.2, both take QEMU from bookworm-backports.
qemu_from_backports() {
	local codename have
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ "$codename" = bookworm ] || return 0
	have=$(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null || true)
	if [ -n "$have" ] && dpkg --compare-versions "$have" ge 1:8.1; then
		return 0
	fi
	if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
		echo "deb http://deb.debian.org/debian bookworm-backports main" >/etc/apt/sources.list.d/cclab-bookworm-backports.list
	fi
	echo "provision: installing qemu-system-x86 and qemu-utils from bookworm-backports (QEMU 7.2's TCG race)"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86 qemu-utils >/dev/null
}
if [ "$role" = host ] && { [ "$vm" = 1 ] || [ "$vagrant" = 1 ]; }; then
	qemu_from_backports
fi

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "provision: installing ${missing[*]}"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The BPF filesystem, where cclab pins its data-plane objects (the lab VM's
# init mounts its own at boot, the box's systemd too; their chroots have no /sys
# to mount it on).
if [ "$role" = host ]; then
	mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
fi

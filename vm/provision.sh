#!/usr/bin/env bash
# Install what cclab needs from the distribution's packages (Debian 12,
# Ubuntu 22.04 and newer). Idempotent: installs only what is missing, and
# refreshes the package lists only when something is.
#
#   sudo vm/provision.sh            # what `make demo` and `make test` need
#   sudo vm/provision.sh --kmod     # also kernel headers to build the .ko modules
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
	echo "vm/provision.sh: run as root (sudo)" >&2
	exit 1
fi

packages=(
	bridge-utils
	clang
	ethtool
	gcc
	gcc-multilib
	iperf3
	iproute2
	iputils-ping
	libbpf-dev
	llvm
	make
	mininet
	net-tools
	python3
	python3-pip
	python3-venv
	util-linux
)

# bpftool: its own package on Debian; part of linux-tools on older Ubuntu.
if apt-cache show bpftool >/dev/null 2>&1; then
	packages+=(bpftool)
else
	packages+=(linux-tools-common "linux-tools-$(uname -r)")
fi
if [ "${1:-}" = "--kmod" ]; then
	if apt-cache show linux-headers-amd64 >/dev/null 2>&1; then
		packages+=(linux-headers-amd64 dkms)
	else
		packages+=("linux-headers-$(uname -r)" dkms)
	fi
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

# The BPF filesystem, where cclab pins its data-plane objects.
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

#!/usr/bin/env bash
# What the host needs to build and boot the qemu lab VM (`make vm` runs this).
# Idempotent: installs only what is missing, refreshes package lists only then.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
	echo "vm/install-host-tools.sh: run as root (sudo make vm)" >&2
	exit 1
fi

packages=(
	debootstrap
	e2fsprogs
	qemu-system-x86
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "vm: installing the lab VM's host tools: ${missing[*]}"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

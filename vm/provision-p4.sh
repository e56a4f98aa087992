#!/usr/bin/env bash
# P4 tools for the bmv2 data plane on Ubuntu (the Vagrant VM): p4c, BMv2 with
# simple_switch_grpc, and PI (P4Runtime), as binary packages from the p4lang
# repository on the openSUSE Build Service (home:p4lang), as the p4c and
# behavioral-model READMEs document.  No building from source.  Idempotent.
#
#   sudo vm/provision-p4.sh
#
# The p4lang packages are built for amd64 only: elsewhere (arm64, e.g. Apple
# Silicon) this says so and exits 0; the kernel data plane and eBPF work there.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
	echo "vm/provision-p4.sh: run as root (sudo)" >&2
	exit 1
fi

arch=$(dpkg --print-architecture)
if [ "$arch" != amd64 ]; then
	echo "provision-p4: the p4lang packages are amd64-only; this machine is $arch: P4 (bmv2) is unavailable here," \
		"the kernel data plane and eBPF work" >&2
	exit 0
fi
# shellcheck source=/dev/null
. /etc/os-release
if [ "${ID:-}" != ubuntu ]; then
	echo "provision-p4: the p4lang repository used here is for Ubuntu (xUbuntu_<version>); this is ${ID:-unknown}" >&2
	exit 1
fi

repo_url="https://download.opensuse.org/repositories/home:/p4lang/xUbuntu_${VERSION_ID}/"
keyring=/etc/apt/keyrings/home_p4lang.gpg
list=/etc/apt/sources.list.d/home:p4lang.list

prereqs=(
	ca-certificates
	curl
	gpg
)
packages=(
	p4lang-bmv2
	p4lang-p4c
	p4lang-pi
)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${prereqs[@]}"; do
	installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

changed=0
if [ ! -s "$keyring" ]; then
	install -d -m 755 /etc/apt/keyrings
	tmp=$(mktemp)
	trap 'rm -f "$tmp"' EXIT
	curl -fsSL "${repo_url}Release.key" -o "$tmp" || {
		echo "provision-p4: cannot fetch ${repo_url}Release.key; is there a home:p4lang build for Ubuntu $VERSION_ID?" >&2
		exit 1
	}
	gpg --dearmor <"$tmp" >"$keyring"
	chmod 644 "$keyring"
	changed=1
fi
line="deb [signed-by=$keyring] $repo_url /"
if [ "$(cat "$list" 2>/dev/null)" != "$line" ]; then
	echo "$line" >"$list"
	changed=1
fi

missing=()
for p in "${packages[@]}"; do
	installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] || [ "$changed" = 1 ]; then
	apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "provision-p4: installing ${missing[*]}"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

for tool in p4c simple_switch_grpc; do
	command -v "$tool" >/dev/null || {
		echo "provision-p4: $tool is not on PATH after installing ${packages[*]}" >&2
		exit 1
	}
done
echo "provision-p4: $(p4c --version | head -n 1); simple_switch_grpc at $(command -v simple_switch_grpc)"

"""cclab's modules built for the lab VM's kernel on the host, in a chroot of the image, before a boot.

The guest builds them against its own headers with the compiler its kernel was built with (gcc-14, which a
Debian 12 host has not); under software emulation that takes about 4 minutes of a fresh tree's first boot.
The image's own root does the same build natively: mounted read-only under a tmpfs overlay in a mount
namespace of its own, the work tree bound at its path, `make -C hosts/cc kmod` chrooted there with the KDIR
the guest uses.  Its output, hosts/cc/build/kmod/<release>/, is what the guest's make then finds up to date.
Everything it mounts ends with its namespace.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from controller.vm.image import Image

#: run by sh in the new mount namespace; its values come as arguments: image, work tree, KDIR, jobs, scratch
_CHROOT_MAKE = r"""
set -eu
img=$1 repo=$2 kdir=$3 jobs=$4 base=$5
mkdir "$base/lower" "$base/rw" "$base/root"
mount -o ro,loop "$img" "$base/lower"
mount -t tmpfs tmpfs "$base/rw"
mkdir "$base/rw/upper" "$base/rw/work"
mount -t overlay overlay -o "lowerdir=$base/lower,upperdir=$base/rw/upper,workdir=$base/rw/work" "$base/root"
mkdir -p "$base/root$repo"
mount --bind "$repo" "$base/root$repo"
mount -t proc proc "$base/root/proc"
exec chroot "$base/root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
	make -C "$repo/hosts/cc" kmod V=1 "KDIR=$kdir" "-j$jobs"
"""


def build_modules(img: Image, repo: Path, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """`make -C hosts/cc kmod` for the image's kernel in a chroot of its root (needs root); its process, output
    captured.  KDIR is /lib/modules/<release>/build, as in the guest, so that the guest's make agrees."""
    kdir = f"/lib/modules/{img.kernel.abi}/build"
    with tempfile.TemporaryDirectory(prefix="cclab-kmod-") as base:
        argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _CHROOT_MAKE, "cclab-kmod"]
        args = [str(img.root_img), str(repo.resolve()), kdir, str(os.cpu_count() or 1), base]
        return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=timeout_s)

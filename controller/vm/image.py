"""The lab VM's image: a debootstrapped Debian root with its own stock kernel, cached by its inputs.

vm/build-image.sh makes it (debootstrap, vm/provision.sh --guest, the suite's
linux-image-amd64 and linux-headers-amd64, a small initrd).  It lives under
CACHE_ROOT/<suite>-<hash>, the hash taken over the files baked into it, the
suite and the mirrors: a change to any of them is a new directory, and an
unchanged tree never rebuilds.  The kernel is whatever the suite carried at
build time; image.json records its ABI name and package version.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from controller.vm.settings import CACHE_ROOT, MIRROR, SECURITY_MIRROR, SUITE, VM_DIR, VmError, require_root

log = logging.getLogger(__name__)

#: files whose content is baked into the image (a change rebuilds it)
IMAGE_INPUTS = ("build-image.sh", "provision.sh", "guest/init.py", "guest/initrd-init")


@dataclass(frozen=True)
class Kernel:
    abi: str
    """Kernel ABI name, e.g. 6.12.57+deb13-amd64 (uname -r in the VM, the .ko's vermagic)."""
    version: str
    """Debian package version of linux-image-<abi> / linux-headers-<abi>, e.g. 6.12.57-1."""


@dataclass(frozen=True)
class Image:
    dir: Path
    """Cache directory of one built image: root.img, vmlinuz, initrd.img, image.json."""
    suite: str
    """Debian suite of its root and kernel."""

    @property
    def root_img(self) -> Path:
        return self.dir / "root.img"

    @property
    def vmlinuz(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd.img"

    @property
    def manifest(self) -> Path:
        return self.dir / "image.json"

    def complete(self) -> bool:
        return all(p.is_file() for p in (self.root_img, self.vmlinuz, self.initrd, self.manifest))

    @property
    def kernel(self) -> Kernel:
        """The kernel the build installed (read from image.json)."""
        try:
            facts = json.loads(self.manifest.read_text())
            return Kernel(str(facts["kernel"]), str(facts["kernel_version"]))
        except (OSError, ValueError, KeyError):
            raise VmError(f"the lab VM image {self.dir} is not built; run `make vm`") from None


def image_id(suite: str = SUITE) -> str:
    h = hashlib.sha256()
    for name in IMAGE_INPUTS:
        h.update(name.encode() + b"\0" + (VM_DIR / name).read_bytes() + b"\0")
    h.update(f"{suite}\0{MIRROR}\0{SECURITY_MIRROR}".encode())
    return f"{suite}-{h.hexdigest()[:12]}"


def image(suite: str = SUITE) -> Image:
    """The image for these inputs (built or not)."""
    return Image(CACHE_ROOT / image_id(suite), suite)


def require_image() -> Image:
    img = image()
    if not img.complete():
        raise VmError(f"the lab VM image ({img.suite}, {img.dir}) is not built; run `make vm`")
    return img


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def build(progress: Callable[[str], None] | None = None) -> tuple[Image, float | None]:
    """Build the image unless the cache has it; return it and the build time (None if cached)."""
    img = image()
    if img.complete():
        return img, None
    require_root()
    for tool in ("debootstrap", "mkfs.ext4", "chroot"):
        if shutil.which(tool) is None:
            raise VmError(f"{tool} is not installed; run `make vm` (it installs the VM tools)")
    with _locked(CACHE_ROOT / ".build.lock"):
        if img.complete():  # another build finished while we waited
            return img, None
        t0 = time.monotonic()
        debs = CACHE_ROOT / f"debs-{img.suite}"
        env = {**os.environ, "MIRROR": MIRROR, "SECURITY_MIRROR": SECURITY_MIRROR, "DEBS": str(debs)}
        argv = [str(VM_DIR / "build-image.sh"), str(img.dir), img.suite]
        with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
            assert proc.stdout is not None
            lines = []
            for line in proc.stdout:
                lines.append(line.rstrip())
                if progress is not None:
                    progress(line.rstrip())
            rc = proc.wait()
        if rc != 0 or not img.complete():
            last = next((ln for ln in reversed(lines) if ln.strip()), f"exit status {rc}")
            raise VmError(f"building the lab VM image failed: {last}")
        _prune_images(keep=img)
        return img, time.monotonic() - t0


def _prune_images(keep: Image) -> None:
    """Images of older inputs of the same suite are dead weight (~2 GB each); the .deb cache stays.

    Images of another suite are left alone: a checkout of another version may still boot them.
    """
    for d in CACHE_ROOT.glob(f"{keep.suite}-*"):
        if d != keep.dir and d.is_dir() and not d.name.endswith(".tmp"):
            log.info("removing stale image %s", d)
            shutil.rmtree(d, ignore_errors=True)

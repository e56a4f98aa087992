"""Where the lab VM's parts live, the VM's fixed size, and its one error type.

Every path and tool can be moved by the environment: CCLAB_VM_CACHE (the
image cache), CCLAB_VM_SUITE (the Debian suite of the image), CCLAB_VM_MIRROR
and CCLAB_VM_SECURITY_MIRROR (where it is fetched from), QEMU (the emulator).
"""

from __future__ import annotations

import os
from pathlib import Path

from controller import system

VM_DIR = system.REPO / "vm"
CACHE_ROOT = Path(os.environ.get("CCLAB_VM_CACHE", "/var/cache/cclab/vm"))
#: Debian 13: kernel 6.12, which has bpf_rdonly_cast (the coupled eBPF mptcpw needs it; 6.1 has not)
SUITE = os.environ.get("CCLAB_VM_SUITE", "trixie")
MIRROR = os.environ.get("CCLAB_VM_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get("CCLAB_VM_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
QEMU = os.environ.get("QEMU", "qemu-system-x86_64")
LOG_ROOT = system.RUN_STATE / "vm"
ACCEL_STATE = system.RUN_STATE / "vm-accel.json"

CPUS = 2
MEMORY_MIB = 2048
#: a stock kernel under KVM reaches the init in ~2 s; one that hangs never does
PROBE_TIMEOUT_S = 30.0
#: software emulation boots in ~10 s; allow for a loaded machine
BOOT_TIMEOUT_S = 120.0


class VmError(RuntimeError):
    """The lab VM cannot be built or run; the message says the fix."""


class GuestPanic(VmError):
    """The guest's kernel panicked before the command ended; `trace` is the panic's report from the console."""

    def __init__(self, message: str, trace: str) -> None:
        super().__init__(message)
        self.trace = trace


def require_root() -> None:
    if os.geteuid() != 0:
        raise VmError("the lab VM needs root (qemu, its image cache, the work tree shared read-write); use sudo")

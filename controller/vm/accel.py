"""KVM where it works, else software emulation (TCG), and the verdict remembered.

A stock kernel can hang early under KVM on some hosts: the first boot under
KVM must reach the guest's init within PROBE_TIMEOUT_S, else it is killed and
retried under TCG (controller/vm/run.py).  The verdict is kept until the host
reboots (/run/cclab/vm-accel.json), keyed by the host kernel, qemu and image.
"""

from __future__ import annotations

import functools
import json
import os
import re

from controller import system
from controller.vm.image import Image
from controller.vm.settings import ACCEL_STATE, QEMU

#: the QEMU release that fixed a race in multi-threaded software emulation: before it a guest's kernel oopses at
#: random under TCG (vm/provision.sh installs a newer one on Debian 12)
TCG_RACE_FIXED = (8, 1)


@functools.cache  # `cclab doctor` asks twice (the KVM verdict's key, the TCG race): one qemu process
def qemu_version() -> str:
    return system.tool_version([QEMU, "--version"])


def tcg_race(version: str) -> bool:
    """Whether this `qemu --version` line names a release with the TCG race (one it cannot parse: no)."""
    m = re.search(r"version (\d+)\.(\d+)", version)
    return m is not None and (int(m[1]), int(m[2])) < TCG_RACE_FIXED


def _accel_key(img: Image) -> str:
    return f"{os.uname().release} {qemu_version()} {img.dir.name}"


def kvm_verdict(img: Image) -> tuple[bool | None, str]:
    """(True/False/None = untested, reason) for KVM with this host, qemu and image."""
    if os.environ.get("CCLAB_VM_ACCEL", "auto") == "tcg":
        return False, "CCLAB_VM_ACCEL=tcg"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is absent or not accessible"
    try:
        state = json.loads(ACCEL_STATE.read_text())
    except (OSError, ValueError):
        return None, "not probed yet"
    if state.get("key") != _accel_key(img):
        return None, "not probed yet"
    return bool(state.get("kvm")), str(state.get("reason", ""))


def record_kvm(img: Image, ok: bool, reason: str) -> None:
    ACCEL_STATE.parent.mkdir(parents=True, exist_ok=True)
    ACCEL_STATE.write_text(json.dumps({"key": _accel_key(img), "kvm": ok, "reason": reason}))

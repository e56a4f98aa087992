"""One boot of the lab VM: the qemu command line and the process, watched until the guest powers off.

Every boot starts from the pristine image (its writes go to a throwaway
overlay in the control directory); the kernel's PID 1 is vm/guest/init.py,
which prints STARTED on the serial console first.  qemu dies with cclab
(PR_SET_PDEATHSIG) and is stopped on every way out of boot().
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from controller.vm.image import Image
from controller.vm.settings import CPUS, MEMORY_MIB, QEMU, VmError
from controller.vm.share import CTL_TAG, REPO_TAG, clear_outcome, console_tail, virtfs

log = logging.getLogger(__name__)

KERNEL_ARGS = (
    "console=ttyS0",
    "root=/dev/vda",
    "rootfstype=ext4",
    "rw",
    "init=/usr/local/sbin/cclab-init",
    "panic=-1",
    "mitigations=off",
    "tsc=reliable",
    "no_timer_check",
    "quiet",
    "loglevel=4",
)
STARTED = b"cclab-init: started"
PR_SET_PDEATHSIG = 1


def qemu_argv(img: Image, accel: str, ctl: Path, repo: Path) -> list[str]:
    cpu = ["-accel", "kvm", "-cpu", "host"] if accel == "kvm" else ["-accel", "tcg,thread=multi", "-cpu", "max"]
    console = str(ctl / "console.log").replace(",", ",,")
    return [
        QEMU,
        "-name",
        "cclab-lab-vm",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-machine",
        "pc",
        *cpu,
        "-smp",
        str(CPUS),
        "-m",
        str(MEMORY_MIB),
        "-kernel",
        str(img.vmlinuz),
        "-initrd",
        str(img.initrd),
        "-append",
        " ".join(KERNEL_ARGS),
        "-drive",
        f"file={str(img.root_img).replace(',', ',,')},format=raw,if=virtio,snapshot=on,cache=unsafe",
        "-virtfs",
        virtfs(repo, REPO_TAG),
        "-virtfs",
        virtfs(ctl, CTL_TAG),
        "-chardev",
        f"file,id=console,path={console}",
        "-serial",
        "chardev:console",
        "-nic",
        "none",
    ]


def _die_with_parent() -> None:
    """In the child before exec: qemu gets SIGKILL if cclab dies (no orphaned VM)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Tail:
    """Read what a file gained since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return b""
        self.offset += len(data)
        return data


def boot(
    img: Image,
    accel: str,
    ctl: Path,
    repo: Path,
    started_within_s: float,
    deadline: float,
    echo: Callable[[bytes], None] | None,
) -> tuple[int | None, str]:
    """Boot once; return (qemu exit status, "") or (None, why it did not reach the init)."""
    console = ctl / "console.log"
    clear_outcome(ctl)
    argv = qemu_argv(img, accel, ctl, repo)
    log.info("boot (%s): %s", accel, argv)
    env = {**os.environ, "TMPDIR": str(ctl)}  # the disk's throwaway overlay goes there
    with open(ctl / f"qemu-{accel}.log", "wb") as qlog:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=qlog, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent
        )
    try:
        t0 = time.monotonic()
        started = False
        out = _Tail(ctl / "output.log")
        while True:
            rc = proc.poll()
            if not started:
                started = STARTED in (console.read_bytes() if console.exists() else b"")
                if not started and rc is None and time.monotonic() - t0 > started_within_s:
                    return None, f"no sign of the guest's init within {started_within_s:g} s under {accel}"
            if echo is not None:
                data = out.read()
                if data:
                    echo(data)
            if rc is not None:
                if not started:
                    qerr = " ".join((ctl / f"qemu-{accel}.log").read_text(errors="replace").split())
                    return None, f"qemu exited ({rc}) before the guest's init under {accel}: {qerr or '-'}"
                if echo is not None and (data := out.read()):
                    echo(data)
                return rc, ""
            if time.monotonic() > deadline:
                raise VmError(
                    f"the command in the lab VM did not finish in time; killed it (console: {console}: "
                    f"{console_tail(ctl)})"
                )
            time.sleep(0.1)
    finally:
        _stop(proc)
        for p in ctl.glob("vl.*"):  # qemu's snapshot overlay, if it left one
            p.unlink(missing_ok=True)

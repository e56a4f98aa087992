"""Run one command in the lab VM: boot (KVM, else TCG), wait for it, power off, bring its outcome back."""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from controller import system
from controller.vm.accel import kvm_verdict, record_kvm
from controller.vm.image import require_image
from controller.vm.qemu import boot
from controller.vm.settings import BOOT_TIMEOUT_S, PROBE_TIMEOUT_S, QEMU, VmError, require_root
from controller.vm.share import new_control_dir, read_outcome, require_inside

log = logging.getLogger(__name__)

#: a whole experiment under software emulation: boot, set-up, the run, plots
RUN_MARGIN_S = 180.0


@dataclass(frozen=True)
class VmResult:
    returncode: int
    """Exit status of the command in the guest."""
    console_log_path: Path
    """The serial console (kernel and init messages, the command's output)."""
    output: str
    """The command's stdout and stderr, merged."""
    elapsed_s: float
    """Wall time from starting qemu to its exit (including a failed KVM probe)."""
    accel: str
    """kvm or tcg: what the command ran under."""
    boot_s: float | None
    """Guest uptime when the command started (boot to ready)."""
    kernel: str
    """uname -r in the guest."""
    accel_note: str = ""
    """Why KVM was not used, when it was not."""


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP (the sweep that started the run died, a terminal closed) end the wait like Ctrl-C, so
    the VM is always killed on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupt(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {s: signal.signal(s, raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run_in_vm(
    argv: list[str],
    *,
    timeout_s: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    echo: Callable[[bytes], None] | None = None,
    repo: Path = system.REPO,
    accel: str | None = None,
) -> VmResult:
    """Boot the lab VM, run argv in the guest (cwd: the shared work tree), power off.

    The work tree ``repo`` is mounted in the guest at the same path; the guest's
    PYTHONPATH is it, its interpreter Debian's /usr/bin/python3 (with Mininet,
    rich, matplotlib and pytest from Debian).  ``echo`` gets the command's
    output as it comes; ``accel`` ("kvm", "tcg") insists on one (default: KVM
    where it works, else TCG; CCLAB_VM_ACCEL=tcg forces TCG).  Raises VmError when the VM cannot boot, the command
    outlives ``timeout_s`` (the VM is killed) or the guest ends without an exit
    status; a command that fails is a VmResult with its returncode.
    """
    require_root()
    if shutil.which(QEMU) is None:
        raise VmError(f"{QEMU} is not installed; run `make vm` (it installs qemu-system-x86)")
    if accel not in (None, "kvm", "tcg"):
        raise VmError(f"accel must be kvm or tcg, not {accel!r}")
    img = require_image()
    repo = repo.resolve()
    cwd = (cwd or repo).resolve()
    require_inside(cwd, repo, "the working directory")
    ctl = new_control_dir(argv, cwd, repo, env or {})
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    kvm_ok, note = kvm_verdict(img)
    if accel == "tcg":
        kvm_ok, note = False, "TCG requested"
    elif accel == "kvm" and kvm_ok is False:
        raise VmError(f"KVM was requested but does not work here: {note}")
    with _sigterm_interrupts():
        rc, used = None, "tcg"
        if kvm_ok is not False:
            rc, why = boot(img, "kvm", ctl, repo, PROBE_TIMEOUT_S, deadline, echo)
            if kvm_ok is None:
                record_kvm(img, rc is not None, why or "boots")
            if rc is None:
                if accel == "kvm":
                    raise VmError(f"KVM was requested but does not work here: {why}")
                log.warning("KVM unusable, falling back to software emulation: %s", why)
                note = why
            else:
                used = "kvm"
        if rc is None:
            rc, why = boot(img, "tcg", ctl, repo, min(BOOT_TIMEOUT_S, timeout_s), deadline, echo)
        if rc is None and time.monotonic() < deadline:
            # the command never started (measured: the guest's kernel can oops while patching its own code at
            # boot under software emulation); one more boot, the first console kept beside
            log.warning("the lab VM did not reach its init (%s); booting it once more", why)
            if (ctl / "console.log").exists():
                (ctl / "console.log").replace(ctl / "console.first-boot.log")
            rc, why = boot(img, "tcg", ctl, repo, min(BOOT_TIMEOUT_S, timeout_s), deadline, echo)
        if rc is None:
            raise VmError(f"the lab VM did not boot: {why} (console: {ctl / 'console.log'})")
    elapsed = time.monotonic() - t0
    got = read_outcome(ctl, rc)
    return VmResult(
        returncode=got.returncode,
        console_log_path=ctl / "console.log",
        output=got.output,
        elapsed_s=elapsed,
        accel=used,
        boot_s=got.boot_s,
        kernel=got.kernel,
        accel_note="" if used == "kvm" else note,
    )


def write_stdout(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def run_spec_in_vm(
    spec_path: Path,
    extra_args: list[str],
    *,
    echo: Callable[[bytes], None] | None = write_stdout,
    timeout_s: float | None = None,
    env: dict[str, str] | None = None,
) -> int:
    """`cclab run SPEC --no-live EXTRA...` in the lab VM, with `env` added to its environment; return its exit
    status.

    The spec must be inside the work tree (it is shared, not copied), and so
    must a --results directory; the run directory appears in the host's
    results/ as the guest writes it.  ``echo`` relays the guest's output
    (default: this process's stdout).
    """
    repo = system.REPO.resolve()
    spec_abs = spec_path.resolve()
    require_inside(spec_abs, repo, "the spec")
    for i, a in enumerate(extra_args):
        if (a == "--results" and i + 1 < len(extra_args)) or a.startswith("--results="):
            val = a.split("=", 1)[1] if "=" in a else extra_args[i + 1]
            require_inside(Path(val), repo, "--results")
    if timeout_s is None:
        timeout_s = _spec_duration_s(spec_abs) + RUN_MARGIN_S
    argv = ["python3", "-m", "controller.cli", "run", str(spec_abs), "--no-live", *extra_args]
    here = Path.cwd().resolve()
    cwd = here if here.is_relative_to(repo) else repo
    res = run_in_vm(argv, timeout_s=timeout_s, echo=echo, cwd=cwd, env=env)
    log.info("lab VM (%s, kernel %s): exit %d after %.1f s", res.accel, res.kernel, res.returncode, res.elapsed_s)
    return res.returncode


def _spec_duration_s(path: Path) -> float:
    """The spec's own end time (its last flow), for the timeout; 60 s if it cannot tell."""
    try:
        from controller import spec

        s = spec.load(path)
        return max([s.duration_s] + [f.start_s + f.duration_s for f in s.flows])
    except Exception:  # the guest validates the spec and says what is wrong
        return 60.0

"""What the host and the guest share: the work tree at the same path, and a control directory per job.

Two 9p shares: ``cclab`` is the host's work tree, mounted in the guest at the
same path, so a run writes its results straight into the host's tree;
``cclabctl`` is a fresh control directory under /run/cclab/vm/ that carries
the job in (job.json: argv, cwd, env, where the tree is) and its outcome out
(rc, output.log, guest.json; qemu writes console.log there too).  The guest's
side of this is vm/guest/init.py.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from controller.vm.settings import LOG_ROOT, GuestPanic, VmError

REPO_TAG = "cclab"
CTL_TAG = "cclabctl"
KEEP_LOGS = 20


def virtfs(path: Path, tag: str) -> str:
    """qemu's -virtfs value sharing path under tag (option values escape ',' by doubling it)."""
    return f"local,path={str(path).replace(',', ',,')},mount_tag={tag},security_model=none,multidevs=remap"


def require_inside(path: Path, repo: Path, what: str) -> None:
    """The guest sees only the shared tree: a path outside it is an error naming it."""
    if not path.resolve().is_relative_to(repo):
        raise VmError(f"{what} {path} is outside the work tree {repo}, which is all the lab VM sees")


def new_control_dir(argv: list[str], cwd: Path, repo: Path, env: dict[str, str]) -> Path:
    """A fresh control directory holding job.json (the oldest beyond KEEP_LOGS are removed)."""
    LOG_ROOT.mkdir(parents=True, exist_ok=True)
    old = sorted(p for p in LOG_ROOT.iterdir() if p.is_dir())
    for p in old[: max(0, len(old) - KEEP_LOGS + 1)]:
        shutil.rmtree(p, ignore_errors=True)
    ctl = LOG_ROOT / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    ctl.mkdir()
    job = {"argv": list(argv), "cwd": str(cwd), "repo": str(repo), "env": dict(env)}
    (ctl / "job.json").write_text(json.dumps(job))
    return ctl


def clear_outcome(ctl: Path) -> None:
    """Before a boot: nothing left from an earlier attempt of the same job."""
    for name in ("console.log", "rc", "output.log"):
        (ctl / name).unlink(missing_ok=True)


def console_tail(ctl: Path, lines: int = 5) -> str:
    try:
        text = (ctl / "console.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def panic_report(ctl: Path) -> str:
    """The guest kernel's report of its panic, from the first oops line to "Kernel panic" ("": none)."""
    try:
        lines = (ctl / "console.log").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    end = next((i for i, ln in enumerate(lines) if "Kernel panic" in ln), None)
    if end is None:
        return ""
    start = next((i for i, ln in enumerate(lines) if "PANIC:" in ln or "Oops" in ln or "BUG:" in ln), end)
    return "\n".join(lines[min(start, end) : end + 1])


@dataclass(frozen=True)
class Outcome:
    returncode: int
    """Exit status of the command in the guest."""
    output: str
    """The command's stdout and stderr, merged."""
    boot_s: float | None
    """Guest uptime when the command started (boot to ready)."""
    kernel: str
    """uname -r in the guest."""


def read_outcome(ctl: Path, qemu_rc: int) -> Outcome:
    """What the guest wrote back; VmError if it ended without the command's exit status."""
    try:
        status = int((ctl / "rc").read_text())
    except (OSError, ValueError):
        trace = panic_report(ctl)
        if trace:
            first = next((ln for ln in trace.splitlines() if "Oops" in ln or "BUG" in ln), trace.splitlines()[0])
            raise GuestPanic(
                f"the lab VM's kernel panicked (qemu {qemu_rc}) before the command ended: {first.strip()}; "
                f"see {ctl / 'console.log'}",
                trace,
            ) from None
        raise VmError(
            f"the lab VM stopped (qemu {qemu_rc}) without the command's exit status; see {ctl / 'console.log'}: "
            f"{console_tail(ctl)}"
        ) from None
    try:
        facts = json.loads((ctl / "guest.json").read_text())
    except (OSError, ValueError):
        facts = {}
    out = ctl / "output.log"
    return Outcome(
        returncode=status,
        output=out.read_text(errors="replace") if out.exists() else "",
        boot_s=facts.get("uptime_at_job_s"),
        kernel=str(facts.get("kernel", "?")),
    )

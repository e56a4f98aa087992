"""The host the testbed runs on: commands, capabilities, paths.

Every command is an argument list (no shell strings).  Capability probes run
in a throwaway network namespace (``unshare -n``) so they leave nothing behind.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "build"
BPFFS = Path("/sys/fs/bpf")
PIN_ROOT = BPFFS / "cclab"
RUN_STATE = Path("/run/cclab")


class SystemError_(RuntimeError):
    """A host command or capability is missing or failed; the message says the fix."""


def shown(path: Path) -> str:
    """A path as short as it can be said: relative to the work tree when inside it (no machine's paths in what a
    reader sees or the repository keeps)."""
    try:
        return str(path.resolve().relative_to(REPO.resolve()))
    except ValueError:
        return str(path)


def run(args: list[str], *, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure raise SystemError_ with its stderr in one line."""
    log.debug("run %s", args)
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise SystemError_(f"{args[0]} is not installed; run `make deps` (as root)") from None
    except subprocess.TimeoutExpired:
        raise SystemError_(f"{' '.join(args)} did not finish within {timeout:g} s") from None
    if check and proc.returncode != 0:
        err = " ".join(proc.stderr.split()) or f"exit status {proc.returncode}"
        raise SystemError_(f"{' '.join(args)}: {err}")
    return proc


def require_root() -> None:
    if os.geteuid() != 0:
        raise SystemError_("cclab needs root for namespaces, tc and BPF; run it with sudo")


def require_tools(*names: str) -> None:
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        raise SystemError_(f"missing tools: {', '.join(missing)}; run `make deps` (as root)")


def ensure_bpffs() -> None:
    """Mount the BPF filesystem if nothing is mounted at /sys/fs/bpf."""
    if os.path.ismount(BPFFS):
        return
    run(["mount", "-t", "bpf", "bpf", str(BPFFS)])


@functools.cache
def has_qdisc(kind: str, *params: str) -> bool:
    """Whether this kernel has a qdisc, tried on lo of a throwaway namespace."""
    if shutil.which("unshare") is None or shutil.which("tc") is None:
        return False
    proc = run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", kind, *params], check=False)
    return proc.returncode == 0


def has_netem() -> bool:
    return has_qdisc("netem", "delay", "1ms")


def netns_inode(pid: int | None = None) -> int:
    """Inode of a process's network namespace (default: this process)."""
    return os.stat(f"/proc/{pid or 'self'}/ns/net").st_ino


def netstat(pid: int) -> dict[str, dict[str, int]]:
    """A process's network namespace's extended counters (/proc/<pid>/net/netstat), by parse_netstat()."""
    return parse_netstat(Path(f"/proc/{pid}/net/netstat").read_text())


def parse_netstat(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/netstat's text as group (TcpExt, MPTcpExt, ...) -> counter -> value: each group is a line of
    names followed by a line of values, both led by the group's name."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    return {
        names[0].rstrip(":"): {n: int(v) for n, v in zip(names[1:], values[1:])}
        for names, values in zip(lines[::2], lines[1::2])
    }


def ifindex(dev: str) -> int:
    try:
        return int(Path(f"/sys/class/net/{dev}/ifindex").read_text())
    except OSError:
        raise SystemError_(f"network device {dev} does not exist") from None


def kernel_release() -> str:
    return os.uname().release


def cpu_jiffies() -> tuple[int, ...]:
    """/proc/stat's first line, all CPUs together: user nice system idle iowait irq softirq steal guest guest_nice
    (jiffies since boot)."""
    with open("/proc/stat") as f:
        return tuple(int(x) for x in f.readline().split()[1:])


def proc_stat(pid: int | str) -> tuple[str, list[str]] | None:
    """A process's /proc/<pid>/stat: (its command name, the fields after it from state on: state, ppid, ...,
    utime at [11], stime at [12]); None if there is no such process."""
    try:
        stat = Path("/proc", str(pid), "stat").read_text()
    except OSError:
        return None
    return stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()


def proc_stats() -> dict[int, tuple[str, list[str]]]:
    """Every process's proc_stat(); those that end meanwhile are left out."""
    return {int(d.name): st for d in os.scandir("/proc") if d.name.isdigit() and (st := proc_stat(d.name))}


def alive(pid: int) -> bool:
    """The process exists and has not exited: a zombie (exited, not yet reaped by its parent, which for a daemon
    that detached is init, in a container maybe never) counts as gone."""
    st = proc_stat(pid)
    return st is not None and st[1][0] != "Z"


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is `pid` now (proc_stats' ppid)."""
    return [child for child, (_, fields) in proc_stats().items() if int(fields[1]) == pid]


def cpu_busy_total(jiffies: tuple[int, ...]) -> tuple[int, int]:
    """(busy, total) of cpu_jiffies() or a difference of two: total counts user to steal (a guest's time is in
    user already), busy all of it but idle and iowait."""
    total = sum(jiffies[:8])
    return total - jiffies[3] - jiffies[4], total


@functools.cache
def software_emulated() -> bool:
    """Whether this machine is a QEMU guest under software emulation (TCG), where timers fire late: QEMU's DMI
    vendor without kvm-clock, the clock source only KVM offers (a Vagrant box with libvirt's qemu domain type)."""
    try:
        vendor = Path("/sys/class/dmi/id/sys_vendor").read_text().strip()
        clocks = Path("/sys/devices/system/clocksource/clocksource0/available_clocksource").read_text().split()
    except OSError:
        return False
    return vendor == "QEMU" and "kvm-clock" not in clocks


def tool_version(args: list[str]) -> str:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "absent"
    text = (proc.stdout or proc.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def sysctl_path(name: str) -> Path:
    """A sysctl's file ("net.ipv4.tcp_rmem"), or a module parameter's, named by its /sys path."""
    return Path(name) if name.startswith("/") else Path("/proc/sys", *name.split("."))


def read_sysctl(name: str) -> str:
    """A sysctl's or module parameter's value (sysctl_path), or "absent"."""
    try:
        return sysctl_path(name).read_text().strip()
    except OSError:
        return "absent"

"""What the host's CPUs did while one test ran: for the end of a session that had failures, so that a timing or rate
failure on a busy or starved host says so (tests/conftest.py records it around every test)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from controller import system

#: the processes named per failed test, those that used the most CPU while it ran
TOP = 3


@dataclass(frozen=True)
class Snapshot:
    cpu: tuple[int, ...]
    """/proc/stat's first line: user nice system idle iowait irq softirq steal ... (jiffies, all CPUs)"""
    procs: dict[int, tuple[str, int]]
    """pid -> (command name, user + system jiffies so far)"""


def snapshot() -> Snapshot:
    cpu = system.cpu_jiffies()
    procs = {pid: (comm, int(rest[11]) + int(rest[12])) for pid, (comm, rest) in system.proc_stats().items()}
    return Snapshot(cpu, procs)


def during(a: Snapshot, b: Snapshot) -> str:
    """One line: the CPUs' busy and stolen shares between the two snapshots, and the TOP processes by CPU time
    (those that ended meanwhile are not seen)."""
    d = tuple(y - x for x, y in zip(a.cpu, b.cpu))
    busy, total = system.cpu_busy_total(d)
    total = total or 1
    steal = d[7] if len(d) > 7 else 0
    used = sorted(((t - a.procs.get(pid, (comm, 0))[1], comm, pid) for pid, (comm, t) in b.procs.items()), reverse=True)
    hz = os.sysconf("SC_CLK_TCK")
    top = ", ".join(f"{comm}[{pid}] {ticks / hz:.1f} s" for ticks, comm, pid in used[:TOP] if ticks > 0)
    return (
        f"CPUs busy {busy / total:.0%}, stolen by the hypervisor {steal / total:.1%} over "
        f"{total / hz / (os.cpu_count() or 1):.0f} s; most CPU: {top or 'none'}"
    )

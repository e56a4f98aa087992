"""Run directories: created once, never overwritten, complete or marked incomplete.

A run directory holds INCOMPLETE from its creation until summary.json is
written with ``complete: true``; a run that stops early (error, Ctrl-C) still
writes what it measured, with ``complete: false`` and the reason.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from controller import capabilities, system
from controller.dataplane.targets import TARGETS, target
from controller.spec import Spec

RESULTS = system.REPO / "results"
INCOMPLETE = "INCOMPLETE"
#: the data-plane and algorithm sources every run is made of, whatever its target; each target adds the sources
#: only it runs on (targets.Target.sources), and a run's hash leaves out every other target's: runs are pooled
#: only with the same hash, so a change to the FPGA element does not split a campaign of kernel runs
SHARED_SOURCES = ("delay", "hosts", "controller/dataplane")


def new_run_dir(spec: Spec, root: Path = RESULTS) -> Path:
    """results/<name>-<UTC time>[-k]: a directory no earlier run used."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    root.mkdir(parents=True, exist_ok=True)
    for k in range(1000):
        path = root / (f"{spec.name}-{stamp}" + (f"-{k}" if k else ""))
        try:
            path.mkdir()
        except FileExistsError:
            continue
        (path / INCOMPLETE).write_text("this run has not finished (or was stopped); see summary.json\n")
        return path
    raise RuntimeError(f"no free run directory name under {root}")


def write_csv(path: Path, rows: Iterable[dict[str, Any]], columns: list[str] | None = None) -> None:
    rows = list(rows)
    cols = columns or (list(rows[0]) if rows else [])
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def write_rows(path: Path, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Rows already in column order (tuples), e.g. the monitor's per-interval series."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(rows)


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


#: where a run started by the host in the lab VM (which has no git, and shares the host's tree) finds the
#: tree's `git describe` and source hash, as the host read them when it started the VM
TREE_ENV = ("CCLAB_GIT_REVISION", "CCLAB_SOURCE_HASH")


def tree_env(dataplane: str) -> dict[str, str]:
    """The environment that gives a run in the lab VM this tree's commit and source hash (TREE_ENV)."""
    return {TREE_ENV[0]: git_revision(), TREE_ENV[1]: source_hash(dataplane)}


def git_revision() -> str:
    if given := os.environ.get(TREE_ENV[0]):
        return given
    try:
        rev = subprocess.run(
            ["git", "-C", str(system.REPO), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        rev = ""
    return rev or "unknown"


def source_paths(dataplane: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a `dataplane` run's source hash covers: (the paths hashed, the paths left out of them, which belong
    to the other targets alone)."""
    own = target(dataplane).sources
    others = tuple(p for t in TARGETS.values() if t.name != dataplane for p in t.sources if p not in own)
    return SHARED_SOURCES + own, others


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


#: documentation beside the sources, left out of the source hash: a README's edit must not split a campaign's pool
DOC_SUFFIX = ".md"


def source_hash(dataplane: str, repo: Path = system.REPO) -> str:
    """sha256 over the files git tracks under `source_paths(dataplane)` but their documentation (DOC_SUFFIX), as
    they are in the working tree when the run starts: each file's path, a NUL, its content's sha256 (or
    "deleted"), a NUL, in path order.  "unknown" without git; a run with it is pooled with no other."""
    if given := os.environ.get(TREE_ENV[1]):
        return given
    hashed, left_out = source_paths(dataplane)
    try:
        listed = subprocess.run(
            ["git", "-C", str(repo), "ls-files", "-z", "--", *hashed],
            capture_output=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    h = hashlib.sha256()
    names = (p for p in listed.decode().split("\0") if p and not p.endswith(DOC_SUFFIX) and not _under(p, left_out))
    for name in sorted(names):
        try:
            digest = hashlib.sha256((repo / name).read_bytes()).hexdigest()
        except FileNotFoundError:
            digest = "deleted"
        h.update(f"{name}\0{digest}\0".encode())
    return h.hexdigest()


def manifest(spec: Spec, extra: dict[str, Any]) -> dict[str, Any]:
    """Everything needed to know how the run was made."""
    sysctls = (
        "net.core.netdev_max_backlog",
        "net.ipv4.tcp_available_congestion_control",
        "net.bridge.bridge-nf-call-iptables",
        "/sys/module/sch_htb/parameters/htb_hysteresis",
        "kernel.randomize_va_space",
    )
    return {
        "spec_path": str(spec.path) if spec.path else None,
        "spec": spec.raw,
        "seed": spec.seed,
        "git_revision": git_revision(),
        "source_hash": source_hash(spec.dataplane),
        "source_dirs": list(source_paths(spec.dataplane)[0]),
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(),
        "host": {
            "kernel": system.kernel_release(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
        },
        "tools": {
            "iperf3": system.tool_version(["iperf3", "--version"]),
            "tc": system.tool_version(["tc", "-V"]),
            "bpftool": system.tool_version(["bpftool", "version"]),
            "clang": system.tool_version(["clang", "--version"]),
        },
        "host_sysctls": {name: system.read_sysctl(name) for name in sysctls},
        "capabilities": capabilities.record(),
        **extra,
    }


def finish(run_dir: Path, summary: dict[str, Any]) -> None:
    """Write summary.json last; drop the INCOMPLETE marker only for a complete run."""
    write_json(run_dir / "summary.json", summary)
    if summary.get("complete"):
        (run_dir / INCOMPLETE).unlink(missing_ok=True)

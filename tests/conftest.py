"""Shared test fixtures: capability checks that skip with the reason, leftover detection."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CCLAB = [sys.executable, "-m", "controller.cli"]
PORT = re.compile(r"^s\d+-eth\d+$")


def missing_capability() -> str | None:
    """Why root tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc, BPF)"
    for tool in ("tc", "bpftool", "iperf3", "ethtool", "brctl", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (run `make deps`)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "kernel has no BTF (/sys/kernel/btf/vmlinux)"
    if not (REPO / "build" / "bottleneck.bpf.o").exists():
        return "build/bottleneck.bpf.o is not built (run `make build`)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not importable from this Python (use .venv from `make venv`)"
    return None


#: Under CI=true the bmv2 tier must run: a skipped bmv2 test is a failure there.
IN_CI = os.environ.get("CI", "").lower() == "true"
#: item nodeid -> outcome of the bmv2 tier, for its own count line
_BMV2_OUTCOMES: dict[str, str] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = missing_capability()
    if reason is None:
        return
    for item in items:
        if "root" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if "bmv2" not in item.keywords:
        return
    if report.skipped and IN_CI:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"the bmv2 tier must run in CI (CI=true), but this test was skipped: {reason}"
    if report.when == "call" or report.outcome != "passed":
        # a test counts once, by its worst phase: failed > skipped > passed
        rank = ("passed", "skipped", "failed")
        prev = _BMV2_OUTCOMES.get(item.nodeid, "passed")
        _BMV2_OUTCOMES[item.nodeid] = max(prev, report.outcome, key=rank.index)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The bmv2 tier's own count, on a line of its own (CI reads it to see the tier ran)."""
    if not _BMV2_OUTCOMES:
        return
    counts = {k: sum(1 for v in _BMV2_OUTCOMES.values() if v == k) for k in ("passed", "failed", "skipped")}
    terminalreporter.write_line(
        f"bmv2 tier: passed {counts['passed']}, failed {counts['failed']}, skipped {counts['skipped']}"
    )


def leftovers() -> list[str]:
    """What a run may leave behind: Mininet shells, iperf3, switch ports, pins, qdiscs."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            argv = [a.decode() for a in (d / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        if argv and (os.path.basename(argv[0]) == "iperf3" or any(a.startswith("mininet:") for a in argv)):
            found.append(f"process {d.name} {' '.join(argv)}")
    for dev in os.listdir("/sys/class/net"):
        if PORT.match(dev) or re.match(r"^s\d+$", dev):
            found.append(f"device {dev}")
    pins = Path("/sys/fs/bpf/cclab")
    if pins.exists() and any(pins.iterdir()):
        found.append(f"bpf pins {sorted(p.name for p in pins.iterdir())}")
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
    for name in ("bn_enqueue", "bn_link", "bn_qdrop"):
        if f'"name":"{name}"' in out:
            found.append(f"bpf program {name}")
    return found


@pytest.fixture
def clean_host() -> Iterator[None]:
    """Assert a test leaves nothing behind; clean up after it either way."""
    before = leftovers()
    assert not before, f"host not clean before the test: {before}"
    yield
    after = leftovers()
    if after:
        subprocess.run([*CCLAB, "clean"], cwd=REPO, capture_output=True)
    assert not after, f"left behind: {after}"

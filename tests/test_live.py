"""The live view: a refusal comes before anything is drawn; the last frame shows the run as it was, in 80 columns."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from rich.console import Console

from controller import spec
from controller.experiment import preflight, runner
from controller.measure.live import render, status
from controller.measure.monitor import FlowView, LinkView, LiveState
from tests.conftest import CCLAB, REPO

DEMO = REPO / "experiments" / "demo.toml"


def _frame(state: LiveState, title: str = "demo: dumbbell x4, 100 Mbit/s, kernel") -> list[str]:
    console = Console(width=80, record=True, color_system=None)
    console.print(render(state, title))
    return console.export_text().splitlines()


def _read_all(fd: int, timeout_s: float = 5.0) -> bytes:
    """Everything written to a pty's other end (after the writer closed it)."""
    out = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other end is closed and drained
            break
        if not chunk:
            break
        out += chunk
    return out


def test_bmv2_refusal_comes_before_anything_is_drawn_or_created(tmp_path: Path) -> None:
    """Without the P4 tools (PATH without /opt/p4/bin): exit 2, one line on stderr, nothing on the terminal."""
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p.rstrip("/") != "/opt/p4/bin")
    if any(shutil.which(t, path=path) for t in preflight.BMV2_TOOLS):
        pytest.skip("BMv2 is installed outside /opt/p4/bin: it cannot be hidden by PATH")
    spec_path = tmp_path / "bmv2.toml"
    spec_path.write_text(DEMO.read_text().replace('dataplane = "kernel"', 'dataplane = "bmv2"'))
    results = tmp_path / "results"
    main, term = pty.openpty()  # stdout is a terminal, as for a user: rich would draw its live view there
    try:
        env = {**os.environ, "PATH": path, "COLUMNS": "80", "TERM": "xterm-256color"}
        proc = subprocess.run(
            [*CCLAB, "run", str(spec_path), "--results", str(results)],
            cwd=REPO,
            stdout=term,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env=env,
        )
        os.close(term)
        term = -1
        drawn = _read_all(main)
    finally:
        if term >= 0:
            os.close(term)
        os.close(main)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cclab: dataplane = 'bmv2' cannot run here: missing simple_switch_grpc"), lines[0]
    assert drawn == b"", f"drawn before the refusal: {drawn!r}"
    assert not results.exists(), f"created: {list(results.rglob('*'))}"


def test_status_line_fits_80_columns_while_running_and_at_the_end() -> None:
    flows = [
        FlowView(
            f"f{i}",
            "logwestwood",
            rate_bps=2.5e9,
            total_bytes=10**10,
            rnd_drops=12345,
            q_drops=67890,
            cwnd_pkts=12000,
            srtt_us=123456,
        )
        for i in range(1, 5)
    ]
    links = [LinkView("l1", 9.99e9, 1e10, 99999, 0.999)]
    running = LiveState(99.9, 100.0, 1e10, 9.99e9, 99999, 0.999, flows, links)
    for line in _frame(running):
        assert len(line) <= 80, f"{len(line)} columns: {line!r}"
    st = status(running).plain
    assert "\n" not in st and "Jain 0.999" in st and len(st) <= 80, st
    for f in flows:
        f.ended, f.mean_bps = True, 2.4e9
    st = status(running).plain
    assert "\n" not in st and "Jain 1.000" in st and "whole-run" in st and len(st) <= 80, st
    three = LiveState(
        99.9,
        100.0,
        1e10,
        9.99e9,
        99999,
        0.999,
        flows,
        [LinkView(f"lcore{i}", 9.99e9, 1e10, 99999, 0.5) for i in range(3)],
    )
    for line in _frame(three):
        assert len(line) <= 80, f"{len(line)} columns: {line!r}"


@pytest.mark.root
@pytest.mark.usefixtures("clean_host")
def test_demo_last_frame_shows_whole_run_rates_and_jain(tmp_path: Path) -> None:
    """The demo (shortened to 5 s): its last live frame, rendered at 80 columns, shows each flow's whole-run
    Mbit/s and Jain's index over them on one line, as summary.json has them."""
    raw = spec.read_raw(DEMO)
    raw["duration_s"] = 5
    s = spec.parse(raw, DEMO)
    frames: list[LiveState] = []
    out = runner.run(s, runner.RunOptions(results_root=tmp_path, on_update=frames.append, plots=False))
    summ = out.summary
    assert summ["complete"], summ["reason"]
    last = frames[-1]
    assert last.ended, [(f.id, f.ended) for f in last.flows]
    lines = _frame(last)
    assert all(len(ln) <= 80 for ln in lines), "\n".join(lines)
    header = next(ln for ln in lines if ln.startswith("┃"))
    assert "flow" in header and "srtt ms" in header, f"the header wraps at 80 columns:\n{chr(10).join(lines)}"
    print("\n".join(lines))
    for f in summ["flows"]:
        row = next(ln for ln in lines if ln.startswith(f"│ {f['id']} "))
        shown = float(row.split("│")[3])
        want = f["throughput_bps"] / 1e6
        assert shown > 0 and abs(shown - want) <= 0.02 * want, f"{f['id']}: frame {shown} Mbit/s, summary {want:.2f}"
    jain_line = next(ln for ln in lines if "Jain" in ln)
    shown_j = float(jain_line.split("Jain")[1].split()[0])
    assert abs(shown_j - summ["jain"]) <= 0.005, f"frame Jain {shown_j}, summary {summ['jain']:.4f}: {jain_line}"

"""Whole experiments on the BMv2 target through `cclab run`: the demo spec at 20 Mbit/s, Ctrl-C, crash clean-up.

Separate from test_bmv2.py, whose module-wide switch would still be up while these run.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller import spec
from controller.dataplane.bmv2 import queue_rate_pps
from controller.experiment import preflight, runner
from tests.conftest import CCLAB, REPO, leftovers, loss_interval
from tests.test_bmv2 import _pids

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Ubuntu 22.04's Python 3.10
    import tomli as tomllib

_missing = [t for t in ("p4c-bm2-ss", "simple_switch_grpc", "simple_switch_CLI") if shutil.which(t) is None]
pytestmark = [
    pytest.mark.bmv2,
    pytest.mark.root,
    pytest.mark.skipif(bool(_missing), reason=f"{', '.join(_missing)} not on PATH (install p4c and BMv2 with PI)"),
    pytest.mark.skipif(
        not preflight.P4_JSON.exists(), reason=f"{preflight.P4_JSON} is not built (run `make build` with p4c on PATH)"
    ),
]


@pytest.mark.slow
@pytest.mark.usefixtures("clean_host")
def test_demo_spec_on_bmv2_meets_contract(tmp_path: Path) -> None:
    """experiments/demo.toml with dataplane = "bmv2" at 20 Mbit/s through the runner: a complete summary.json,
    per-flow in-network throughput within 2 % of iperf3 after header accounting, achieved rate in 0.93-1.01."""
    raw = tomllib.loads((REPO / "experiments" / "demo.toml").read_text())
    raw["dataplane"] = "bmv2"
    raw["bottleneck"]["rate_mbps"] = 20
    s = spec.parse(raw)
    out = runner.run(s, runner.RunOptions(results_root=tmp_path, allow_no_delay=True))
    summ = out.summary
    assert summ["complete"] is True, summ["reason"]
    assert summ["dataplane"] == "bmv2"
    b = summ["bottleneck"]
    ratio = b["achieved_bps"] / b["rate_bps"]
    print(f"achieved {b['achieved_bps'] / 1e6:.3f} of {b['rate_bps'] / 1e6:g} Mbit/s; Jain {summ['jain']:.4f}")
    assert 0.93 <= ratio <= 1.01, f"achieved {b['achieved_bps'] / 1e6:.3f} of {b['rate_bps'] / 1e6} Mbit/s"
    header = (1448 + 66) / 1448  # wire bytes per payload byte of a full-size segment with timestamps
    for f in summ["flows"]:
        r = f["throughput_bps"] / f["iperf_goodput_bps"] / header
        print(
            f"{f['id']}: in-network {f['throughput_bps'] / 1e6:.3f} Mbit/s, iperf3 {f['iperf_goodput_bps'] / 1e6:.3f}"
            f" Mbit/s, ratio after headers {r:.4f}; random {f['random_drops']}, queue {f['queue_drops']}"
        )
        assert 0.98 <= r <= 1.02, f"{f['id']}: in-network / iperf3 after header accounting = {r:.4f}"
    n, k = b["wire_packets"], b["random_drops"]
    lo, hi = loss_interval(n, b["per"])
    assert lo <= k <= hi, f"{k} random drops of {n} packets, interval [{lo}, {hi}]"
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    assert manifest["bmv2"]["queue_rate_pps"] == queue_rate_pps(20_000_000, 1500)
    assert not _pids("simple_switch_grpc"), "simple_switch_grpc left running after the run"


def _bmv2_demo(tmp_path: Path) -> Path:
    """experiments/demo.toml on bmv2 at 20 Mbit/s, as a file for `cclab run`."""
    text = (REPO / "experiments" / "demo.toml").read_text()
    for old, new in (('dataplane = "kernel"', 'dataplane = "bmv2"'), ("rate_mbps = 100", "rate_mbps = 20")):
        assert old in text, f"demo.toml no longer has {old!r}"
        text = text.replace(old, new)
    path = tmp_path / "demo-bmv2.toml"
    path.write_text(text)
    return path


def _start(spec_path: Path, results: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen(
        [*CCLAB, "run", str(spec_path), "--no-live", "--results", str(results)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        runs = list(results.glob("demo-*"))
        if runs and (runs[0] / "iperf").exists() and _pids("simple_switch_grpc"):
            return proc, runs[0]
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the bmv2 run did not start in 30 s")


@pytest.mark.usefixtures("clean_host")
def test_sigint_stops_the_switch_and_marks_incomplete(tmp_path: Path) -> None:
    """Ctrl-C during a bmv2 run: the switch and everything else is gone, the run is marked incomplete."""
    proc, run_dir = _start(_bmv2_demo(tmp_path), tmp_path / "r")
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert not _pids("simple_switch_grpc"), "simple_switch_grpc survived Ctrl-C"
    assert leftovers() == [], "left behind after SIGINT"
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["complete"] is False and "interrupted" in s["reason"], s["reason"]
    assert (run_dir / "timeseries.csv").stat().st_size > 100, "measurements before the interrupt were lost"


@pytest.mark.usefixtures("clean_host")
def test_clean_removes_a_switch_a_killed_run_left(tmp_path: Path) -> None:
    """SIGKILL leaves simple_switch_grpc running; `cclab clean` ends it and removes its socket and pidfile."""
    proc, _run_dir = _start(_bmv2_demo(tmp_path), tmp_path / "r")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert _pids("simple_switch_grpc"), "a SIGKILLed run left no switch: this test would not notice a broken clean"
    clean = subprocess.run([*CCLAB, "clean"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert clean.returncode == 0, clean.stderr
    assert not _pids("simple_switch_grpc"), f"cclab clean left simple_switch_grpc running: {clean.stdout}"
    assert not [p for p in Path("/run/cclab").glob("bmv2-*") if p.suffix in (".sock", ".pid")]
    assert leftovers() == [], f"cclab clean left: {leftovers()}"

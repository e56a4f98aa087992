"""The fpga-sim target: the Verilated FPGA element in the loop (fpga/sim/, controller/dataplane/fpgasim.py).

Without root: the register arithmetic, the spec's refusals, the refusal where
the harness is not built, and the harness's own bench (simulated cycles per
second).  As root (marker fpga): a real Mininet run of a dumbbell whose
bottleneck is the element, with its delay from the RTL delay line.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import tomli_w

from controller import spec
from controller.dataplane import DataPlaneError, fpgasim
from controller.experiment import preflight
from tests.conftest import CCLAB, leftovers, missing_capability, pids

REPO = Path(__file__).resolve().parents[1]
HARNESS_MISSING = fpgasim.missing()
needs_harness = pytest.mark.skipif(HARNESS_MISSING is not None, reason=f"{HARNESS_MISSING}")


def _raw(**link: object) -> dict[str, object]:
    return {
        "name": "fpga",
        "duration_s": 6,
        "dataplane": "fpga-sim",
        "seed": 2,
        "topology": {"kind": "dumbbell", "pairs": 2},
        "bottleneck": {"rate_mbps": 20, "queue_pkts": 100, "delay_ms": 10},
        "links": {"l1": {"both": True, **link}},
        "flows": [
            {"algo": "cubic", "src": "h1", "dst": "r1"},
            {"algo": "reno", "src": "h2", "dst": "r2"},
        ],
    }


def test_rate_register_is_bytes_per_cycle_in_q8_24() -> None:
    assert fpgasim.rate_q824(20_000_000, 10_000) == (20_000_000 << 24) // (8 * 10_000_000)  # 0.25 B/cycle
    assert fpgasim.rate_q824(640_000_000, 10_000) == 8 << 24  # a 64-bit line at 10 MHz
    with pytest.raises(DataPlaneError, match=r"rate_mbps = 3e-06: the element at 10000 kHz shapes 5 \.\. "):
        fpgasim.rate_q824(3, 10_000)
    with pytest.raises(DataPlaneError, match="rate_mbps = 30000"):
        fpgasim.rate_q824(30_000_000_000, 10_000)


def test_delay_is_whole_cycles_of_the_element_clock() -> None:
    assert fpgasim.delay_cycles(10.0, 10_000) == 100_000
    assert fpgasim.delay_cycles(0.00005, 10_000) == 0
    assert fpgasim.delay_cycles(0.0001, 10_000) == 1


def test_spec_takes_fpga_sim_with_both_directions_and_refuses_what_the_element_lacks() -> None:
    s = spec.parse(_raw())
    assert s.dataplane == "fpga-sim"
    assert preflight.delay_element_links(s.graph, "fpga-sim") == [], "the element delays: no delay element"
    with pytest.raises(spec.SpecError, match=r"link l1 \(s1-s2\)\.both = False: fpga-sim delays inside the element"):
        spec.parse(_raw(both=False))
    with pytest.raises(spec.SpecError, match=r"jitter_ms = 1\.0: the FPGA element's delay line has no jitter"):
        spec.parse(_raw(jitter_ms=1))


def test_unbuilt_harness_is_refused_in_one_line_before_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fpgasim, "BINARY", REPO / "build" / "nowhere" / "cclab-fpga-sim")
    with pytest.raises(preflight.RunError) as err:
        preflight.preflight(spec.parse(_raw()))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("dataplane = 'fpga-sim' cannot run here: ") and "run `make build`" in msg


@pytest.mark.fpga
@needs_harness
def test_harness_bench_simulates_millions_of_cycles_per_second() -> None:
    """The model carries back-to-back full-size frames at line rate (8 bytes a cycle, the shaper off)."""
    cycles = 2_000_000
    out = subprocess.run([str(fpgasim.BINARY), "--bench", str(cycles)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["cycles"] == cycles
    # 1514 bytes are 190 beats; the queue and the delay line add a few cycles per frame at most
    assert cycles // 190 * 0.95 <= got["frames_out"] <= cycles // 190
    assert got["cycles_per_s"] > 1e6, got


@pytest.mark.fpga
@needs_harness
def test_harness_usage_errors_are_one_line() -> None:
    out = subprocess.run([str(fpgasim.BINARY), "--bench", "-5"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert out.stderr.strip() == "cclab-fpga-sim: --bench -5: want a non-negative integer"


ROOT_MISSING = missing_capability()


def in_the_loop(test: Callable[..., None]) -> Callable[..., None]:
    """Marks of a test on the element in a real network: root and the fpga tier, skipped with the reason."""
    for mark in (pytest.mark.skipif(ROOT_MISSING is not None, reason=f"{ROOT_MISSING}"), needs_harness,
                 pytest.mark.fpga, pytest.mark.root):  # fmt: skip
        test = mark(test)
    return test


@in_the_loop
def test_run_on_the_element_in_the_loop(tmp_path: Path) -> None:
    """A dumbbell at 20 Mbit/s, 10 ms each way from the RTL delay line: flows complete, the results come from
    the RTL's counters, and the base RTT is the element's 2 x 10 ms."""
    from controller.experiment import runner

    out = runner.run(spec.parse(_raw()), runner.RunOptions(results_root=tmp_path, plots=False))
    s = out.summary
    assert s["complete"] is True, s.get("reason")
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    el = manifest["fpga-sim"]
    assert el["target"] == "fpga-sim" and el["delay_cycles"] == 10 * el["clock_khz"]
    assert s["bottleneck"]["delay_applied"] is True and s["delay_element"] is None, "the element delays, nothing else"
    b = s["bottleneck"]
    ratio = b["achieved_bps"] / b["rate_bps"]
    assert 0.85 <= ratio <= 1.02, f"achieved {b['achieved_bps'] / 1e6:.2f} of {b['rate_bps'] / 1e6} Mbit/s"
    for f in s["flows"]:
        assert f["bytes"] > 0 and f["packets"] > 0, f"{f['id']}: no bytes counted by the RTL"
        r = f["throughput_bps"] / f["iperf_goodput_bps"]
        assert 0.95 <= r <= 1.10, f"{f['id']}: in-network {f['throughput_bps']:.0f} vs iperf3 {f['iperf_goodput_bps']}"
        assert 19.9 <= f["min_rtt_ms"] <= 23.0, f"{f['id']}: min RTT {f['min_rtt_ms']} ms, want 2 x 10 ms"
    rows = (out.run_dir / "flows.csv").read_text().splitlines()
    assert len(rows) == 1 + len(s["flows"])


def _start_run(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """`cclab run` of the fpga spec in a process; returns once the harnesses run and traffic flows."""
    spec_file = tmp_path / "fpga.toml"
    spec_file.write_text(tomli_w.dumps(_raw()))
    results = tmp_path / "r"
    proc = subprocess.Popen(
        [*CCLAB, "run", str(spec_file), "--no-live", "--no-plots", "--results", str(results)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (list(results.glob("fpga-*/iperf")) and len(pids(fpgasim.HARNESS)) == 2):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run did not start in time"
        time.sleep(0.05)
    return proc, next(results.glob("fpga-*"))


@in_the_loop
@pytest.mark.usefixtures("clean_host")
def test_sigint_stops_the_harnesses_and_leaves_nothing(tmp_path: Path) -> None:
    proc, run_dir = _start_run(tmp_path)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert not pids(fpgasim.HARNESS), "a harness outlived its run"
    assert leftovers() == [], "left behind after SIGINT"
    assert (run_dir / "INCOMPLETE").exists()


@in_the_loop
@pytest.mark.usefixtures("clean_host")
def test_clean_removes_what_a_killed_run_left(tmp_path: Path) -> None:
    """A SIGKILLed controller: its harnesses stop by themselves (the parent-death signal, removing their
    sockets); the capture pairs, the steering program and its pins stay until `cclab clean`."""
    proc, _run_dir = _start_run(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    left = leftovers()
    assert any(x.startswith("device cclabd") for x in left), f"no capture pair left to clean: {left}"
    assert any(x.startswith("bpf pins") and "-fpga" in x for x in left), f"no pins left to clean: {left}"
    out = subprocess.run([*CCLAB, "clean"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not pids(fpgasim.HARNESS)
    assert leftovers() == [], f"cclab clean left: {leftovers()}"


@in_the_loop
def test_driver_walks_the_register_map_of_the_real_harness(tmp_path: Path) -> None:
    """The register driver against the Verilated element: the block list, the clock, a write read back, a
    64-bit counter, the harness's own counters (on a veth pair of its own: no frames sent)."""
    from controller.dataplane import delayline
    from controller.dataplane import fpgaregs as fr

    a, b = "cclabd0a", "cclabd0b"  # the capture pairs' pattern: `cclab clean` removes them
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    proc = None
    try:
        for dev in (a, b):
            subprocess.run(["ip", "link", "set", dev, "up"], check=True)
        sock = tmp_path / "regs.sock"
        proc = delayline.start([str(fpgasim.BINARY), "--rx", b, "--tx", a, "--socket", str(sock)])
        assert delayline.read_line(proc, 10) == {"ready": True, "clock_khz": 2500}
        el = fr.Element(fr.HarnessTransport(sock))
        blocks = el.discover()
        assert [blocks[t].base for t in sorted(blocks)] == [0x100 * i for i in range(7)]
        assert all(blk.version == 0x00010000 for blk in blocks.values())
        assert el.read(fr.ELEMENT, fpgasim.CLK_KHZ) == 2500
        el.write(fr.DELAY, fpgasim.DELAY_CYCLES, 12345)
        assert el.read(fr.DELAY, fpgasim.DELAY_CYCLES) == 12345
        assert el.read64(0x1000 + fpgasim.COUNTERS) == 0
        with pytest.raises(fr.RegisterError, match="status -22"):
            el.io.read32(0x10000)
        assert isinstance(el.io, fr.HarnessTransport)
        stats = el.io.stats()
        assert stats["reg_writes"] == 1 and stats["reg_reads"] >= 22 and stats["rx_frames"] == 0
        el.close()
    finally:
        if proc is not None:
            last = delayline.stop(proc)
            assert last is not None and last["cycles"] > 0
        subprocess.run(["ip", "link", "del", a], check=False)

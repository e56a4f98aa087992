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
from typing import Any

import pytest
import tomli_w

from controller import spec
from controller.dataplane import DataPlaneError, fpgasim
from controller.experiment import preflight
from controller.network import fpga
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


def test_specs_are_checked_against_the_harness_build_of_the_makefile() -> None:
    """The figures a spec is judged by are the Makefile's -G flags (which setup reads back from the element)."""
    make = (REPO / "Makefile").read_text()
    for name, value in (("KHZ", fpga.CLOCK_KHZ), ("Q_ADDR_W", fpga.QUEUE_ADDR_W),
                        ("DL_ADDR_W", fpga.DELAY_ADDR_W)):  # fmt: skip
        assert f"\nFPGA_SIM_{name} := {value}\n" in make.replace("  :=", " :="), f"FPGA_SIM_{name} is not {value}"
    assert fpga.queue_capacity() == (1379, 1379 * 1514)  # 2^18 beats of 8 bytes, 190 beats a frame


@pytest.mark.parametrize(
    ("link", "refusal"),
    [
        ({"queue_pkts": 1380}, r"queue_pkts = 1380: the FPGA element's queue memory holds 1379 full-size frames"),
        ({"queue_bytes": 2_100_000}, r"queue_bytes = 2100000: the FPGA element's queue memory holds 2087806 bytes"),
        ({"rate_mbps": 81}, r"rate_mbps = 81\.0: the FPGA element carries 80 Mbit/s at most \(64 bit at 1\.25 MHz\)"),
        (
            {"rate_mbps": 80, "delay_ms": 900},
            r"delay_ms = 900\.0: the FPGA element's delay line holds 1048576 beats of 8 bytes: 835 ms at most at 80",
        ),
        (
            {"schedule": [{"at_s": 1, "rate_mbps": 10}, {"at_s": 2, "rate_mbps": 90}]},
            r"schedule\[1\]\.rate_mbps = 90\.0: the FPGA element carries 80 Mbit/s",
        ),
    ],
)
def test_a_link_larger_than_the_element_is_refused_in_one_line(link: dict[str, object], refusal: str) -> None:
    """Rate above the element's line, a queue above its memory, a delay line too short: refused by the parser,
    naming the field, the value and the limit, before anything is built (the element would bind instead)."""
    raw = _raw()
    bneck = raw["bottleneck"]
    assert isinstance(bneck, dict)
    bneck.update(link)
    if "queue_bytes" in link:
        del bneck["queue_pkts"]
    with pytest.raises(spec.SpecError, match=r"^spec error: link l1 \(s1-s2\)\." + refusal) as err:
        spec.parse(raw)
    assert "\n" not in str(err.value)
    ok = _raw()
    assert isinstance(ok["bottleneck"], dict)
    ok["bottleneck"].update(queue_pkts=1379, rate_mbps=80, delay_ms=800)
    assert spec.parse(ok).dataplane == "fpga-sim", "the element's largest settings"


def test_unbuilt_harness_is_refused_in_one_line_before_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fpgasim, "BINARY", REPO / "build" / "nowhere" / "cclab-fpga-sim")
    with pytest.raises(preflight.RunError) as err:
        preflight.preflight(spec.parse(_raw()))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("dataplane = 'fpga-sim' cannot run here: ") and "run `make build`" in msg


def test_final_account_sets_the_rtls_counters_beside_the_last_read() -> None:
    """The harness's last line becomes summary.json's element_stats: entries named, the link summed over them,
    the frames the RTL did not count, and what it counted after the controller's last read."""
    from controller.dataplane import FlowCounters, FlowKey, Snapshot

    key = FlowKey("10.0.1.1", "10.0.2.1", 40000, 5201, 6)
    flow, fallback = [1514, 1, 0, 0, 0, 0, 1514, 1], [120, 2, 0, 0, 60, 1, 180, 3]
    last = {"rx_frames": 6, "unfed": 1, "rtl": {"malformed": 1, "entries": [flow, [0] * 8, fallback]}}
    read = Snapshot(t=0.0, link=FlowCounters(1514, 1, 0, 0, 60, 1, 1574, 2))
    got = fpgasim.final_account(last, (key,), read)
    assert got["harness"] == {"rx_frames": 6, "unfed": 1}
    assert got["rtl"]["flows"] == [{"five_tuple": list(key), **dict(zip(fpgasim.COUNTER_FIELDS, flow))}]
    assert got["rtl"]["link"]["enq_pkts"] == 4 and got["rtl"]["link"]["fwd_bytes"] == 1634
    assert got["rx_frames_unaccounted"] == 0  # 4 offered + 1 malformed + 1 never fed in
    assert got["rtl_minus_last_read"] == {**dict.fromkeys(fpgasim.COUNTER_FIELDS, 0), "fwd_bytes": 120,
                                          "fwd_pkts": 2, "enq_bytes": 120, "enq_pkts": 2}  # fmt: skip
    assert fpgasim.final_account(None, (key,), read)["rtl"] is None


def test_backlog_is_the_queue_not_the_delay_line() -> None:
    """The fidelity check's backlog on fpga-sim is the element's queue (register 0x1C): the frames its delay
    line holds are counted offered and not yet forwarded, but they are on the link, not waiting (at 20 Mbit/s
    and 10 ms the ACKs' direction holds some 17 and looked backlogged at 0.02 of its rate)."""
    from controller.dataplane import FlowCounters, Snapshot

    in_flight = FlowCounters(enq_pkts=40, fwd_pkts=20, q_drop_pkts=1, rnd_drop_pkts=1)
    assert Snapshot(t=0.0, link=in_flight).backlog_pkts == 18, "counters alone: queue and delay line"
    assert fpgasim.ElementSnapshot(t=0.0, link=in_flight, queued_pkts=3).backlog_pkts == 3
    assert fpgasim.ElementSnapshot(t=0.0, link=in_flight).backlog_pkts == 0


def _demo_summary(dataplane: str, seed: int, jain: float, ratio: float, drops: int) -> dict[str, Any]:
    """A demo run's summary.json, the fields `cclab bench fpga --demo` reads: one flow whose in-network
    throughput after headers is `ratio` of iperf3's goodput, `drops` random drops against [2, 20]."""
    flow = {
        "id": "f1",
        "bytes": 1514 * 1000,
        "packets": 1000,
        "throughput_bps": 1514e3,
        "iperf_goodput_bps": 1448e3 / ratio,
    }
    checks = {"random_drops_in_99pct_interval": {"value": drops, "lo": 2, "hi": 20, "ok": 2 <= drops <= 20}}
    return {"dataplane": dataplane, "seed": seed, "complete": True, "jain": jain, "flows": [flow],
            "bottleneck": {"utilization": 0.99}, "fidelity": {"ok": True, "checks": checks}}  # fmt: skip


def test_bench_fpga_demo_judges_payload_loss_and_jains_intervals() -> None:
    """The done-when's figures: headers taken off the wire bytes (66 a frame), loss inside its interval, and
    whether the two targets' 95 % intervals of Jain's index overlap (Student's t over the runs)."""
    from controller.bench import fpga_element as fe

    runs = [fe.run_figures(_demo_summary("kernel", s, j, 1.0, 5)) for s, j in ((1, 0.95), (2, 0.97), (3, 0.96))]
    runs += [fe.run_figures(_demo_summary("fpga-sim", s, j, 1.01, 7)) for s, j in ((1, 0.96), (2, 0.98), (3, 0.97))]
    assert runs[0]["payload_over_goodput"]["f1"] == pytest.approx(1.0)
    got = fe.demo_figures(runs)
    k, f = got["targets"]["kernel"], got["targets"]["fpga-sim"]
    assert k["n"] == f["n"] == 3 and k["jain_mean"] == pytest.approx(0.96)
    assert k["jain_ci95"][0] == pytest.approx(0.96 - 4.303 * 0.01 / 3**0.5, abs=1e-4)  # t(0.975, 2) = 4.303
    assert got["jain_intervals_overlap"] is True and f["payload_within_2pct"] and f["loss_ok_runs"] == 3
    far = [fe.run_figures(_demo_summary("fpga-sim", s, j, 1.03, 25)) for s, j in ((1, 0.80), (2, 0.81), (3, 0.80))]
    got = fe.demo_figures(runs[:3] + far)
    assert got["jain_intervals_overlap"] is False
    assert not got["targets"]["fpga-sim"]["payload_within_2pct"] and got["targets"]["fpga-sim"]["loss_ok_runs"] == 0


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
        assert f["min_rtt_ms"] >= 19.9, f"{f['id']}: min RTT {f['min_rtt_ms']} ms, below the element's 2 x 10 ms"
    # from above only the path's shortest, as the fidelity rule has it: a flow that starts after the other has
    # built a queue deeper than the path's BDP (100 packets over 33 here) may never sample the bare path
    shortest = min(f["min_rtt_ms"] for f in s["flows"])
    assert shortest <= 23.0, f"the flows' shortest RTT {shortest} ms, want 2 x 10 ms"
    rows = (out.run_dir / "flows.csv").read_text().splitlines()
    assert len(rows) == 1 + len(s["flows"])
    _check_element_stats(s)
    fid = s["fidelity"]
    assert fid["ok"] is True, f"fidelity: {fid['notes']}; the element's lag: {_lag(s)}"


def _lag(s: dict[str, Any]) -> dict[str, Any]:
    """Each direction's harness lag figures (how far the model fell behind the wall clock)."""
    keys = ("max_lag_cycles", "lag_resets", "lag_lost_cycles", "late_episodes")
    return {lid: {k: st["harness"][k] for k in keys} for lid, st in s["element_stats"].items()}


def _check_element_stats(s: dict[str, Any]) -> None:
    """summary.json's element_stats: every emulated direction's harness counters, the RTL's own as it stopped,
    and the controller's last read beside them; no frame lost between the harness and the RTL."""
    stats = s["element_stats"]
    assert sorted(stats) == sorted(lk["id"] for lk in s["links"]), f"element_stats for {sorted(stats)}"
    for lid, st in stats.items():
        rtl, h = st["rtl"], st["harness"]
        assert rtl is not None and h is not None, f"{lid}: {st}"
        assert st["rx_frames_unaccounted"] == 0, f"{lid}: harness took {h['rx_frames']}, the RTL counted {rtl}"
        assert rtl["malformed"] == 0 and h["oversize"] == 0, f"{lid}: {rtl['malformed']} malformed"
        late = st["rtl_minus_last_read"]
        assert all(v >= 0 for v in late.values()), f"{lid}: the RTL counted less than was read: {late}"
        assert late["fwd_pkts"] <= 20, f"{lid}: {late['fwd_pkts']} frames forwarded after the last read"
    forward = stats[s["links"][0]["id"]]["rtl"]
    for f, entry in zip(s["flows"], forward["flows"], strict=True):
        assert entry["five_tuple"][:4] == f["five_tuple"][:4], (entry, f)
        assert 0 <= entry["fwd_bytes"] - f["bytes"] <= 20 * 1514, f"{f['id']}: RTL {entry} vs read {f['bytes']}"


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
            # as the capture pairs are made: without IPv6 the kernel sends nothing of its own (MLD reports) to b
            subprocess.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{dev}.disable_ipv6=1"], check=True)
            subprocess.run(["ip", "link", "set", dev, "up"], check=True)
        sock = tmp_path / "regs.sock"
        proc = delayline.start([str(fpgasim.BINARY), "--rx", b, "--tx", a, "--socket", str(sock)])
        assert delayline.read_line(proc, 10) == {"ready": True, "clock_khz": fpga.CLOCK_KHZ}
        el = fr.Element(fr.HarnessTransport(sock))
        blocks = el.discover()
        assert [blocks[t].base for t in sorted(blocks)] == [0x100 * i for i in range(7)]
        assert all(blk.version == 0x00010000 for blk in blocks.values())
        assert el.read(fr.ELEMENT, fpgasim.CLK_KHZ) == fpga.CLOCK_KHZ
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
        last = delayline.stop(proc) if proc is not None else None
        subprocess.run(["ip", "link", "del", a], check=False)  # before any assert: a left pair fails later tests
    assert last is not None and last["cycles"] > 0
    assert last["rtl"] == {"malformed": 0, "entries": [[0] * 8] * 9}, last["rtl"]
    assert last["unfed"] == 0 and last["rx_frames"] == 0

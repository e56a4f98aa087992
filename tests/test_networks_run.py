"""Real runs of networks past the dumbbell: a parking lot of three bottlenecks, on-off UDP cross traffic
and finite TCP transfers, measured at every emulated link (netns, veth, tc, BPF, iperf3, Mininet)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from controller import spec
from controller.experiment import preflight, runner
from controller.spec import tomllib
from tests.conftest import REPO

pytestmark = [pytest.mark.root, pytest.mark.slow]

QUEUE_PKTS = 50
BMV2_MISSING = [t for t in ("p4c-bm2-ss", *preflight.BMV2_TOOLS) if shutil.which(t) is None]


def _run(text: str, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    s = spec.parse(tomllib.loads(text))
    out = runner.run(s, runner.RunOptions(results_root=tmp_path, plots=False))
    assert out.summary["complete"], out.summary["reason"]
    return out.run_dir, out.summary


def _check_parking_lot(summ: dict[str, Any], queue_pkts: int) -> None:
    """The long flow's packets at each link equal those at the link before less that link's drops; each
    bottleneck has its own Jain's index over the two flows crossing it; the long flow ends below every cross flow."""
    links = {lk["id"]: lk for lk in summ["links"]}
    assert list(links) == ["l1", "l2", "l3"]
    flows = {f["id"]: f for f in summ["flows"]}
    assert flows["f1"]["path"] == ["l1", "l2", "l3"] and flows["f3"]["path"] == ["l2"]
    for before, here in (("l1", "l2"), ("l2", "l3")):
        a, b = links[before]["flows"]["f1"], links[here]["flows"]["f1"]
        assert 0 <= a["packets"] - b["offered_packets"] <= 2, f"{before} forwarded {a}, {here} was offered {b}"
        lost = b["random_drops"] + b["queue_drops"]
        left = b["offered_packets"] - b["packets"] - lost
        assert 0 <= left <= queue_pkts + 2, (
            f"at {here}: offered {b['offered_packets']}, forwarded {b['packets']}, dropped {lost}: {left} unaccounted"
        )
    for lid, lk in links.items():
        assert lk["jain_flows"] == ["f1", f"f{int(lid[1:]) + 1}"], lk
        assert lk["jain"] is not None and 0.5 <= lk["jain"] < 1.0, f"{lid}: Jain {lk['jain']}"
        assert lk["utilization"] is not None and lk["utilization"] > 0.9, f"{lid} utilization {lk['utilization']}"
    long = flows["f1"]["throughput_bps"]
    for fid in ("f2", "f3", "f4"):
        assert long < flows[fid]["throughput_bps"], f"long flow {long:.0f} bit/s, {fid} {flows[fid]}"
    assert flows["f1"]["bytes"] == links["l3"]["flows"]["f1"]["bytes"], "a flow's bytes are what left its last link"


def _parking_lot(dataplane: str, rate_mbps: int) -> str:
    text = (REPO / "experiments" / "parking_lot.toml").read_text()
    for old, new in (
        ("duration_s = 15", "duration_s = 10"),
        ('dataplane = "kernel"', f'dataplane = "{dataplane}"'),
        ("rate_mbps = 20", f"rate_mbps = {rate_mbps}"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    return text


@pytest.mark.usefixtures("clean_host")
def test_parking_lot_long_flow_counted_at_every_bottleneck_and_below_each_cross_flow(tmp_path: Path) -> None:
    """experiments/parking_lot.toml on the kernel target, 10 s (see _check_parking_lot)."""
    _dir, summ = _run(_parking_lot("kernel", 20), tmp_path)
    _check_parking_lot(summ, QUEUE_PKTS)


@pytest.mark.bmv2
@pytest.mark.skipif(bool(BMV2_MISSING), reason=f"{', '.join(BMV2_MISSING)} not on PATH (install p4c and BMv2 with PI)")
@pytest.mark.usefixtures("clean_host")
def test_parking_lot_on_bmv2(tmp_path: Path) -> None:
    """The same parking lot on bmv2 (one two-port BMv2 switch per bottleneck), 10 Mbit/s, 10 s."""
    _dir, summ = _run(_parking_lot("bmv2", 10), tmp_path)
    assert summ["dataplane"] == "bmv2"
    _check_parking_lot(summ, QUEUE_PKTS)


UDP_ONOFF = """
name = "udp"
duration_s = 12
[topology]
pairs = 3
[bottleneck]
rate_mbps = 20
queue_pkts = 50
[[flows]]
algo = "reno"
src = "h1"
dst = "r1"
[[flows]]
kind = "udp_onoff"
src = "h2"
dst = "r2"
rate_mbps = 8
on_s = 2
off_s = 2
[[flows]]
algo = "cubic"
src = "h3"
dst = "r3"
start_s = 1
bytes = 3000000
"""


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.usefixtures("clean_host")
def test_udp_onoff_offers_its_rate_and_tcp_yields_and_recovers(tmp_path: Path) -> None:
    """On-off UDP (8 Mbit/s, 2 s on / 2 s off) beside a reno flow on a 20 Mbit/s link: in each on period the
    link is offered the UDP rate within 2 % and sees every datagram the sender sent; a finite transfer records
    its completion time; once it has ended, the reno flow's rate drops while UDP is on and recovers while it is off.
    The reno flow is judged only after the transfer, which shares the first off period with it for as long as it
    lasts (2.8-3.4 s from its start at 1 s in six runs here): judged beside it, reno's off-period rate
    followed the transfer's length, not the UDP's."""
    run_dir, summ = _run(UDP_ONOFF, tmp_path)
    sent = (run_dir / "iperf" / "f2.send.json").read_text().splitlines()[-1]
    report = json.loads(sent)
    periods = report["periods"]
    assert len(periods) == 3 and report["seed"] is not None, report
    offered = summ["links"][0]["flows"]["f2"]["offered_packets"]
    assert offered == report["packets"], f"sender sent {report['packets']} datagrams, the link saw {offered}"
    rows = [r for r in _rows(run_dir / "links.csv") if r["flow"] == "f2"]
    rate = 8e6
    t_prev = 0.0
    windows: list[tuple[float, float, float]] = []  # (t_end, dt, offered bytes)
    for r in rows:
        t = float(r["t_s"])
        windows.append((t, t - t_prev, float(r["offered_bytes"])))
        t_prev = t
    for start, end, _n, _bytes in periods:
        inner = [(dt, b) for t, dt, b in windows if start + 0.3 <= t - dt and t <= end - 0.1]
        secs = sum(dt for dt, _ in inner)
        got = sum(b for _, b in inner) * 8 / secs
        assert abs(got / rate - 1) <= 0.02, f"on period {start:.1f}-{end:.1f} s: offered {got / 1e6:.3f} Mbit/s"
    fin = next(f for f in summ["flows"] if f["id"] == "f3")
    assert fin["completion_s"] is not None and 0 < fin["completion_s"] < 11, fin
    assert fin["bytes"] >= 3_000_000, f"a 3 MB transfer put {fin['bytes']} bytes through the link"
    alone = fin["start_s"] + fin["completion_s"] + 0.5
    tcp = [(float(r["t_s"]), float(r["rate_bps"])) for r in _rows(run_dir / "timeseries.csv") if r["flow"] == "f1"]

    def mean_rate(on: bool) -> float:
        xs = []
        for t, v in tcp:
            inside = any(s + 0.5 <= t <= e for s, e, _n, _b in periods)
            gap = any(e + 0.5 <= t <= e + 2 for _s, e, _n, _b in periods) and t < 11.5
            if t >= alone and ((on and inside) or (not on and gap)):
                xs.append(v)
        assert xs, f"no {'on' if on else 'off'} period of UDP after the transfer ended at {alone - 0.5:.1f} s"
        return sum(xs) / len(xs)

    on, off = mean_rate(True), mean_rate(False)
    assert off - on >= 0.75 * rate, f"reno {on / 1e6:.2f} Mbit/s while UDP is on, {off / 1e6:.2f} while it is off"


MULTIPATH = """
name = "mptcp"
duration_s = 12
dataplane = "kernel"
seed = 3
[topology]
kind = "multipath"
background = [1, 1]
[bottleneck]
rate_mbps = 10
queue_pkts = 50
[links.l1]
rate_mbps = 10
queue_pkts = 50
delay_ms = 10
[links.l2]
rate_mbps = 6
queue_pkts = 50
delay_ms = 40
[[flows]]
kind = "mptcp"
algo = "mptcpw"
src = "h0"
dst = "r0"
[[flows]]
algo = "reno"
src = "h1"
dst = "r1"
"""


@pytest.mark.usefixtures("clean_host")
def test_mptcp_over_two_paths_each_subflow_counted_at_its_own_bottleneck(tmp_path: Path) -> None:
    """One mptcpw connection over paths of 10 Mbit/s, 20 ms RTT and 6 Mbit/s, 80 ms RTT (the delays by this
    host's delay element), a reno flow beside it on path 1: each subflow crosses and is counted at its own
    bottleneck only; together they carry what the receiver got; the coupled eBPF form ran, as its own state shows
    (one MPTCP token on both subflows, each coupling two)."""
    run_dir, summ = _run(MULTIPATH, tmp_path)
    links = {lk["id"]: lk for lk in summ["links"]}
    flows = {f["id"]: f for f in summ["flows"]}
    assert set(flows) == {"f1.1", "f1.2", "f2"}
    assert set(links["l1"]["flows"]) == {"f1.1", "f2"} and set(links["l2"]["flows"]) == {"f1.2"}
    one, two = flows["f1.1"], flows["f1.2"]
    assert (one["path"], two["path"], one["flow"], two["flow"]) == (["l1"], ["l2"], "f1", "f1")
    for sub in (one, two):
        assert sub["bytes"] > 1_000_000, f"subflow {sub['id']} carried {sub['bytes']} bytes"
    assert two["throughput_bps"] < 6.2e6, two
    [conn] = summ["mptcp"]
    assert conn["subflows"] == ["f1.1", "f1.2"] and conn["bytes"] == one["bytes"] + two["bytes"]
    assert conn["coupling"]["coupled"], conn["coupling"]
    checks = summ["fidelity"]["checks"]
    assert checks["f1.wire_over_received_bytes"]["ok"], checks["f1.wire_over_received_bytes"]
    assert checks["f1.subflows_carrying_data"]["value"] == 2, checks["f1.subflows_carrying_data"]
    # the slack for bytes sent twice: the subflows' TCP retransmissions and the connection's own, as its sender's
    # namespace counted them
    tcp: dict[str, int] = {}
    with (run_dir / "cwnd.csv").open() as f:
        for r in csv.DictReader(f):
            if r["flow"] in ("f1.1", "f1.2"):
                tcp[r["flow"]] = max(tcp.get(r["flow"], 0), int(r["total_retrans"] or 0))
    segs = sum(tcp.values()) + conn["sender_mptcp_counters"].get("MPTCPRetrans", 0)
    assert conn["sender_mptcp_counters"]["MPJoinSynAckRx"] >= 1, conn["sender_mptcp_counters"]
    assert checks["f1.wire_over_received_bytes"]["note"].startswith(f"{segs} retransmitted" if segs else ""), segs
    for sid, base in (("f1.1", 20.0), ("f1.2", 80.0)):
        assert flows[sid]["base_rtt_ms"] == base and checks[f"{sid}.base_rtt_ms"]["ok"], checks[f"{sid}.base_rtt_ms"]
    assert summ["jain_flows"] == ["f1", "f2"], "whole-run fairness counts the connection once"


ONE_PATH = """
name = "mptcp_one_path"
duration_s = 12
dataplane = "kernel"
seed = 5
[topology]
kind = "dumbbell"
pairs = 2
[bottleneck]
rate_mbps = 10
queue_pkts = 50
delay_ms = 10
[[flows]]
kind = "mptcp"
algo = "mptcpw"
src = "h1"
dst = "r1"
mss_bytes = 1000
[[flows]]
algo = "reno"
src = "h2"
dst = "r2"
"""


@pytest.mark.usefixtures("clean_host")
def test_mptcp_over_one_path_two_subflows_counted_at_the_shared_bottleneck(tmp_path: Path) -> None:
    """An mptcpw connection between hosts that share one path (the shared-bottleneck setting): the second
    subflow joins a second port its receiver announced, both cross l1 beside the reno flow, each counted under
    its own 5-tuple, and the coupled form couples the two (one MPTCP token, each coupling two). Its segments are
    the MPTCPW paper's 1000 bytes: more of each frame is header than with full-size segments, and the check of its
    wire bytes over what its receiver read allows for it."""
    from controller.experiment.build import MPTCP_JOIN_PORT_BASE
    from controller.results.summary import MPTCP_OPTION_BYTES, wire_over_payload_max

    _dir, summ = _run(ONE_PATH, tmp_path)
    flows = {f["id"]: f for f in summ["flows"]}
    assert set(flows) == {"f1.1", "f1.2", "f2"}
    assert all(f["path"] == ["l1"] for f in flows.values()), flows
    [link] = summ["links"]
    assert set(link["flows"]) == {"f1.1", "f1.2", "f2"}
    one, two = flows["f1.1"]["five_tuple"], flows["f1.2"]["five_tuple"]
    assert one[:2] == two[:2] and two[3] == MPTCP_JOIN_PORT_BASE + 1, (one, two)
    for sid in ("f1.1", "f1.2"):
        assert flows[sid]["bytes"] > 500_000, f"subflow {sid} carried {flows[sid]['bytes']} bytes"
    [conn] = summ["mptcp"]
    assert conn["bytes"] == flows["f1.1"]["bytes"] + flows["f1.2"]["bytes"]
    assert conn["coupling"]["coupled"], conn["coupling"]
    checks = summ["fidelity"]["checks"]
    wire = checks["f1.wire_over_received_bytes"]
    assert wire["ok"] and wire["value"] > wire_over_payload_max(1460, MPTCP_OPTION_BYTES), wire
    assert link["utilization"] > 0.9, link["utilization"]


@pytest.mark.usefixtures("clean_host")
@pytest.mark.skipif(shutil.which("mn") is None, reason="Mininet's mn is not installed (make deps)")
@pytest.mark.parametrize("topo", ["dumbbell,2", "parking_lot,2", "multipath,0,0"])
def test_presets_build_by_hand_with_mn_custom(topo: str) -> None:
    """`sudo mn --custom mininet/topologies.py --topo <preset>,...`: every host reaches every other."""
    import subprocess

    proc = subprocess.run(
        ["mn", "--custom", str(REPO / "mininet" / "topologies.py"), "--topo", topo, "--switch", "cclabbr",
         "--host", "cclabhost", "--controller", "none", "--test", "pingall"],
        capture_output=True, text=True, timeout=120, cwd="/tmp",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Results: 0% dropped" in out, out[-1500:]

"""The multipath baselines in real runs: LIA (RFC 6356) couples the two subflows of one MPTCP connection, and the
MPTCPW paper's unMPTCPW (Le, Hong, Huh, "Coordinated TCP Westwood Congestion Control for Multiple Paths over
Wireless Networks" §V) splits with (1/2)^2 so that each of its two subflows takes about half of what a single-path
TCPW flow beside it gets.

Both on the shared-bottleneck setting of the paper's §V-B (a dumbbell: the connection's two subflows and one
single-path flow cross one link; the second subflow joins a second port its receiver announces), through the real
runner (netns, veth, tc, BPF, Mininet), with the algorithms as eBPF struct_ops.
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path
from typing import Any

import pytest

from controller import spec
from controller.experiment import runner
from controller.spec import tomllib

pytestmark = [pytest.mark.root, pytest.mark.slow]

SHARED = """
name = "{name}"
duration_s = {duration_s}
dataplane = "kernel"
seed = 20121101
[topology]
kind = "dumbbell"
pairs = 2
[bottleneck]
rate_mbps = 10
queue_pkts = 50
delay_ms = 10
[[flows]]
kind = "mptcp"
algo = "{mp}"
src = "h1"
dst = "r1"
[[flows]]
algo = "{single}"
src = "h2"
dst = "r2"
"""
DURATION_S = 30
#: unMPTCPW: each subflow's throughput over the single-path TCPW flow's, the paper's "half" (Fig. 5(b)); the
#: test holds the mean of the two subflows' shares to it, within SPLIT_TOL, which still tells it from a subflow
#: without the split (about one flow's share, 1.0).  Measured here in 20 s runs, n = 10: subflows 0.45 to 0.88 of
#: the TCPW flow, their means 0.50 to 0.83 (drop-tail shares swing from run to run; one subflow took 0.71 in CI)
SPLIT_SHARE = 0.5
SPLIT_TOL = 0.35
#: cc_lia's alpha is Q16, each of its quotients rounded down: how far a sample may sit past a bound
Q16_SLACK = 1e-3
#: the share of cc_lia's late alpha samples (of about 290) that may lie outside [1/2, 1]: above 1 when the two
#: subflows' srtt samples are far apart.  Measured here in 30 s runs, n = 5: late alpha 0.500 to 0.965, none outside;
#: a CI run on 2026-12-05 read at least one outside (its value cut from the log)
OUTSIDE_SHARE = 0.05


def _run(tmp_path: Path, mp: str, single: str) -> tuple[Path, dict[str, Any]]:
    text = SHARED.format(name=f"shared_{mp}", duration_s=DURATION_S, mp=mp, single=single)
    out = runner.run(spec.parse(tomllib.loads(text)), runner.RunOptions(results_root=tmp_path, plots=False))
    assert out.summary["complete"], out.summary["reason"]
    return out.run_dir, out.summary


@pytest.mark.usefixtures("clean_host")
def test_lia_couples_two_subflows_beside_reno(tmp_path: Path) -> None:
    """cc_lia's two subflows find one MPTCP token and couple each other.  RFC 6356's alpha, W_total max(w_r / rtt_r^2)
    / (sum w_r / rtt_r)^2, is at least 1/2 for two subflows whatever their RTTs (Cauchy-Schwarz); for two of one RTT
    it is max(w) / W_total, at most 1, and two subflows through one queue share an RTT up to their srtt samples'
    spread, so alpha stays in [1/2, 1] but for an excursion above 1 when that spread is wide (a subflow's srtt
    sampled when the queue was empty, the other's when full: 20 against 80 ms here).  Each subflow's delta = alpha
    w_i / W_total is below 1 (its increase under Reno's).  Beside a reno flow the connection takes no more than about
    one flow's share (RFC 6356 §2, goal 2: do no harm), where two uncoupled Reno subflows would take two."""
    run_dir, summ = _run(tmp_path, "cc_lia", "reno")
    [conn] = summ["mptcp"]
    assert conn["coupling"]["coupled"], conn["coupling"]
    with open(run_dir / "ccstate.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["flow"] in ("f1.1", "f1.2") and int(r["subflows"] or 0) == 2]
    assert rows, "no coupled cc_lia state in ccstate.csv"
    alphas = [int(r["alpha_x65536"]) / 65536 for r in rows]
    deltas = [int(r["delta_x65536"]) / 65536 for r in rows]
    late = alphas[len(alphas) // 2 :]
    outside = [a for a in late if not 0.5 - Q16_SLACK <= a <= 1.0 + Q16_SLACK]
    print(f"\ncc_lia: {len(rows)} coupled samples, alpha median {statistics.median(late):.3f} "
          f"[{min(late):.3f}, {max(late):.3f}], {len(outside)} outside [1/2, 1], "
          f"delta median {statistics.median(deltas):.3f}")  # fmt: skip
    assert 0.5 <= statistics.median(late) <= 1.0, f"alpha's median {statistics.median(late)} outside [1/2, 1]"
    assert len(outside) <= OUTSIDE_SHARE * len(late), (
        f"alpha outside [1/2, 1] in {len(outside)} of {len(late)}: {outside[:10]}"
    )
    assert statistics.median(deltas) < 1.0, f"delta median {statistics.median(deltas)}: not coupled"
    flows = {f["id"]: f for f in summ["flows"]}
    ratio = conn["throughput_bps"] / flows["f2"]["throughput_bps"]
    print(f"cc_lia connection / reno: {ratio:.2f}")
    assert ratio < 1.6, f"the coupled connection took {ratio:.2f} times the reno flow's throughput"


@pytest.mark.usefixtures("clean_host")
def test_unmptcpw_each_subflow_takes_half_a_tcpw_flow(tmp_path: Path) -> None:
    """unMPTCPW, split (1/2)^2: beside one TCPW flow at a shared 10 Mbit/s bottleneck, each subflow's throughput
    is about half the TCPW flow's: their mean within SPLIT_TOL of it, so the connection takes about one flow's."""
    _dir, summ = _run(tmp_path, "unmptcpw", "tcpw")
    flows = {f["id"]: f for f in summ["flows"]}
    single = flows["f2"]["throughput_bps"]
    shares = {sid: flows[sid]["throughput_bps"] / single for sid in ("f1.1", "f1.2")}
    print(f"\nunmptcpw subflows / tcpw: {shares}, tcpw {single / 1e6:.2f} Mbit/s")
    mean = statistics.mean(shares.values())
    assert abs(mean - SPLIT_SHARE) <= SPLIT_TOL, f"subflows {shares} of the TCPW flow, mean {mean:.2f}, paper 0.5"

"""netem and cclab-delay side by side: experiments/delay_elements.toml through netem in the lab VM and through
cclab-delay on this host (a kernel without netem).

cclab-delay must keep each flow's minimum RTT no more than 0.5 ms under the spec's 80 ms, and the shortest of them
within 0.5 ms of it; netem in the lab VM within 3 ms, since the VM runs under software emulation here, where
netem's timers fire late (measured 0.31-2.13 ms over the spec in single runs); and each algorithm (reno
and tcpwplus, each alone on the link for 50 s in turn) a throughput over its last 20 s within 3 % of the
other run's.  The first 30 s are left out of that comparison: how far slow start overshoots the queue decides
how long the first recovery and the climb back take (CI: tcpwplus at cwnd 582 with cclab-delay, 1058 with
netem, then 13 and 12 packets for 3-5 s), and that is a few packets' timing, not the element.  Whole-flow
throughputs and the RTT samples' spread (tcp_info srtt, p10/p50/p90 per flow) are printed beside them.

Needs root, the lab VM (`make vm`) and a host kernel without netem (cclab-delay then delays on the host);
skips with the reason otherwise.
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path
from typing import Any

import pytest

from controller import spec, system
from controller.results import window
from tests.conftest import REPO, Run, cclab_run

pytestmark = [pytest.mark.root, pytest.mark.slow]

SPEC = REPO / "experiments" / "delay_elements.toml"
OUT = REPO / "build" / "vm-test" / "results-delay-elements" / "cclab-delay"
BASE_RTT_MS = 80.0
#: each element's base-RTT tolerance: cclab-delay here; netem in a software-emulated VM (TCG lifts every RTT of
#: some boots by up to 2.1 ms: 80.0 to 82.13 ms measured on an 80 ms path)
BASE_RTT_TOL_MS = {"cclab-delay": 0.5, "netem": 3.0}
THROUGHPUT_TOL = 0.03
#: the part of each flow whose throughput is compared: from this many seconds after its start to its end
SETTLED_S = 30.0


def _srtt_ms(run_dir: Path) -> dict[str, list[float]]:
    """Each flow's tcp_info srtt samples (ms) while it had data in flight."""
    out: dict[str, list[float]] = {}
    with (run_dir / "cwnd.csv").open() as f:
        for row in csv.DictReader(f):
            if row["srtt_us"]:
                out.setdefault(row["flow"], []).append(int(row["srtt_us"]) / 1000)
    return out


def _settled_bps(run_dir: Path, summ: dict[str, Any], starts: dict[str, float]) -> dict[str, float]:
    """Each flow's in-network throughput (bit/s) from SETTLED_S after its start, as a report computes a flow's
    figure after a warm-up (controller.results.window): the bytes over the time between polls as stamped, so a
    VM's monitor that polls late or skips a poll on a busy host does not make the flow look slower."""
    out = {}
    for fid, start in starts.items():
        flows = window.windowed(run_dir, summ, start + SETTLED_S)["flows"]
        out[fid] = next((float(f["throughput_bps"]) for f in flows if f["id"] == fid), 0.0)
    return out


def _spread(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=10)
    return f"p10/p50/p90 {q[0]:.1f}/{statistics.median(xs):.1f}/{q[8]:.1f} ms (n={len(xs)})"


def test_netem_and_cclab_delay_agree(delay_elements_in_vm: Run) -> None:
    if system.has_netem():
        pytest.skip("this kernel has netem, so `auto` picks netem on the host too: nothing to compare")
    here = cclab_run(SPEC, OUT, vm=False)
    runs = {
        "netem": (delay_elements_in_vm.run_dir, delay_elements_in_vm.summary),
        "cclab-delay": (here.run_dir, here.summary),
    }
    for element, (_run_dir, summ) in runs.items():
        assert summ["delay_element"] == element, f"{element} run was delayed by {summ['delay_element']}"
    starts = {fl.id: fl.start_s for fl in spec.load(SPEC).flows}
    settled: dict[str, dict[str, float]] = {}
    rows = []
    for element, (run_dir, summ) in runs.items():
        srtt = _srtt_ms(run_dir)
        bps = _settled_bps(run_dir, summ, starts)
        settled[element] = {f["algo"]: bps[f["id"]] for f in summ["flows"]}
        for f in summ["flows"]:
            rows.append(
                f"{element:12} {f['algo']:9} last {bps[f['id']] / 1e6:6.2f} Mbit/s  whole flow"
                f" {f['throughput_bps'] / 1e6:6.2f} Mbit/s  min RTT {f['min_rtt_ms']:.3f} ms"
                f"  srtt {_spread(srtt[f['id']])}"
            )
    print("\n" + "\n".join(rows))
    for element, (_run_dir, summ) in runs.items():
        tol, na = BASE_RTT_TOL_MS[element], summ["fidelity"].get("not_applicable", {})
        for f in summ["flows"]:
            assert f["base_rtt_ms"] == BASE_RTT_MS, f
            # each flow from below; queues the flows keep can raise one flow's minimum (summary: the path's check)
            assert f["min_rtt_ms"] is not None and f["min_rtt_ms"] >= BASE_RTT_MS - tol, (
                f"{element} {f['algo']}: min RTT {f['min_rtt_ms']} ms, spec {BASE_RTT_MS:g} ms"
            )
        # the shortest on the path from both sides, unless its queue was up at every poll
        shortest = min(f["min_rtt_ms"] for f in summ["flows"])
        hi = float("inf") if "l1.base_rtt_ms" in na else BASE_RTT_MS + tol
        assert shortest <= hi, f"{element}: shortest min RTT {shortest} ms, spec {BASE_RTT_MS:g} ms"
    netem, ours = settled["netem"], settled["cclab-delay"]
    apart = [
        f"{algo}: cclab-delay {ours[algo] / 1e6:.2f} vs netem {netem[algo] / 1e6:.2f} Mbit/s "
        f"({ours[algo] / netem[algo]:.3f})"
        for algo in ("reno", "tcpwplus")
        if not netem[algo] or abs(ours[algo] / netem[algo] - 1) > THROUGHPUT_TOL
    ]
    assert not apart, f"from {SETTLED_S:g} s after each flow's start, allowed {THROUGHPUT_TOL:.0%}: " + "; ".join(apart)

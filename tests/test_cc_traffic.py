"""cclab's algorithms under real traffic: loaded by name, through a lossy bottleneck, state exported.

Each algorithm carries one iperf3 flow through a 50 Mbit/s path with random
loss 1e-3 (the kernel data plane), and the runner records its exported state
(ccstate.csv).  Checked: loss events happened; the bandwidth estimate tracks
the flow's in-network rate; and after a loss the sender's ssthresh is
max(2, floor(BWE * RTTmin / MSS)) (btbe: max(2, W_Bottleneck)), or higher
where the stack undid a loss it found spurious.  On a kernel
without netem RTTmin is tens of microseconds, so that rule sits at its floor
of 2 here; the lab VM checks it with an 80 ms RTT.
"""

from __future__ import annotations

import csv
import statistics
import subprocess
from pathlib import Path

import pytest

from controller import cc, spec
from controller.experiment import runner
from controller.spec import algos
from tests.conftest import CCLAB, REPO

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("clean_host")]

ALGOS = spec.CCLAB_ALGOS
#: median exported BWE over the second half / in-network wire rate of the flow
BWE_TOLERANCE = (0.85, 1.20)
INFINITE_SSTHRESH = 0x7FFFFFFF


def test_cc_load_all_six_then_unload() -> None:
    proc = subprocess.run([*CCLAB, "cc", "load", *ALGOS], cwd=REPO, capture_output=True, text=True, timeout=120)
    try:
        assert proc.returncode == 0, proc.stderr
        have = cc.available()
        missing = [a for a in ALGOS if a not in have]
        assert not missing, f"not in tcp_available_congestion_control: {missing} (have {have})"
    finally:
        subprocess.run([*CCLAB, "cc", "unload", *ALGOS], cwd=REPO, capture_output=True, timeout=120)
    assert not [a for a in ALGOS if a in cc.available()], "still registered after unload"


#: a bandwidth estimate to hold against the in-network rate, and ssthresh from it: the Westwood family
#: (algos.toml's bwe_decrease), not the baselines beside it
@pytest.mark.parametrize("algo", algos.bwe_decreases())
def test_lossy_path_estimate_and_ssthresh(algo: str, tmp_path: Path) -> None:
    s = spec.parse(
        {
            "name": f"cc-{algo}",
            "duration_s": 5,
            "topology": {"pairs": 1},
            "bottleneck": {"rate_mbps": 50, "queue_pkts": 50, "per": 1e-3},
            "flows": [{"algo": algo, "src": "h1", "dst": "r1"}],
        }
    )
    out = runner.run(s, runner.RunOptions(results_root=tmp_path, plots=False))
    assert out.summary["complete"], out.summary["reason"]
    flow = out.summary["flows"][0]
    assert flow["random_drops"] > 0, "no loss events: the check below would be empty"
    assert flow["throughput_bps"] > 10e6, f"{algo} carried only {flow['throughput_bps'] / 1e6:.2f} Mbit/s"
    assert algo not in cc.available(), "the runner did not unload what it loaded"

    rows = list(csv.DictReader((out.run_dir / "ccstate.csv").open()))
    assert len(rows) > 20, f"only {len(rows)} state samples"
    assert {r["algo"] for r in rows} == {algo}
    half = rows[len(rows) // 2 :]
    bwe = statistics.median(int(r["bwe_bps"]) for r in half)
    ratio = bwe / flow["throughput_bps"]
    lo, hi = BWE_TOLERANCE
    assert lo <= ratio <= hi, f"BWE {bwe / 1e6:.2f} Mbit/s vs in-network {flow['throughput_bps'] / 1e6:.2f}"

    mss = int(next(csv.DictReader((out.run_dir / "cwnd.csv").open()))["mss"])
    on_rule, raised = 0, []
    for r in rows:
        ssthresh = int(r["ssthresh_pkts"])
        if ssthresh >= INFINITE_SSTHRESH:
            continue  # before the first loss
        if algo == "btbe":
            want = max(2, int(r["w_bottleneck_pkts"]))
        else:
            want = max(2, int(r["bwe_bps"]) // 8 * int(r["rtt_min_us"]) // 1_000_000 // mss)
        if ssthresh == want:
            on_rule += 1
            continue
        # The stack's undo of a loss it finds spurious (tcp_undo_cwnd_reduction) restores
        # prior_ssthresh = max(ssthresh, 3/4 cwnd): it can raise ssthresh above the rule, never lower it.
        assert ssthresh > want, f"t = {r['t_s']}: ssthresh {ssthresh} below the rule's {want} ({r})"
        raised.append((r["t_s"], ssthresh, want))
    checked = on_rule + len(raised)
    assert checked > 10, f"only {checked} samples after a loss"
    assert on_rule >= 0.8 * checked, f"only {on_rule} of {checked} samples on the rule; raised: {raised}"

"""Networks that need delay, run in the qemu lab VM (netem): flows of different base RTTs through one bottleneck,
and one coupled MPTCP connection over two paths of different rate and delay.

Needs root, qemu and the image (`make vm`); skips with the reason otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, cclab_run, lab_vm_missing

pytestmark = [pytest.mark.root, pytest.mark.slow]

RTT_TOL_MS = 2.0
OUT = REPO / "build" / "vm-test" / "results-networks"


def _run_in_vm(spec: Path) -> dict[str, Any]:
    """`cclab run --vm SPEC`: the run's summary.json."""
    why = lab_vm_missing()
    if why:
        pytest.skip(why)
    summ = cclab_run(spec, OUT, vm=True).summary
    assert summ["bottleneck"]["delay_applied"], summ["fidelity"]
    return summ


def test_rtt_fairness_80_vs_240_ms_in_the_lab_vm() -> None:
    """experiments/rtt_fairness.toml: two reno flows, access delays 40 and 120 ms one way; each flow's minimum
    RTT lands within 2 ms of its spec base RTT (80, 240 ms), and the 80 ms flow takes the larger share."""
    summ = _run_in_vm(REPO / "experiments" / "rtt_fairness.toml")
    flows = {f["id"]: f for f in summ["flows"]}
    for fid, want in (("f1", 80.0), ("f2", 240.0)):
        f = flows[fid]
        assert f["base_rtt_ms"] == want, f
        assert f["min_rtt_ms"] is not None and abs(f["min_rtt_ms"] - want) <= RTT_TOL_MS, (
            f"{fid}: min RTT {f['min_rtt_ms']} ms, spec {want:g} ms"
        )
        assert summ["fidelity"]["checks"][f"{fid}.base_rtt_ms"]["ok"], summ["fidelity"]
    short, long = flows["f1"]["throughput_bps"], flows["f2"]["throughput_bps"]
    assert short > long, f"80 ms flow {short / 1e6:.2f} Mbit/s, 240 ms flow {long / 1e6:.2f} Mbit/s"


def test_coupled_mptcpw_over_two_paths_in_the_lab_vm() -> None:
    """One mptcpw connection over paths of 10 Mbit/s, 20 ms RTT and 6 Mbit/s, 80 ms RTT (netem in the guest):
    both subflows carry data, each counted at its own bottleneck, each at its path's base RTT; the coupled eBPF
    form is the one that ran — its own state shows one MPTCP token on both subflows, each coupling two."""
    from tests.test_networks_run import MULTIPATH

    spec = OUT.parent / "mptcp.toml"  # inside the tree the guest sees
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(MULTIPATH)
    summ = _run_in_vm(spec)
    flows = {f["id"]: f for f in summ["flows"]}
    links = {lk["id"]: lk for lk in summ["links"]}
    assert set(links["l1"]["flows"]) == {"f1.1", "f2"} and set(links["l2"]["flows"]) == {"f1.2"}
    # path 2 carries the second subflow alone: its minimum RTT is the base RTT. Path 1 is shared with a reno flow
    # whose queue (50 packets of 1.2 ms at 10 Mbit/s) may never empty: never below the base, at most its queue above
    for sid, base, queue_ms in (("f1.1", 20.0, 50 * 1.2), ("f1.2", 80.0, 0.0)):
        f = flows[sid]
        assert f["bytes"] > 1_000_000, f"subflow {sid} carried {f['bytes']} bytes"
        assert f["min_rtt_ms"] is not None and base - RTT_TOL_MS <= f["min_rtt_ms"] <= base + RTT_TOL_MS + queue_ms, f
    [conn] = summ["mptcp"]
    assert conn["coupling"]["coupled"], conn["coupling"]

"""`cclab bench ovs`: what the switches themselves carry, Open vSwitch beside Linux bridges, same run.

One cubic flow h1 -> r1 through the one-pair dumbbell with nothing shaped (no data plane programmed),
built by the runner's own code (controller/experiment/build.py) exactly as a run builds it: with
Linux bridges h1 -- s1 -- s2 -- r1; with OVS (cclab's os-ken app routing, the datapath this kernel
has) h1 -- s1 -- dl1 -- s2 -- r1, dl1 being the Linux bridge that takes an emulated link's ingress hook.
The two fabrics alternate, `repeats` times each; medians are reported, with how busy the CPU was.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller import spec, system

PORT = 5313


def _spec(switches: str) -> spec.Spec:
    return spec.parse({
        "name": f"bench-fabric-{switches}",
        "duration_s": 10,
        "switches": switches,
        "topology": {"kind": "dumbbell", "pairs": 1},
        "bottleneck": {"rate_mbps": 10_000},
        "flows": [{"algo": "cubic", "src": "h1", "dst": "r1"}],
    })  # fmt: skip


def one(switches: str, seconds: float, root: Path) -> dict[str, Any]:
    """One flow's goodput through one fabric, and the CPU's busy fraction meanwhile."""
    from controller.experiment.build import Experiment

    s = _spec(switches)
    run_dir = root / s.name
    run_dir.mkdir(exist_ok=True)
    ex = Experiment(s, None, [], run_dir)
    try:
        net = ex.build_network()
        h1, r1 = net.get("h1"), net.get("r1")
        dst = s.graph.addresses[("r1", 0)]
        srv = r1.popen(["iperf3", "-s", "-1", "-p", str(PORT)])
        time.sleep(0.3)
        c0 = system.cpu_busy_total(system.cpu_jiffies())
        cl = h1.popen(["iperf3", "-c", dst, "-p", str(PORT), "-t", f"{seconds:g}", "-C", "cubic", "-J", "-O", "1"])
        out, _ = cl.communicate(timeout=seconds + 30)
        c1 = system.cpu_busy_total(system.cpu_jiffies())
        srv.wait(timeout=10)
    finally:
        ex.teardown()
    end = json.loads(out)["end"]
    return {
        "switches": switches,
        "goodput_bps": float(end["sum_received"]["bits_per_second"]),
        "retransmits": end["sum_sent"].get("retransmits"),
        "cpu_busy": round((c1[0] - c0[0]) / max(1, c1[1] - c0[1]), 3),
        "datapath": (ex.fabric.describe().get("datapath") if ex.fabric is not None else None),
    }


def fabric_ceiling(
    seconds: float = 8.0, repeats: int = 3, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Linux bridges and OVS alternately, `repeats` times each; medians."""
    from controller.experiment.runner import run_lock
    from controller.fabric import fabric

    system.require_root()
    why = fabric.missing()
    if why:
        raise system.SystemError_(f"bench ovs: {why}")
    say = progress or (lambda _m: None)
    runs: list[dict[str, Any]] = []
    with run_lock(), tempfile.TemporaryDirectory(prefix="cclab-bench-ovs-") as tmp:
        for i in range(repeats):
            for sw in ("linux", "ovs"):
                say(f"{sw} switches, run {i + 1} of {repeats}")
                runs.append(one(sw, seconds, Path(tmp)))
    out: dict[str, Any] = {"bench": "ovs", "seconds": seconds, "repeats": repeats, "runs": runs}
    for sw in ("linux", "ovs"):
        mine = [r for r in runs if r["switches"] == sw]
        out[f"{sw}_ceiling_bps"] = statistics.median(r["goodput_bps"] for r in mine)
        out[f"{sw}_cpu_busy"] = statistics.median(r["cpu_busy"] for r in mine)
    out["ovs_datapath"] = next((r["datapath"] for r in runs if r["datapath"]), None)
    out["ovs_over_linux"] = round(out["ovs_ceiling_bps"] / out["linux_ceiling_bps"], 3)
    out["netdev_limit_mbps"] = fabric.NETDEV_MAX_MBPS
    return out

"""`cclab bench dataplane`: the highest bottleneck rate a target emulates within 2 % rate error.

Each point is a real experiment (the runner, the dumbbell, saturating iperf3
flows); the rate is the in-network link rate from the data plane's own
counters.  The unshaped ceiling of the same path is measured in the same run.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import runner, spec

RATE_ERROR_MAX = 0.02
#: rates tried, Mbit/s, ascending
RATES_MBPS = (500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000, 10000)
#: rates tried on BMv2 (a software switch: packets per second are its limit), Mbit/s
BMV2_RATES_MBPS = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 150, 200, 300, 500, 1000)
#: "unshaped": a rate no veth path here reaches, so the shaper never holds back
CEILING_MBPS = 100_000
TARGETS = ("kernel", "bmv2")


@dataclass
class Point:
    rate_bps: int
    achieved_bps: float | None
    cpu_busy: float | None = None
    """Share of all CPUs busy during the run: near 1, the senders may be what falls short."""

    @property
    def error(self) -> float | None:
        if self.achieved_bps is None:
            return None
        return abs(self.achieved_bps - self.rate_bps) / self.rate_bps

    def as_dict(self) -> dict[str, Any]:
        return {
            "rate_bps": self.rate_bps,
            "achieved_bps": self.achieved_bps,
            "error": self.error,
            "cpu_busy": self.cpu_busy,
        }


def _spec(rate_mbps: float, duration_s: float, flows: int, shaper: str, target: str = "kernel") -> spec.Spec:
    return spec.parse(
        {
            "name": f"bench-{target}-{shaper}-{int(rate_mbps)}",
            "duration_s": duration_s,
            "dataplane": target,
            "topology": {"kind": "dumbbell", "pairs": flows},
            "bottleneck": {"rate_mbps": rate_mbps, "queue_pkts": 1000, "shaper": shaper},
            "flows": [{"algo": "cubic", "src": f"h{i}", "dst": f"r{i}"} for i in range(1, flows + 1)],
        }
    )


def measure(rate_mbps: float, duration_s: float, flows: int, shaper: str, root: Path, target: str = "kernel") -> Point:
    opts = runner.RunOptions(results_root=root, plots=False)
    out = runner.run(_spec(rate_mbps, duration_s, flows, shaper, target), opts)
    achieved = out.summary["bottleneck"]["achieved_bps"]
    cpu = out.summary["fidelity"]["checks"].get("cpu_busy_fraction", {}).get("value")
    return Point(int(rate_mbps * 1e6), float(achieved) if achieved is not None else None, cpu)


def dataplane(
    duration_s: float = 6.0,
    flows: int = 4,
    shaper: str = "htb",
    rates_mbps: tuple[float, ...] | None = None,
    progress: Callable[[str], None] | None = None,
    target: str = "kernel",
) -> dict[str, Any]:
    """One target's highest accurate rate; `target` = "all" runs each target and returns both."""
    if target == "all":
        return {
            "bench": "dataplane",
            "targets": [dataplane(duration_s, flows, shaper, rates_mbps, progress, t) for t in TARGETS],
        }
    if rates_mbps is None:
        rates_mbps = BMV2_RATES_MBPS if target == "bmv2" else RATES_MBPS
    say = progress or (lambda _m: None)
    with tempfile.TemporaryDirectory(prefix="cclab-bench-") as tmp:
        root = Path(tmp)
        say(f"{target}: ceiling (unshaped)")
        ceiling = measure(CEILING_MBPS, duration_s, flows, shaper, root, target).achieved_bps
        points: list[Point] = []
        misses = 0
        for r in rates_mbps:
            if ceiling is not None and r * 1e6 > ceiling * 1.05:
                break  # the path itself cannot carry it
            say(f"{target}: {r:g} Mbit/s")
            p = measure(r, duration_s, flows, shaper, root, target)
            points.append(p)
            misses = misses + 1 if p.error is None or p.error > RATE_ERROR_MAX else 0
            if misses == 2:
                break
    good = [p.rate_bps for p in points if p.error is not None and p.error <= RATE_ERROR_MAX]
    return {
        "bench": "dataplane",
        "target": target,
        "shaper": shaper if target == "kernel" else "bmv2 egress queue (packets/s)",
        "max_accurate_rate_bps": max(good) if good else None,
        "ceiling_bps": ceiling,
        "rate_error_max": RATE_ERROR_MAX,
        "flows": flows,
        "duration_s": duration_s,
        "points": [p.as_dict() for p in points],
    }

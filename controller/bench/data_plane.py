"""`cclab bench dataplane`: the highest bottleneck rate a target emulates within 2 % rate error.

Each point is a real experiment (the runner, the dumbbell, saturating iperf3
flows); the rate is the in-network link rate from the data plane's own
counters.  The maximum is found by bisection between rates shown accurate and
rates shown not, until they are within 2 % of each other, and is reported as
a ratio to the unshaped ceiling of the same path measured in the same run.
The machine may be shared, so a rate is judged by the median of repeated
runs, and the ceiling is measured once per bisection step, interleaved with
the rate's runs: both medians see the same conditions.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import spec
from controller.dataplane import targets
from controller.experiment import runner
from controller.network import fpga

RATE_ERROR_MAX = 0.02
#: the bisection stops when the lowest rate shown inaccurate is within this of the highest shown accurate
BISECT_RESOLUTION = 0.02
#: the first rate tried, as a share of the first ceiling measured (the aim in docs/benchmarks.md)
FIRST_TRY = 0.9
#: "unshaped": a rate no veth path here reaches, so the shaper never holds back
CEILING_MBPS = 100_000
#: a target's own line: its "unshaped" runs are shaped to it
LINE_MBPS = {"fpga-sim": fpga.LINE_BPS / 1e6}
#: what limits the rate on the targets other than the kernel's (whose qdisc is the run's `shaper`)
SHAPERS = {"bmv2": "bmv2 egress queue (packets/s)", "fpga-sim": "the RTL token bucket (bytes/cycle)"}
#: the targets cclab builds here (the registry's, those in a Mininet network)
TARGETS = targets.in_mininet()


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


def measure(
    rate_mbps: float,
    duration_s: float,
    flows: int,
    shaper: str,
    root: Path,
    target: str = "kernel",
    host_sysctls: bool = True,
) -> Point:
    opts = runner.RunOptions(results_root=root, plots=False, host_sysctls=host_sysctls)
    out = runner.run(_spec(rate_mbps, duration_s, flows, shaper, target), opts)
    if out.interrupted:
        # the run is torn down and marked incomplete; Ctrl-C stops the whole bench, not this point only
        raise KeyboardInterrupt
    achieved = out.summary["bottleneck"]["achieved_bps"]
    cpu = out.summary["fidelity"]["checks"].get("cpu_busy_fraction", {}).get("value")
    return Point(int(rate_mbps * 1e6), float(achieved) if achieved is not None else None, cpu)


def _bisect_steps(ceiling_bps: float) -> int:
    """Enough steps to narrow [0, ceiling] to BISECT_RESOLUTION of the answer down to 5 % of the ceiling."""
    steps, lo, hi = 0, 0.05 * ceiling_bps, ceiling_bps
    while hi - lo > BISECT_RESOLUTION * lo:
        lo, steps = (lo + hi) / 2, steps + 1
    return steps + 2


def dataplane(
    duration_s: float = 6.0,
    flows: int = 4,
    shaper: str = "htb",
    repeats: int = 3,
    progress: Callable[[str], None] | None = None,
    target: str = "kernel",
    host_sysctls: bool = True,
    ceiling_mbps: float | None = None,
) -> dict[str, Any]:
    """One target's highest accurate rate and its ratio to the ceiling; `target` = "all": each target, both.
    ``ceiling_mbps``: the rate of the "unshaped" runs; by default CEILING_MBPS, and on a target with a line
    of its own (fpga-sim: 64 bit at its clock, above which the parser refuses a rate) that line."""
    if target == "all":
        return {
            "bench": "dataplane",
            "targets": [dataplane(duration_s, flows, shaper, repeats, progress, t, host_sysctls) for t in TARGETS],
        }
    say = progress or (lambda _m: None)
    ceiling_mbps = ceiling_mbps or LINE_MBPS.get(target, CEILING_MBPS)
    ceilings: list[Point] = []
    steps: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cclab-bench-") as tmp:
        root = Path(tmp)

        def ceiling() -> float | None:
            say(f"{target}: ceiling (unshaped), run {len(ceilings) + 1}")
            ceilings.append(measure(ceiling_mbps, duration_s, flows, shaper, root, target, host_sysctls))
            got = [p.achieved_bps for p in ceilings if p.achieved_bps is not None]
            return statistics.median(got) if got else None

        first = ceiling()
        if first is None:
            raise runner.RunError(f"{target}: the unshaped path carried nothing; see the run's notes")
        lo, hi = 0.0, first  # highest rate shown accurate, lowest shown not (the ceiling, unless one is)
        rate = FIRST_TRY * first
        for _ in range(_bisect_steps(first)):
            if hi - lo <= BISECT_RESOLUTION * lo:
                break
            rate_mbps = round(rate / 1e6, 1)
            points = []
            for k in range(repeats):
                if k == 1:
                    ceiling()  # between the rate's runs
                say(f"{target}: {rate_mbps:g} Mbit/s, run {k + 1} of {repeats} (bracket {lo / 1e6:.0f}-{hi / 1e6:.0f})")
                points.append(measure(rate_mbps, duration_s, flows, shaper, root, target, host_sysctls))
            errors = [p.error if p.error is not None else 1.0 for p in points]
            ok = statistics.median(errors) <= RATE_ERROR_MAX
            steps.append(
                {
                    "rate_bps": int(rate_mbps * 1e6),
                    "ok": ok,
                    "median_error": statistics.median(errors),
                    "runs": [p.as_dict() for p in points],
                }
            )
            if ok:
                lo = rate_mbps * 1e6
            else:
                hi = rate_mbps * 1e6
            rate = (lo + hi) / 2
    got = [p.achieved_bps for p in ceilings if p.achieved_bps is not None]
    ceiling_bps = statistics.median(got) if got else None
    return {
        "bench": "dataplane",
        "target": target,
        "shaper": SHAPERS.get(target, shaper),
        "ceiling_rate_bps": int(ceiling_mbps * 1e6),
        "max_accurate_rate_bps": lo or None,
        "lowest_inaccurate_rate_bps": hi if any(not s["ok"] for s in steps) else None,
        "ceiling_bps": ceiling_bps,
        "ratio_to_ceiling": lo / ceiling_bps if lo and ceiling_bps else None,
        "ceiling_runs_bps": [p.achieved_bps for p in ceilings],
        "rate_error_max": RATE_ERROR_MAX,
        "resolution": BISECT_RESOLUTION,
        "repeats": repeats,
        "host_sysctls": host_sysctls,
        "flows": flows,
        "duration_s": duration_s,
        "steps": steps,
    }

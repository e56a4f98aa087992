"""`cclab bench fpga`: the FPGA element in the loop (dataplane = "fpga-sim"): how fast its model runs, what
it carries in real time, and the demo on it beside the kernel target.

- model speed: simulated cycles per second of the Verilated element alone (`cclab-fpga-sim --bench`:
  back-to-back full-size frames at line rate, no sockets), the median of several runs.  The harness ties
  cycles to the wall clock at the build's notional clock (fpga.CLOCK_KHZ), so this says how much room
  the model has above it.
- carried rate: the highest rate the element in the loop carries within 2 % in real time, found by
  `bench dataplane`'s bisection (the same dumbbell of saturating cubic flows, the same medians), beside
  BMv2's on the same spec in the same invocation.  fpga-sim's "unshaped ceiling" is its line, 64 bit at
  its clock: no rate above it can be asked of it (the parser refuses one).
- `--demo`: experiments/fpga_demo.toml, the demo on both targets with the same seeds (a sweep; resumed
  where it stopped), judged as the issue's done-when asks: every flow's in-network throughput after
  headers against iperf3's goodput within 2 %, random drops inside their 99 % binomial interval, and
  Jain's index, mean and 95 % Student-t interval per target, with whether the two intervals overlap.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller import system
from controller.bench.data_plane import dataplane
from controller.dataplane import fpgasim
from controller.network import fpga
from controller.results.report import mean_ci

#: cycles per --bench run of the model (2 s or so here)
BENCH_CYCLES = 5_000_000
#: a data frame's headers: Ethernet 14, IPv4 20, TCP 20 + 12 of timestamps (1448 bytes of payload in 1514)
TCP_FRAME_HEADERS = 14 + 20 + 32
#: in-network throughput after headers over iperf3's goodput: the done-when's 2 %
PAYLOAD_TOLERANCE = 0.02
DEMO_SPEC = system.REPO / "experiments" / "fpga_demo.toml"


def model_speed(repeats: int = 5, cycles: int = BENCH_CYCLES) -> dict[str, Any]:
    """The Verilated element's simulated cycles per second, `repeats` runs of `cycles`."""
    if not fpgasim.BINARY.exists():
        raise system.SystemError_(f"{fpgasim.BINARY} is missing; run `make build` with Verilator installed")
    runs = []
    for _ in range(repeats):
        out = subprocess.run(
            [str(fpgasim.BINARY), "--bench", str(cycles)], capture_output=True, text=True, timeout=600, check=False
        )
        if out.returncode != 0:
            raise system.SystemError_(f"{fpgasim.HARNESS} --bench: {out.stderr.strip() or out.returncode}")
        runs.append(float(json.loads(out.stdout)["cycles_per_s"]))
    median = statistics.median(runs)
    return {
        "cycles": cycles,
        "runs_cycles_per_s": runs,
        "cycles_per_s": median,
        "clock_khz": fpga.CLOCK_KHZ,
        "headroom": median / (fpga.CLOCK_KHZ * 1000),
    }


def carried(
    duration_s: float = 6.0,
    flows: int = 4,
    repeats: int = 3,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The highest rate carried within 2 % on fpga-sim (bisection below its line, LINE_MBPS) and on bmv2,
    one after the other on the same spec."""
    fpga = dataplane(duration_s, flows, "htb", repeats, progress, "fpga-sim")
    bmv2 = dataplane(duration_s, flows, "htb", repeats, progress, "bmv2")
    return {"fpga-sim": fpga, "bmv2": bmv2}


def _payload_ratio(flow: dict[str, Any]) -> float | None:
    """A flow's in-network throughput after its frames' headers over iperf3's goodput."""
    gp, nbytes = flow.get("iperf_goodput_bps"), flow.get("bytes") or 0
    if not gp or not nbytes:
        return None
    payload = nbytes - TCP_FRAME_HEADERS * (flow.get("packets") or 0)
    return float(flow["throughput_bps"]) * payload / nbytes / float(gp)


def run_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """One run of the demo as the done-when judges it."""
    checks = summary["fidelity"]["checks"]
    loss = {k: v for k, v in checks.items() if k.endswith("random_drops_in_99pct_interval")}
    element = summary.get("element_stats") or {}
    return {
        "dataplane": summary["dataplane"],
        "seed": summary["seed"],
        "complete": summary["complete"],
        "fidelity_ok": summary["fidelity"]["ok"],
        "jain": summary["jain"],
        "utilization": summary["bottleneck"]["utilization"],
        "payload_over_goodput": {f["id"]: _payload_ratio(f) for f in summary["flows"]},
        "wire_over_goodput": {
            f["id"]: f["throughput_bps"] / f["iperf_goodput_bps"] for f in summary["flows"] if f["iperf_goodput_bps"]
        },
        "random_drops": {k: [v["value"], v["lo"], v["hi"]] for k, v in loss.items()},
        "loss_ok": bool(loss) and all(v["ok"] for v in loss.values()),
        "max_lag_ms": max(
            (
                st["harness"]["max_lag_cycles"] / st["harness"]["clock_khz"]
                for st in element.values()
                if st.get("harness")
            ),
            default=None,
        ),
        "rx_frames_unaccounted": [st.get("rx_frames_unaccounted") for st in element.values()],
    }


def demo_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The done-when over the demo's runs: per target, Jain's index (mean, 95 % interval), the payload ratios'
    range, every run's loss check; and whether fpga-sim's Jain interval overlaps the kernel target's."""
    targets: dict[str, Any] = {}
    for dp in sorted({r["dataplane"] for r in runs}):
        mine = [r for r in runs if r["dataplane"] == dp and r["complete"]]
        ratios = [x for r in mine for x in r["payload_over_goodput"].values() if x is not None]
        j = mean_ci([float(r["jain"]) for r in mine])
        targets[dp] = {
            "n": len(mine),
            "jain": [r["jain"] for r in mine],
            "jain_mean": j.mean,
            "jain_ci95": [j.ci_low, j.ci_high],
            "payload_over_goodput_range": [min(ratios), max(ratios)] if ratios else None,
            "payload_within_2pct": bool(ratios) and all(abs(x - 1) <= PAYLOAD_TOLERANCE for x in ratios),
            "loss_ok_runs": sum(r["loss_ok"] for r in mine),
            "fidelity_ok_runs": sum(r["fidelity_ok"] for r in mine),
        }
    f, k = targets.get("fpga-sim"), targets.get("kernel")
    overlap = None
    if f and k and None not in (*f["jain_ci95"], *k["jain_ci95"]):
        overlap = f["jain_ci95"][0] <= k["jain_ci95"][1] and k["jain_ci95"][0] <= f["jain_ci95"][1]
    return {"targets": targets, "jain_intervals_overlap": overlap, "runs": runs}


def demo(sweep_dir: Path | None = None, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run experiments/fpga_demo.toml (what is not complete yet) and judge its runs."""
    from controller.experiment import executors, sweep
    from controller.spec import sweep as sweep_spec

    system.require_root()
    sw = sweep_spec.load(DEMO_SPEC)
    where = sweep_dir or sweep.default_dir(sw)

    def started(key: str, _prog: sweep.Progress) -> None:
        if progress:
            progress(f"demo: {key}")

    sweep.run(sw, where, executors.side_by_side(1), on_start=started)
    return {"sweep_dir": str(where), **demo_figures(read_demo(where))}


def read_demo(sweep_dir: Path) -> list[dict[str, Any]]:
    """Every complete run of a demo sweep, as run_figures has it."""
    from controller.experiment import sweep

    manifest = json.loads((sweep_dir / "sweep.json").read_text())
    runs = []
    for pt in manifest["points"]:
        run_dir = sweep.complete_run(sweep_dir, pt["key"])
        if run_dir is not None:
            runs.append(run_figures(json.loads((run_dir / "summary.json").read_text())))
    return runs

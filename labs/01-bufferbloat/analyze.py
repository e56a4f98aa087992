"""Lab 1, bufferbloat: the long flow's RTT and the web fetches' completion times against the queue size.

    python3 analyze.py runs        # runs/ holds the runs of q5.toml, q20.toml and q100.toml

Prints one row per queue size and draws bufferbloat.png: the long flow's smoothed RTT over time (left) and each
fetch's completion time (right), one colour per queue size.
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LONG_FLOW = "f1"
FETCHES = ("f2", "f3", "f4", "f5", "f6")


def rows(run: Path, name: str) -> list[dict[str, str]]:
    with (run / name).open(newline="") as f:
        return list(csv.DictReader(f))


def rtt_series(run: Path, flow: str) -> tuple[list[float], list[float]]:
    """The flow's smoothed RTT over time from cwnd.csv: times in s, RTTs in ms (samples before the first RTT
    estimate, srtt_us = 0, left out)."""
    samples = [r for r in rows(run, "cwnd.csv") if r["flow"] == flow and int(r["srtt_us"]) > 0]
    return [float(r["t_s"]) for r in samples], [int(r["srtt_us"]) / 1000 for r in samples]


def median_rtt_ms(run: Path, flow: str) -> float:
    """The flow's median smoothed RTT over the run, in ms."""
    # TODO: the median of the RTTs rtt_series() returns (module statistics has a median)
    raise NotImplementedError("TODO: median_rtt_ms() in analyze.py")


def completion_times_s(run: Path) -> list[float]:
    """Each web fetch's completion time (flows.csv, column completion_s), in s."""
    # TODO: read flows.csv with rows(run, "flows.csv") and return, for each flow id in FETCHES, its
    # completion_s column as a float
    raise NotImplementedError("TODO: completion_times_s() in analyze.py")


def newest_runs(folder: Path) -> dict[int, Path]:
    """Queue size (packets) -> the newest complete run of that size under folder."""
    found: dict[int, Path] = {}
    for summary in sorted(folder.glob("*/summary.json")):  # names end in the start time: sorted is oldest first
        s = json.loads(summary.read_text())
        if s["name"].startswith("bufferbloat-q") and s["complete"]:
            found[s["bottleneck"]["queue_pkts"]] = summary.parent
    return dict(sorted(found.items()))


def main(folder: Path) -> None:
    runs = newest_runs(folder)
    if not runs:
        sys.exit(f"no bufferbloat runs under {folder}/ (run the three specs first, README step 2)")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    print(f"{'queue (pkts)':>12} {'median RTT (ms)':>16} {'fetches (s)':>30} {'utilization':>12}")
    for q, run in runs.items():
        t, rtt = rtt_series(run, LONG_FLOW)
        fetches = completion_times_s(run)
        util = json.loads((run / "summary.json").read_text())["bottleneck"]["utilization"]
        times = " ".join(f"{c:.3f}" for c in fetches)
        print(f"{q:>12} {median_rtt_ms(run, LONG_FLOW):>16.1f} {times:>30} {util:>12.3f}")
        (line,) = left.plot(t, rtt, label=f"Q = {q}")
        right.scatter([q] * len(fetches), fetches, color=line.get_color())
    left.set(xlabel="time (s)", ylabel="long flow's smoothed RTT (ms)", title="RTT")
    left.legend()
    right.set(xscale="log", xlabel="queue (packets)", ylabel="completion time (s)", title="100 kB web fetch")
    right.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig("bufferbloat.png", dpi=80)
    print("drawn: bufferbloat.png")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs"))

"""Lab 4, your own congestion control: each flow's throughput and how far it cuts its window on a loss, and the
windows of your algorithm and Reno over time.

    python3 analyze.py runs        # runs/ holds the runs of vs-reno.toml, lossy.toml and self.toml

Prints one row per run and flow (algorithm, throughput, the median cut factor) and draws own-cc.png: the
congestion window of each flow over time, one panel per run.
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

RUNS = ("owncc-vs-reno", "owncc-lossy", "owncc-self")


def rows(run: Path, name: str) -> list[dict[str, str]]:
    with (run / name).open(newline="") as f:
        return list(csv.DictReader(f))


def cut_factors(samples: list[dict[str, str]]) -> list[float]:
    """One flow's cwnd.csv rows, in time order -> for each loss, the new ssthresh over the window of the sample
    before it (a loss is a sample whose ssthresh_pkts differs from the one before)."""
    return [
        int(now["ssthresh_pkts"]) / int(before["cwnd_pkts"])
        for before, now in zip(samples, samples[1:])
        if now["ssthresh_pkts"] != before["ssthresh_pkts"] and int(before["cwnd_pkts"]) > 0
    ]


def newest_runs(folder: Path) -> dict[str, Path]:
    """Spec name -> the newest complete run of it under folder."""
    found: dict[str, Path] = {}
    for summary in sorted(folder.glob("*/summary.json")):  # names end in the start time: sorted is oldest first
        s = json.loads(summary.read_text())
        if s["name"] in RUNS and s["complete"]:
            found[s["name"]] = summary.parent
    return found


def main(folder: Path) -> None:
    runs = newest_runs(folder)
    if not runs:
        sys.exit(f"no lab 4 runs under {folder}/ (run the three specs first, README step 4)")
    ordered = sorted(runs.items(), key=lambda kv: RUNS.index(kv[0]))
    fig, axes = plt.subplots(len(ordered), 1, figsize=(9, 2.6 * len(ordered)), sharex=True, squeeze=False)
    print(f"{'run':>14} {'flow':>4} {'algorithm':>9} {'Mbit/s':>7} {'cut factor':>10} {'losses':>6}")
    for ax, (name, run) in zip(axes[:, 0], ordered):
        samples = rows(run, "cwnd.csv")
        for flow in rows(run, "flows.csv"):
            mine = [r for r in samples if r["flow"] == flow["id"]]
            cuts = cut_factors(mine)
            cut = f"{statistics.median(cuts):.2f}" if cuts else "-"
            mbps = float(flow["throughput_bps"]) / 1e6
            print(f"{name:>14} {flow['id']:>4} {flow['algo']:>9} {mbps:>7.2f} {cut:>10} {len(cuts):>6}")
            t = [float(r["t_s"]) for r in mine]
            ax.plot(t, [int(r["cwnd_pkts"]) for r in mine], label=f"{flow['id']} {flow['algo']} ({mbps:.1f} Mbit/s)")
        ax.set(ylabel="cwnd (packets)", title=name)
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set(xlabel="time (s)")
    fig.tight_layout()
    fig.savefig("own-cc.png", dpi=80)
    print("drawn: own-cc.png")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs"))

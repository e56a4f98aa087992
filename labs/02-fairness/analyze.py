"""Lab 2, fairness: each flow's share of the bottleneck and Jain's index, computed here from flows.csv and set
beside cclab's own.

    python3 analyze.py runs        # runs/ holds the runs of same-rtt.toml and mixed-rtt.toml

Prints each flow's throughput and base RTT and both indices per run, writes the index computed here into each
run's folder (jain_by_hand.txt, which `cclab lab check 2` reads) and draws fairness.png: each flow's throughput,
one group of bars per run.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RUNS = ("fairness-same-rtt", "fairness-mixed-rtt")


def flows(run: Path) -> list[dict[str, str]]:
    with (run / "flows.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def jain(rates: list[float]) -> float:
    """Jain's index of the rates: (sum x)^2 / (n * sum x^2), 1 when all are equal, 1/n when one takes all."""
    # TODO: the index of the rates, as the README's Background writes it
    raise NotImplementedError("TODO: jain() in analyze.py")


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
        sys.exit(f"no fairness runs under {folder}/ (run the two specs first, README step 2)")
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, (name, run) in enumerate(sorted(runs.items(), key=lambda kv: RUNS.index(kv[0]))):
        rows = flows(run)
        rates = [float(r["throughput_bps"]) for r in rows]
        by_hand = jain(rates)
        (run / "jain_by_hand.txt").write_text(f"{by_hand}\n")
        cclab = json.loads((run / "summary.json").read_text())["jain"]
        print(f"{name}: Jain's index {by_hand:.4f} here, {cclab:.4f} by cclab")
        for r, rate in zip(rows, rates):
            print(f"  {r['id']}: {rate / 1e6:6.2f} Mbit/s, base RTT {float(r['base_rtt_ms']):5.0f} ms")
        xs = [i * (len(rows) + 1) + k for k in range(len(rows))]
        ax.bar(xs, [x / 1e6 for x in rates], label=f"{name} (Jain {by_hand:.3f})")
        for x, r in zip(xs, rows):
            ax.annotate(f"{float(r['base_rtt_ms']):.0f} ms", (x, 0), ha="center", va="bottom", fontsize=8)
    ax.set(ylabel="throughput (Mbit/s)", title="each flow's share (labels: base RTT)", xticks=[])
    ax.legend()
    fig.tight_layout()
    fig.savefig("fairness.png", dpi=80)
    print("drawn: fairness.png")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs"))

"""Lab 6, MPTCP: who gets what on each of the three bottlenecks, with the connections' subflows uncoupled and
coupled.

    python3 analyze.py runs        # runs/ holds the runs of uncoupled.toml and coupled.toml

Prints, per run, each connection's throughput (its subflows added up) beside the Reno flow it competes with, and
draws mptcp.png: per run and bottleneck (l1, l2, l3), the throughput of every flow and subflow that crosses it,
stacked.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RUNS = ("mptcp-uncoupled", "mptcp-coupled")
LINKS = ("l1", "l2", "l3")
#: each connection (f1 over two paths, f3 through l3) and the Reno flow it competes with
RIVALS = {"f1": "f2", "f3": "f4"}
COLOURS = {"f1.1": "tab:blue", "f1.2": "lightsteelblue", "f2": "grey", "f3.1": "tab:orange", "f3.2": "navajowhite",
           "f4": "dimgrey"}  # fmt: skip


def rows(run: Path, name: str) -> list[dict[str, str]]:
    with (run / name).open(newline="") as f:
        return list(csv.DictReader(f))


def connection_mbps(flows: list[dict[str, str]], conn: str) -> float:
    """A connection's throughput in Mbit/s from flows.csv's rows: an MPTCP connection's subflows (the rows whose
    `flow` column names it) added up; a single-path flow's own row."""
    # TODO: add up throughput_bps (bit/s) over the rows whose "flow" column is conn (a single-path flow's row
    # names itself there), in Mbit/s
    raise NotImplementedError("TODO: connection_mbps() in analyze.py")


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
        sys.exit(f"no lab 6 runs under {folder}/ (run the two specs first, README step 3)")
    ordered = sorted(runs.items(), key=lambda kv: RUNS.index(kv[0]))
    fig, axes = plt.subplots(1, len(ordered), figsize=(9, 3.8), sharey=True, squeeze=False)
    for ax, (name, run) in zip(axes[0], ordered):
        flows = rows(run, "flows.csv")
        print(f"{name}:")
        for conn, rival in RIVALS.items():
            mine, theirs = connection_mbps(flows, conn), connection_mbps(flows, rival)
            print(f"  {conn} {mine:5.2f} Mbit/s beside {rival} {theirs:5.2f} Mbit/s: {mine / theirs:.2f} times")
        for i, link in enumerate(LINKS):
            bottom = 0.0
            for r in flows:
                if link in r["path"].split():
                    mbps = float(r["throughput_bps"]) / 1e6
                    ax.bar(i, mbps, bottom=bottom, color=COLOURS.get(r["id"], "white"), edgecolor="black", lw=0.5)
                    ax.text(i, bottom + mbps / 2, f"{r['id']} {mbps:.1f}", ha="center", va="center", fontsize=8)
                    bottom += mbps
        ax.set(xticks=range(len(LINKS)), xticklabels=LINKS, title=name, xlabel="bottleneck")
    axes[0, 0].set(ylabel="throughput (Mbit/s)")
    fig.tight_layout()
    fig.savefig("mptcp.png", dpi=80)
    print("drawn: mptcp.png")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs"))

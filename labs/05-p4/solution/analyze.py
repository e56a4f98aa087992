"""Lab 5, P4: what your switch's counters say of the TCP flows it carried, and its random loss beside the
binomial distribution it should follow.

    python3 analyze.py runs        # runs/ holds the run of lossy.toml

Prints one row per flow (throughput and packets from your counters, iperf3's goodput, the random drops, the loss
rate and the 95 % interval a link losing each packet with probability p gives it) and draws p4-loss.png: each
flow's loss rate as the packets add up, inside that interval, and each flow's throughput over time, both from
your program's counters.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RUN = "p4-lossy"
#: the normal quantile of a two-sided 95 % interval
Z95 = 1.96


def rows(run: Path, name: str) -> list[dict[str, str]]:
    with (run / name).open(newline="") as f:
        return list(csv.DictReader(f))


def threshold(p: float) -> int:
    """The 32-bit threshold the controller writes into link_loss for a loss probability p: a uniform draw in
    [0, 2^32 - 1] falls below it with probability p."""
    return min(2**32 - 1, round(p * 2**32))


def interval95(p: float, n: int) -> tuple[float, float]:
    """The 95 % interval of the share of n packets lost when each is lost with probability p (the normal
    approximation of the binomial distribution: p +- 1.96 sqrt(p (1 - p) / n))."""
    half = Z95 * math.sqrt(p * (1 - p) / n)
    return max(0.0, p - half), p + half


def newest_run(folder: Path) -> Path | None:
    """The newest complete run of lossy.toml under folder."""
    found = None
    for summary in sorted(folder.glob("*/summary.json")):  # names end in the start time: sorted is oldest first
        s = json.loads(summary.read_text())
        if s["name"] == RUN and s["complete"]:
            found = summary.parent
    return found


def main(folder: Path) -> None:
    run = newest_run(folder)
    if run is None:
        sys.exit(f"no complete run of lossy.toml (name = {RUN!r}) under {folder}/ (README, step 4)")
    p = float(json.loads((run / "manifest.json").read_text())["spec"]["bottleneck"]["per"])
    print(f"p = {p:g}: link_loss's threshold round(p * 2^32) = {threshold(p)}")
    print(
        f"{'flow':>4} {'Mbit/s':>7} {'goodput':>7} {'packets':>8} {'random':>6} {'loss rate':>9} {'95 % interval':>17}"
    )
    series = rows(run, "timeseries.csv")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.4))
    for flow in rows(run, "flows.csv"):
        fid, forwarded, lost = flow["id"], int(flow["packets"]), int(flow["random_drops"])
        lo, hi = interval95(p, forwarded + lost)
        rate = lost / (forwarded + lost)
        goodput = float(flow["iperf_goodput_bps"] or 0) / 1e6
        mbps = float(flow["throughput_bps"]) / 1e6
        print(f"{fid:>4} {mbps:>7.2f} {goodput:>7.2f} {forwarded:>8} {lost:>6} {rate:>9.4f}   [{lo:.4f}, {hi:.4f}]")
        mine = [r for r in series if r["flow"] == fid]
        n = k = 0
        xs, ys = [], []
        for r in mine:
            n += int(r["pkts"]) + int(r["random_drops"])
            k += int(r["random_drops"])
            if n:
                xs.append(n)
                ys.append(k / n)
        top.plot(xs, ys, label=f"{fid}: {k} of {n} lost")
        t = [float(r["t_s"]) for r in mine]
        bottom.plot(t, [float(r["rate_bps"]) / 1e6 for r in mine], label=f"{fid} {flow['algo']} ({mbps:.1f} Mbit/s)")
    most = max(1, max(n for n in [int(f["packets"]) + int(f["random_drops"]) for f in rows(run, "flows.csv")]))
    grid = [max(50, int(most * i / 200)) for i in range(1, 201)]
    top.fill_between(grid, [interval95(p, n)[0] for n in grid], [interval95(p, n)[1] for n in grid], alpha=0.2,
                     color="grey", label=f"95 % interval of p = {p:g}")  # fmt: skip
    top.axhline(p, color="grey", lw=0.8)
    top.set(xlabel="packets that left the queue", ylabel="lost at random (share)", ylim=(0, 3 * p))
    top.legend(fontsize=8)
    bottom.set(xlabel="time (s)", ylabel="throughput (Mbit/s)")
    bottom.legend(fontsize=8)
    fig.suptitle(f"{RUN}: your switch's counters, two Reno flows at p = {p:g}")
    fig.tight_layout()
    fig.savefig("p4-loss.png", dpi=80)
    print("drawn: p4-loss.png")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs"))

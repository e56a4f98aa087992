"""Lab 3, random loss: Reno, Westwood+ and LogWestwood+ against the packet error rate (PER), beside the Mathis
model of Reno.

    python3 analyze.py runs        # runs/ holds the runs of per-1e-3.toml, per-1e-2.toml and per-5e-2.toml

Prints one row per run and flow (throughput, loss rate, median RTT, the Mathis model's throughput for it), writes
the model's throughput for the Reno flow into each run's folder (mathis_by_hand.txt, which `cclab lab check 3`
reads) and draws random-loss.png: each algorithm's throughput against the PER, and the model's curve.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RENO = "f1"
NAMES = {"reno": "Reno", "tcpwplus": "Westwood+", "logwestwood": "LogWestwood+"}
LINK_MBPS = 20


def rows(run: Path, name: str) -> list[dict[str, str]]:
    with (run / name).open(newline="") as f:
        return list(csv.DictReader(f))


def loss_rate(flow: dict[str, str]) -> float:
    """The share of the flow's packets lost (flows.csv: dropped at random or by the queue, over all it sent)."""
    lost = int(flow["random_drops"]) + int(flow["queue_drops"])
    return lost / (int(flow["packets"]) + lost)


def rtt_and_mss(run: Path, flow: str) -> tuple[float, int]:
    """The flow's median smoothed RTT (s) and its MSS (bytes), from cwnd.csv (samples with an RTT estimate)."""
    samples = [r for r in rows(run, "cwnd.csv") if r["flow"] == flow and int(r["srtt_us"]) > 0]
    rtt_s = statistics.median(int(r["srtt_us"]) for r in samples) / 1e6
    return rtt_s, int(statistics.median(int(r["mss"]) for r in samples))


def mathis_mbps(mss_bytes: int, rtt_s: float, p: float) -> float:
    """Reno's throughput by the Mathis model, (MSS / RTT) * sqrt(3 / (2 p)), in Mbit/s."""
    # TODO: the model as the README's Background writes it (mind the units: bytes, seconds, Mbit/s; module
    # math has sqrt)
    raise NotImplementedError("TODO: mathis_mbps() in analyze.py")


def newest_runs(folder: Path) -> dict[float, Path]:
    """PER -> the newest complete run of that PER under folder."""
    found: dict[float, Path] = {}
    for summary in sorted(folder.glob("*/summary.json")):  # names end in the start time: sorted is oldest first
        s = json.loads(summary.read_text())
        if s["name"].startswith("randomloss-") and s["complete"]:
            found[s["bottleneck"]["per"]] = summary.parent
    return dict(sorted(found.items()))


def main(folder: Path) -> None:
    runs = newest_runs(folder)
    if not runs:
        sys.exit(f"no random-loss runs under {folder}/ (run the three specs first, README step 2)")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_algo: dict[str, list[tuple[float, float]]] = {}
    print(f"{'PER':>6} {'algorithm':>13} {'Mbit/s':>7} {'loss rate':>9} {'RTT (ms)':>8} {'Mathis':>7}")
    for per, run in runs.items():
        for flow in rows(run, "flows.csv"):
            p = loss_rate(flow)
            rtt_s, mss = rtt_and_mss(run, flow["id"])
            model = mathis_mbps(mss, rtt_s, p) if p > 0 else math.inf
            mbps = float(flow["throughput_bps"]) / 1e6
            print(f"{per:>6g} {NAMES[flow['algo']]:>13} {mbps:>7.2f} {p:>9.4f} {rtt_s * 1e3:>8.1f} {model:>7.2f}")
            by_algo.setdefault(flow["algo"], []).append((per, mbps))
            if flow["id"] == RENO:
                (run / "mathis_by_hand.txt").write_text(f"{model}\n")
    for algo, points in by_algo.items():
        ax.plot(*zip(*points), marker="o", label=NAMES[algo])
    # the model's curve at the base RTT (no queueing) and the Reno flow's MSS
    first = next(iter(runs.values()))
    base_s = float(next(f for f in rows(first, "flows.csv") if f["id"] == RENO)["base_rtt_ms"]) / 1e3
    mss = rtt_and_mss(first, RENO)[1]
    lo, hi = min(runs) / 1.5, max(runs) * 1.5
    ps = [lo * (hi / lo) ** (k / 40) for k in range(41)]
    ax.plot(ps, [mathis_mbps(mss, base_s, p) for p in ps], "k--", label=f"Mathis model, RTT {base_s * 1e3:.0f} ms")
    ax.axhline(LINK_MBPS, color="grey", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="packet error rate", ylabel="throughput (Mbit/s)")
    ax.set(title="throughput against random loss")
    ax.legend()
    fig.tight_layout()
    fig.savefig("random-loss.png", dpi=80)
    print("drawn: random-loss.png")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs"))

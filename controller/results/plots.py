"""PNG plots of a run, drawn only from the run directory's CSV and JSON files.

Reading the files (not the in-memory series) keeps the plots honest: a reader
who re-runs `cclab plot RUN_DIR` gets the same figures from the same data.
"""

from __future__ import annotations

import csv
import json
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from controller.network import units  # noqa: E402

log = logging.getLogger(__name__)

TCP_INFINITE_SSTHRESH = 0x7FFFFFFF


def _read(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def _by_flow(rows: list[dict[str, str]], col: str) -> dict[str, tuple[list[float], list[float]]]:
    out: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for r in rows:
        if r.get(col, "") == "":
            continue
        xs, ys = out[r["flow"]]
        xs.append(float(r["t_s"]))
        ys.append(float(r[col]))
    return out


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_run(run_dir: Path) -> list[Path]:
    """Write plots/*.png for a run directory; returns the files written."""
    out = run_dir / "plots"
    out.mkdir(exist_ok=True)
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    algo = {f["id"]: f["algo"] for f in summary["flows"]}
    ts = _read(run_dir / "timeseries.csv")
    all_links = _read(run_dir / "link.csv")
    link_ids = list(dict.fromkeys(r.get("link", "l1") for r in all_links))
    # the single-bottleneck figures show the first emulated link; links.png shows them all
    link = [r for r in all_links if r.get("link", "l1") == link_ids[0]] if link_ids else []
    cwnd = _read(run_dir / "cwnd.csv")
    title = f"{summary['name']} ({summary['dataplane']})"
    written = []

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for flow, (xs, ys) in sorted(_by_flow(ts, "rate_bps").items()):
        ax.plot(xs, [units.mbps(y) for y in ys], lw=1, label=f"{flow} {algo.get(flow, '')}")
    if link:
        ax.plot(
            [float(r["t_s"]) for r in link],
            [units.mbps(float(r["capacity_bps"])) for r in link],
            "k--",
            lw=1,
            label="bottleneck rate",
        )
        ax.plot(
            [float(r["t_s"]) for r in link],
            [units.mbps(float(r["link_bps"])) for r in link],
            color="grey",
            lw=0.8,
            alpha=0.7,
            label="link total",
        )
    ax.set(xlabel="time (s)", ylabel="throughput at bottleneck egress (Mbit/s)", title=title)
    ax.legend(fontsize=8, ncol=2)
    _save(fig, out / "throughput.png")
    written.append(out / "throughput.png")

    fig, ax = plt.subplots(figsize=(8, 3.5))
    pts = [(float(r["t_s"]), float(r["jain"])) for r in link if r["jain"]]
    if pts:
        ax.plot(*zip(*pts), lw=1)
    ax.set(
        xlabel="time (s)",
        ylabel="Jain's index",
        ylim=(0, 1.05),
        title=f"{title}: Jain's index over active flows (whole run: {summary['jain'] or 0:.3f})",
    )
    _save(fig, out / "jain.png")
    written.append(out / "jain.png")

    fig, ax = plt.subplots(figsize=(8, 3.5))
    ids = [f["id"] for f in summary["flows"]]
    rnd = [f["random_drops"] for f in summary["flows"]]
    que = [f["queue_drops"] for f in summary["flows"]]
    ax.bar(ids, rnd, label="random (link) loss")
    ax.bar(ids, que, bottom=rnd, label="queue overflow")
    ax.set(xlabel="flow", ylabel="dropped packets", title=f"{title}: drops by cause")
    ax.legend(fontsize=8)
    _save(fig, out / "drops.png")
    written.append(out / "drops.png")

    if cwnd:
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
        for flow, (xs, ys) in sorted(_by_flow(cwnd, "cwnd_pkts").items()):
            a1.plot(xs, ys, lw=1, label=f"{flow} {algo.get(flow, '')}")
        for flow, (xs, ys) in sorted(_by_flow(cwnd, "srtt_us").items()):
            a2.plot(xs, [y / 1000 for y in ys], lw=1, label=flow)
        a1.set(ylabel="cwnd (packets)", title=f"{title}: sender state (tcp_info)")
        a2.set(xlabel="time (s)", ylabel="srtt (ms)")
        a1.legend(fontsize=8, ncol=2)
        _save(fig, out / "cwnd.png")
        written.append(out / "cwnd.png")

    ccstate = _read(run_dir / "ccstate.csv")
    if ccstate:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for flow, (xs, ys) in sorted(_by_flow(ccstate, "bwe_bps").items()):
            ax.plot(xs, [units.mbps(y) for y in ys], lw=1, label=f"{flow} {algo.get(flow, '')} BWE")
        if link:
            t = [float(r["t_s"]) for r in link]
            cap = [units.mbps(float(r["capacity_bps"])) for r in link]
            share = [c / max(1, int(r["active_flows"])) for c, r in zip(cap, link)]
            ax.plot(t, cap, "k--", lw=1, label="bottleneck rate")
            ax.plot(t, share, "k:", lw=1, label="fair share")
        ax.set(xlabel="time (s)", ylabel="Mbit/s", title=f"{title}: the algorithms' bandwidth estimates")
        ax.legend(fontsize=8, ncol=2)
        _save(fig, out / "bwe.png")
        written.append(out / "bwe.png")

    if link:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.plot([float(r["t_s"]) for r in link], [int(r["backlog_pkts"]) for r in link], lw=1)
        ax.set(xlabel="time (s)", ylabel="queue (packets)", title=f"{title}: bottleneck queue at each poll")
        _save(fig, out / "queue.png")
        written.append(out / "queue.png")
    if len(link_ids) > 1:
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
        for lid in link_ids:
            rows = [r for r in all_links if r.get("link") == lid]
            t = [float(r["t_s"]) for r in rows]
            a1.plot(t, [units.mbps(float(r["link_bps"])) for r in rows], lw=1, label=lid)
            a2.plot(t, [int(r["backlog_pkts"]) for r in rows], lw=1, label=lid)
        a1.set(ylabel="departure rate (Mbit/s)", title=f"{title}: every emulated link")
        a2.set(xlabel="time (s)", ylabel="queue (packets)")
        a1.legend(fontsize=8, ncol=4)
        _save(fig, out / "links.png")
        written.append(out / "links.png")
    return written

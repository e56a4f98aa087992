"""The terminal view of a running experiment (rich): per-flow table and link footer."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from controller.measure.monitor import LiveState


def _mbps(bps: float) -> str:
    return f"{bps / 1e6:8.2f}"


def render(state: LiveState, title: str) -> Any:
    t = Table(title=title, title_justify="left", expand=False)
    for col, just in (
        ("flow", "left"),
        ("algo", "left"),
        ("Mbit/s", "right"),
        ("MB total", "right"),
        ("rand drops", "right"),
        ("queue drops", "right"),
        ("cwnd", "right"),
        ("srtt ms", "right"),
    ):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for f in state.flows:
        t.add_row(
            f.id,
            f.algo,
            _mbps(f.rate_bps),
            f"{f.total_bytes / 1e6:.1f}",
            str(f.rnd_drops),
            str(f.q_drops),
            "-" if f.cwnd_pkts is None else str(f.cwnd_pkts),
            "-" if f.srtt_us is None else f"{f.srtt_us / 1000:.2f}",
        )
    util = state.link_bps / state.capacity_bps if state.capacity_bps else 0.0
    jain = "-" if state.jain is None else f"{state.jain:.3f}"
    foot = Text(
        f"t = {state.elapsed_s:5.1f} / {state.duration_s:g} s   bottleneck {state.link_bps / 1e6:.1f} of "
        f"{state.capacity_bps / 1e6:.1f} Mbit/s ({util:.0%})   queue {state.backlog_pkts} pkts   Jain {jain}"
    )
    if len(state.links) > 1:  # one line per emulated link
        rows = []
        for lk in state.links:
            u = lk.link_bps / lk.capacity_bps if lk.capacity_bps else 0.0
            j = "-" if lk.jain is None else f"{lk.jain:.3f}"
            rows.append(
                f"  {lk.id:<6} {lk.link_bps / 1e6:7.1f} of {lk.capacity_bps / 1e6:.1f} Mbit/s ({u:4.0%})"
                f"   queue {lk.backlog_pkts:4d} pkts   Jain {j}"
            )
        foot = Text(f"t = {state.elapsed_s:5.1f} / {state.duration_s:g} s\n" + "\n".join(rows))
    bar = ProgressBar(total=max(state.duration_s, 1e-9), completed=min(state.elapsed_s, state.duration_s), width=60)
    return Group(t, foot, bar)


def final_table(summary: dict[str, Any]) -> Table:
    t = Table(title=f"{summary['name']}: whole run", title_justify="left")
    for col in ("flow", "algo", "in-network Mbit/s", "iperf3 goodput", "random drops", "queue drops"):
        t.add_column(col, justify="left" if col in ("flow", "algo") else "right")
    for f in summary["flows"]:
        gp = f["iperf_goodput_bps"]
        t.add_row(
            f["id"],
            f["algo"],
            _mbps(f["throughput_bps"]),
            "-" if gp is None else _mbps(gp),
            str(f["random_drops"]),
            str(f["queue_drops"]),
        )
    return t

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
    """One frame: a row per flow (its last interval, or its whole run once it ended), the status line(s), the
    time bar; the demo's fits 80 columns without wrapping a cell."""
    t = Table(title=title, title_justify="left", expand=False)
    for col, just in (
        ("flow", "left"),
        ("algo", "left"),
        ("Mbit/s", "right"),
        ("MB", "right"),
        ("rnd drops", "right"),
        ("q drops", "right"),
        ("cwnd", "right"),
        ("srtt ms", "right"),
    ):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for f in state.flows:
        t.add_row(
            f.id,
            f.algo,
            f"{(f.mean_bps if f.ended else f.rate_bps) / 1e6:.2f}",
            f"{f.total_bytes / 1e6:.1f}",
            str(f.rnd_drops),
            str(f.q_drops),
            "-" if f.cwnd_pkts is None else str(f.cwnd_pkts),
            "-" if f.srtt_us is None else f"{f.srtt_us / 1000:.2f}",
            style="dim" if f.ended and not state.ended else None,
        )
    if any(f.ended for f in state.flows) and not state.ended:
        t.caption, t.caption_justify = "dim rows: ended, whole-run Mbit/s", "left"
    return Group(t, status(state), _bar(state))


def _jain(j: float | None) -> str:
    return "-" if j is None else f"{j:.3f}"


def status(state: LiveState) -> Text:
    """The lines under the table, each within 80 columns: time, then the link (or one line per link).

    Once every flow has ended the rows hold whole-run rates and the line says so, with Jain's index over them.
    """
    clock = f"t = {state.elapsed_s:5.1f}/{state.duration_s:g} s"
    if state.ended:
        head = f"{clock}  flows done: rows are whole-run Mbit/s  Jain {_jain(state.jain_run)}"
    else:
        util = state.link_bps / state.capacity_bps if state.capacity_bps else 0.0
        lid = state.links[0].id if state.links else "link"
        head = (
            f"{clock}  {lid} {state.link_bps / 1e6:.1f} of {state.capacity_bps / 1e6:g} Mbit/s ({util:.0%})  "
            f"queue {state.backlog_pkts} pkts  Jain {_jain(state.jain)}"
        )
    if len(state.links) <= 1:
        return Text(head)
    if not state.ended:
        head = clock
    rows = []
    for lk in state.links:
        u = lk.link_bps / lk.capacity_bps if lk.capacity_bps else 0.0
        rows.append(
            f"  {lk.id:<8} {lk.link_bps / 1e6:7.1f} of {lk.capacity_bps / 1e6:g} Mbit/s ({u:4.0%})"
            f"  queue {lk.backlog_pkts:4d} pkts  Jain {_jain(lk.jain)}"
        )
    return Text(head + "\n" + "\n".join(rows))


def _bar(state: LiveState) -> ProgressBar:
    return ProgressBar(total=max(state.duration_s, 1e-9), completed=min(state.elapsed_s, state.duration_s), width=60)


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

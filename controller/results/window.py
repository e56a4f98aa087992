"""A run's figures after a warm-up: what a report reads of summary.json, computed again over [warmup_s, end] from
the run's own time series, for the claims that leave a warm-up out (docs/claims.md, "Warm-up").

The window is made of whole polling intervals: the row of timeseries.csv, link.csv or links.csv at t covers the
interval from the poll before it to t, and it is in the window when t > warmup_s (so the window opens at the last
poll at or before warmup_s).  Each figure is summary.json's, computed the same way over those intervals alone:

- a flow's throughput: its bytes through the last link of its path in the window, over the time from the start
  of its first window interval that carried any to the end of its last (summary.active_seconds): as if it had
  sent nothing before warmup_s.  A flow that starts later keeps its whole-run figure; one that moved no byte
  after warmup_s has none and is left out of every figure (the per-algorithm means, Jain's index, the ratios);
- Jain's index: over the spec flows that have a figure (an mptcp flow's subflows added up, as summary.json);
- an mptcp connection: its subflows' window bytes over the longest of their window times;
- utilization and the achieved rate: the first emulated link's departure rate (link.csv), time-weighted over the
  window's intervals up to the end of the traffic (summary.window_rate), over the link's rate;
- measured loss: random drops over wire packets (forwarded + random drops) of the flows at the first emulated
  link (links.csv) in the window; the whole-run figure counts every packet the link's counters saw;
- window recoveries (cwnd.csv): the window reductions seen at or after warmup_s (report.cwnd_recoveries).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.measure.metrics import jain
from controller.results import summary as summary_mod
from controller.results.plots import _read

TIMESERIES, LINK, LINKS, CWND = "timeseries.csv", "link.csv", "links.csv", "cwnd.csv"
#: every metric a report's rows carry, and the run file its figure after a warm-up is computed from
SOURCES = {
    "utilization": LINK,
    "achieved_mbps": LINK,
    "measured_loss": LINKS,
    "total_throughput_mbps": TIMESERIES,
    "jain": TIMESERIES,
    "flow_throughput_mbps": TIMESERIES,
    "flow_throughput_ratio": TIMESERIES,
    "rtt_short_over_long": TIMESERIES,
    "subflow_throughput_mbps": TIMESERIES,
    "path_flow_throughput_mbps": TIMESERIES,
    "connection_throughput_mbps": TIMESERIES,
    "connection_over_path_flow": TIMESERIES,
    "cwnd_recovery_s": CWND,
}


def traffic_end_s(summ: dict[str, Any]) -> float:
    """When the run's traffic was scheduled to end, s (the last flow's end; summary.json's link figures end there)."""
    ends = [f["start_s"] + f["duration_s"] for f in summ["flows"] if "start_s" in f and "duration_s" in f]
    return max(ends) if ends else float(summ["duration_s"])


def unfit(run_dir: Path, summ: dict[str, Any], warmup_s: float, metric: str) -> str | None:
    """Why this run cannot give `metric` after warmup_s (one clause), or None when it can."""
    source = SOURCES.get(metric)
    if source is None:
        return f"metric {metric!r} has no figure after a warm-up (known: {', '.join(SOURCES)})"
    end = traffic_end_s(summ)
    if warmup_s >= end:
        return f"run {run_dir} has traffic for {end:g} s only, not past warmup_s = {warmup_s:g}"
    if not (run_dir / source).exists():
        return f"{metric} after a warm-up is computed from {source}, which run {run_dir} lacks"
    return None


def _flows(run_dir: Path, summ: dict[str, Any], warmup_s: float) -> list[dict[str, Any]]:
    """summary.json's flow entries with bytes, active_s and throughput_bps over the window; those without a byte
    in it left out."""
    rows = []
    for r in _read(run_dir / TIMESERIES):
        t = float(r["t_s"])
        rows.append((t, r["flow"], int(r["bytes"]) if t > warmup_s else 0))
    active = summary_mod.active_seconds(rows, float(summ.get("interval_s") or 0.1))
    nbytes: dict[str, int] = {}
    for _t, fid, n in rows:
        nbytes[fid] = nbytes.get(fid, 0) + n
    out = []
    for f in summ["flows"]:
        secs = active.get(f["id"])
        if secs:
            b = nbytes[f["id"]]
            out.append({**f, "bytes": b, "active_s": round(secs, 3), "throughput_bps": b * 8 / secs})
    return out


def _link(run_dir: Path, summ: dict[str, Any], warmup_s: float) -> dict[str, Any]:
    """summary.json's bottleneck entry with achieved_bps, utilization and measured_loss over the window (None
    where the run lacks the file)."""
    first = dict(summ["bottleneck"])
    lid = summ["links"][0]["id"] if summ.get("links") else "l1"
    rows = [
        {"t_s": float(r["t_s"]), "link_bps": float(r["link_bps"]), "backlog_pkts": int(r["backlog_pkts"] or 0)}
        for r in _read(run_dir / LINK)
        if r.get("link", lid) == lid
    ]
    achieved, _busy = summary_mod.window_rate(rows, warmup_s, traffic_end_s(summ)) if rows else (None, 0.0)
    rate = first.get("rate_bps")
    first["achieved_bps"] = achieved
    first["utilization"] = None if achieved is None or not rate else achieved / rate
    lost = fwd = 0
    for r in _read(run_dir / LINKS):
        if r["link"] == lid and float(r["t_s"]) > warmup_s:
            lost += int(r["random_drops"])
            fwd += int(r["pkts"])
    first["measured_loss"] = lost / (fwd + lost) if fwd + lost else None
    return first


def windowed(run_dir: Path, summ: dict[str, Any], warmup_s: float) -> dict[str, Any]:
    """The run's summary.json with the figures a report reads (flows, jain, mptcp, bottleneck) over
    [warmup_s, end]; the rest as it is."""
    flows = _flows(run_dir, summ, warmup_s)
    conns = []
    for conn in summ.get("mptcp", []):
        subs = [f for f in flows if f["id"] in conn["subflows"]]
        if subs:
            conns.append({**conn, "throughput_bps": summary_mod.connection_bps(subs, 0.0)})
    return {
        **summ,
        "flows": flows,
        "mptcp": conns,
        "jain": jain(list(summary_mod.spec_flow_rates(flows).values())),
        "bottleneck": _link(run_dir, summ, warmup_s),
        "warmup_s": warmup_s,
    }

"""summary.json: the results contract (DESIGN.md), with the fidelity self-check.

Throughput is the in-network view: wire bytes forwarded at the bottleneck
egress per flow, over the flow's scheduled duration.  A run that misses its
spec says so in ``fidelity`` instead of passing silently.

The self-check judges the emulator, not the algorithm: a loss-limited flow
that leaves the link idle is a result, not a fault.  So the rate is checked
only where it can be, over the polling intervals with a standing backlog (the
queue held packets at both polls), where the link must depart at the spec's
rate; a run with no such interval lists the check under ``not_applicable``
with the reason.  ``ok`` is false only when a check that applies fails (or the
run is incomplete, or the runner reports a part of the spec it did not
emulate, e.g. a delay skipped for want of netem).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.dataplane import FlowCounters, Snapshot
from controller.metrics import binomial_interval, jain
from controller.monitor import MonitoredFlow, Series
from controller.spec import Spec

#: departure rate / configured rate over the intervals with a standing backlog
BACKLOGGED_RATE_TOLERANCE = (0.98, 1.02)
#: fewest backlogged polling intervals for the rate check to apply
MIN_BACKLOGGED_INTERVALS = 5
#: packets queued at a poll for a standing backlog: one may be the packet on the wire, so one more waits
STANDING_BACKLOG_PKTS = 2
#: in-network throughput / iperf3 goodput: wire bytes carry 66-byte headers per 1448
GOODPUT_TOLERANCE = (0.98, 1.07)
#: measured base RTT against 2 x one-way delay, ms
RTT_TOLERANCE_MS = 2.0
#: CPU busy fraction above which the emulator may be the bottleneck
CPU_BUSY_LIMIT = 0.95
#: first seconds excluded from the achieved-rate window (slow start)
WARMUP_S = 1.0


@dataclass
class Check:
    name: str
    value: float | None
    lo: float | None
    hi: float | None
    note: str = ""

    @property
    def ok(self) -> bool:
        if self.value is None:
            return True
        return (self.lo is None or self.value >= self.lo) and (self.hi is None or self.value <= self.hi)

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "ok": self.ok, "note": self.note}


def _window_rate(series: Series, start_s: float, end_s: float) -> tuple[float | None, float]:
    """Link rate over the polls in [start_s, end_s], time-weighted (bytes / seconds); and the share of polls
    that found a backlog.  Weighting by each interval's length keeps one late poll (and the short interval
    after it) from skewing the mean."""
    bits = secs = 0.0
    busy = n = 0
    prev_t = 0.0
    for r in series.link:
        t = r["t_s"]
        if start_s < t <= end_s + 1e-6:
            bits += r["link_bps"] * (t - prev_t)
            secs += t - prev_t
            busy += r["backlog_pkts"] > 0
            n += 1
        prev_t = t
    if n < 2 or secs <= 0:
        return None, 0.0
    return bits / secs, busy / n


@dataclass(frozen=True)
class BackloggedRate:
    """The link's departure rate over the intervals in which its queue never ran empty (as far as polls see)."""

    ratio: float | None
    """Bits departed / bits the configured rate would send in those intervals; None without enough intervals."""
    rate_bps: float | None
    """Departure rate in those intervals, bit/s."""
    intervals: int
    """How many polling intervals had a standing backlog."""
    seconds: float
    """Their total length, s."""


def backlogged_rate(series: Series, start_s: float, end_s: float) -> BackloggedRate:
    """Departure rate over the polling intervals in [start_s, end_s] with a standing backlog: packets waiting
    (STANDING_BACKLOG_PKTS) at the polls that open and close the interval, and one configured rate throughout
    (a rate change inside an interval would mix two rates).  There the emulated link had work all the time, so
    it must send at its rate, whatever the flows' algorithms do; intervals in which the queue ran dry say
    nothing about the link."""
    bits = want = secs = 0.0
    n = 0
    prev: dict[str, Any] | None = None
    for r in series.link:
        t = r["t_s"]
        if (
            prev is not None
            and start_s < t <= end_s + 1e-6
            and prev["backlog_pkts"] >= STANDING_BACKLOG_PKTS
            and r["backlog_pkts"] >= STANDING_BACKLOG_PKTS
            and prev["capacity_bps"] == r["capacity_bps"]
        ):
            dt = t - prev["t_s"]
            bits += r["link_bps"] * dt
            want += r["capacity_bps"] * dt
            secs += dt
            n += 1
        prev = r
    if n < MIN_BACKLOGGED_INTERVALS or want <= 0:
        return BackloggedRate(None, None, n, secs)
    return BackloggedRate(bits / want, bits / secs, n, secs)


def build(
    spec: Spec,
    flows: list[MonitoredFlow],
    series: Series,
    goodputs: dict[str, float | None],
    *,
    complete: bool,
    reason: str | None,
    delay_applied: bool,
    cpu_busy: float | None,
    extra_notes: list[str],
) -> dict[str, Any]:
    last: Snapshot | None = series.last
    first: Snapshot | None = series.first
    zero = FlowCounters()
    by_id = {f.id: f for f in spec.flows}
    out_flows: list[dict[str, Any]] = []
    checks: list[Check] = []
    for mf in flows:
        c = last.flows.get(mf.key, zero) if last else zero
        c0 = first.flows.get(mf.key, zero) if first else zero
        sf = by_id[mf.id]
        nbytes = c.fwd_bytes - c0.fwd_bytes
        tput = nbytes * 8 / sf.duration_s
        gp = goodputs.get(mf.id)
        entry = {
            "id": mf.id,
            "algo": mf.algo,
            "src": sf.src,
            "dst": sf.dst,
            "start_s": sf.start_s,
            "duration_s": sf.duration_s,
            "five_tuple": [mf.key.src, mf.key.dst, mf.key.sport, mf.key.dport, "tcp"],
            "throughput_bps": round(tput, 1),
            "bytes": nbytes,
            "packets": c.fwd_pkts - c0.fwd_pkts,
            "random_drops": c.rnd_drop_pkts - c0.rnd_drop_pkts,
            "queue_drops": c.q_drop_pkts - c0.q_drop_pkts,
            "iperf_goodput_bps": gp,
        }
        out_flows.append(entry)
        if complete and gp:
            checks.append(Check(f"{mf.id}.throughput_over_goodput", round(tput / gp, 4), *GOODPUT_TOLERANCE))

    b = spec.bottleneck
    link = last.link if last else zero
    link0 = first.link if first else zero
    n_wire = (link.fwd_pkts + link.rnd_drop_pkts) - (link0.fwd_pkts + link0.rnd_drop_pkts)
    k_lost = link.rnd_drop_pkts - link0.rnd_drop_pkts
    measured_loss = k_lost / n_wire if n_wire else None
    end_s = max((f.start_s + f.duration_s for f in spec.flows), default=spec.duration_s)
    achieved, busy = _window_rate(series, min(WARMUP_S, end_s / 5), end_s)
    backlogged = backlogged_rate(series, min(WARMUP_S, end_s / 5), end_s)
    not_applicable: dict[str, str] = {}

    per_changes = any(s.per is not None for s in b.schedule) or b.gilbert_elliott is not None
    loss_interval = None
    if not per_changes and n_wire:
        loss_interval = binomial_interval(n_wire, b.per)
        checks.append(Check("random_drops_in_99pct_interval", k_lost, *loss_interval, note=f"n = {n_wire} packets"))
    if backlogged.ratio is not None:
        note = f"{backlogged.intervals} intervals, {backlogged.seconds:.1f} s with a standing backlog"
        value = round(backlogged.ratio, 4)
        checks.append(Check("backlogged_rate_over_rate", value, *BACKLOGGED_RATE_TOLERANCE, note=note))
    else:
        not_applicable["backlogged_rate_over_rate"] = (
            f"only {backlogged.intervals} polling intervals had a standing backlog (at least "
            f"{MIN_BACKLOGGED_INTERVALS} needed; queue busy at {busy:.0%} of polls): the flows did not fill the link"
        )
    if delay_applied:
        rtts = [r["min_rtt_us"] for r in series.tcpinfo if r["min_rtt_us"]]
        if not rtts:
            not_applicable["base_rtt_ms"] = "no RTT sample from tcp_info"
        if rtts:
            base_ms = min(rtts) / 1000
            want = 2 * b.delay_ms
            checks.append(Check("base_rtt_ms", round(base_ms, 3), want - RTT_TOLERANCE_MS, want + RTT_TOLERANCE_MS))
    if cpu_busy is not None:
        checks.append(Check("cpu_busy_fraction", round(cpu_busy, 3), None, CPU_BUSY_LIMIT))

    rates = [f["throughput_bps"] for f in out_flows]
    interval_j = [r["jain"] for r in series.link if r["jain"] is not None]
    notes = list(extra_notes)
    notes += [
        f"{c.name} = {c.value} outside [{c.lo}, {c.hi}]" + (f" ({c.note})" if c.note else "")
        for c in checks
        if not c.ok
    ]
    if not complete:
        notes.append(f"run incomplete: {reason}")
    return {
        "spec": str(spec.path) if spec.path else None,
        "name": spec.name,
        "dataplane": spec.dataplane,
        "complete": complete,
        "reason": reason,
        "duration_s": spec.duration_s,
        "interval_s": spec.interval_s,
        "seed": spec.seed,
        "bottleneck": {
            "rate_bps": b.rate_bps,
            "achieved_bps": None if achieved is None else round(achieved, 1),
            "utilization": None if achieved is None else round(achieved / b.rate_bps, 4),
            "queue_pkts": b.queue_pkts,
            "queue_bytes": b.queue_bytes,
            "delay_ms": b.delay_ms,
            "delay_applied": delay_applied,
            "per": b.per,
            "measured_loss": measured_loss,
            "loss_interval_99": loss_interval,
            "random_drops": k_lost,
            "queue_drops": link.q_drop_pkts - link0.q_drop_pkts,
            "wire_packets": n_wire,
            "shaper": b.shaper,
            "backlogged_rate_bps": None if backlogged.rate_bps is None else round(backlogged.rate_bps, 1),
            "backlogged_s": round(backlogged.seconds, 3),
        },
        "flows": out_flows,
        "jain": jain(rates),
        "jain_n": len(rates),
        "jain_flows": [f["id"] for f in out_flows],
        "jain_interval_mean": sum(interval_j) / len(interval_j) if interval_j else None,
        "fidelity": {
            "ok": complete and not notes,
            "notes": notes,
            "checks": {c.name: c.as_dict() for c in checks},
            "not_applicable": not_applicable,
        },
    }

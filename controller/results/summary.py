"""summary.json: the results contract (docs/measurement.md), with the fidelity self-check.

Throughput is the in-network view: wire bytes a flow got through the last
emulated link of its path, over the time they took to cross it (``active_s``;
a finite transfer: over its completion time).  Each emulated link has its own entry in
``links`` (per-flow counters, drops by cause, Jain's index over the flows
that cross it); ``bottleneck`` repeats the first of them for old readers.  A run that misses its
spec says so in ``fidelity`` instead of passing silently.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from controller.dataplane import FlowCounters
from controller.measure.metrics import binomial_interval, jain
from controller.measure.monitor import MonitoredFlow, Series
from controller.network import LinkSpec
from controller.spec import Flow, Spec
from controller.spec.model import MAX_MSS

#: departure rate / configured rate over the intervals with a standing backlog
BACKLOGGED_RATE_TOLERANCE = (0.98, 1.02)
#: the largest frame on an emulated link (a 1500-byte MTU and the Ethernet header): a shaper sends whole frames
FRAME_BYTES = 1514
#: fewest backlogged polling intervals for the rate check to apply
MIN_BACKLOGGED_INTERVALS = 5
#: packets queued at a poll for a standing backlog: one may be the packet on the wire, so one more waits
STANDING_BACKLOG_PKTS = 2
#: a data segment's frame beyond its MSS: Ethernet 14, IP 20 and TCP 20 bytes of headers
FRAME_OVER_MSS = 54
#: the options a TCP data segment's payload gives way to within its MSS: the timestamps
TCP_OPTION_BYTES = 12
#: the options an mptcp data segment's payload gives way to within its MSS: TCP's timestamps (12) and MPTCP's DSS
#: option (up to 28)
MPTCP_OPTION_BYTES = 40
#: a connection's wire bytes over its payload, beyond the data segments' own ratio: its handshakes, FINs and
#: segments short of a full MSS (retransmissions are added from the flow's own count)
WIRE_MARGIN = 1.013
#: measured base RTT against 2 x one-way delay, ms
RTT_TOLERANCE_MS = 2.0
#: CPU busy fraction above which the emulator may be the bottleneck
CPU_BUSY_LIMIT = 0.95
#: first seconds excluded from the achieved-rate window (slow start)
WARMUP_S = 1.0
#: the largest window any cclab algorithm sets (CC_MAX_CWND, hosts/cc/core/cc_common.h), packets; the kernel's
#: own stay far below it on every link cclab emulates
WINDOW_MAX_PKTS = 1 << 20
#: the ssthresh a TCP socket starts with (TCP_INFINITE_SSTHRESH), not a window anything set
INFINITE_SSTHRESH = 0x7FFFFFFF


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

    @classmethod
    def from_dict(cls, name: str, d: dict[str, Any]) -> Check:
        """The check summary.json holds (as_dict) under `name`."""
        return cls(name, d["value"], d["lo"], d["hi"], d.get("note", ""))

    def failure_note(self) -> str:
        """The fidelity note this check writes when it fails: "<name> = <value> outside [<lo>, <hi>] (<note>)"."""
        return f"{self.name} = {self.value} outside [{self.lo}, {self.hi}]" + (f" ({self.note})" if self.note else "")


def queue_never_emptied(rows: list[dict[str, Any]], path: list[str], start_s: float, end_s: float) -> bool:
    """Whether every poll in [start_s, end_s] found packets queued on at least one link of `path` (polls, so a
    queue that emptied between two of them is missed: this errs towards keeping a check)."""
    queued: dict[float, int] = {}
    for r in rows:
        if r.get("link") in path and start_s <= r["t_s"] <= end_s:
            t = round(r["t_s"], 2)
            queued[t] = queued.get(t, 0) + (r["backlog_pkts"] or 0)
    return bool(queued) and all(q > 0 for q in queued.values())


def rtt_checks(
    flows: list[dict[str, Any]], link_rows: Callable[[], list[dict[str, Any]]]
) -> tuple[list[Check], dict[str, str]]:
    """The base-RTT checks of a run where delay applies, from its summary's flows (``min_rtt_ms``, ``path``,
    ``base_rtt_ms``, start and duration) and its link polls (``link_rows``, called only where a path's shortest RTT
    is over its bound: a recorded run's link.csv is then read only for such a run): (checks, not applicable).

    Each flow from below only: the traffic's queues can raise a flow's minimum RTT, only the emulator lowers it.
    From both sides, the shortest RTT of the flows sharing a path and a base RTT (a flow that joins a queue the
    others keep, or whose packets always meet one, never samples the bare path while one beside it may), unless
    every poll while they ran found a queue on the path; and the network's shortest against the shortest base."""
    checks: list[Check] = []
    na: dict[str, str] = {}
    sampled = [f for f in flows if f.get("min_rtt_ms") is not None]
    if not sampled:
        return checks, {"base_rtt_ms": "no RTT sample from tcp_info"}
    polls = functools.cache(link_rows)
    groups: dict[tuple[tuple[str, ...], float], list[dict[str, Any]]] = {}
    for f in sampled:
        base = f["base_rtt_ms"]
        checks.append(
            Check(f"{f['id']}.base_rtt_ms", f["min_rtt_ms"], base - RTT_TOLERANCE_MS, None, f"spec {base:g} ms")
        )
        groups.setdefault((tuple(f["path"]), base), []).append(f)
    bases = Counter(path for path, _base in groups)
    for (path, base), members in groups.items():
        name = ("+".join(path) or "unlinked") + (f"@{base:g}ms" if bases[path] > 1 else "") + ".base_rtt_ms"
        got = min(f["min_rtt_ms"] for f in members)
        start = min(f["start_s"] for f in members)
        end = max(f["start_s"] + f["duration_s"] for f in members)
        if got > base + RTT_TOLERANCE_MS and queue_never_emptied(polls(), list(path), start, end):
            na[name] = f"min RTT {got:.3f} ms: every poll while its flows ran found a queue on the path"
        else:
            ids = ", ".join(f["id"] for f in members)
            checks.append(
                Check(name, got, base - RTT_TOLERANCE_MS, base + RTT_TOLERANCE_MS, f"spec {base:g} ms; {ids}")
            )
    want = min(f["base_rtt_ms"] for f in sampled)
    got = min(f["min_rtt_ms"] for f in sampled)
    checks.append(Check("base_rtt_ms", got, want - RTT_TOLERANCE_MS, want + RTT_TOLERANCE_MS))
    return checks, na


#: the name of wild_windows()' check
WILD_WINDOWS = "tcp_windows_beyond_max"


def wild_windows(rows: Iterable[dict[str, Any]], guarded: bool) -> Check | None:
    """The senders' tcp_info samples (cwnd.csv) whose cwnd, or ssthresh other than the initial one, lies beyond
    any window an algorithm sets: the stack took a window no algorithm gave it (docs/measurement.md).  Where the
    eBPF shells guard their windows (``guarded``: ccstate.csv has window_repairs), the guard puts such a window
    back on the flow's next ACK, before the window can grow toward a wild ssthresh: only a cwnd seen at two
    samples of a flow in a row counts.  None where the run has no sample."""
    n, first, seen = 0, None, False
    wild_before: set[str] = set()
    for r in rows:
        seen = True
        wild_cwnd = (r["cwnd_pkts"] or 0) > WINDOW_MAX_PKTS
        if guarded:
            wild = wild_cwnd and r["flow"] in wild_before
            (wild_before.add if wild_cwnd else wild_before.discard)(r["flow"])
        else:
            ss = r["ssthresh_pkts"] or 0
            wild = wild_cwnd or (ss > WINDOW_MAX_PKTS and ss != INFINITE_SSTHRESH)
        if wild:
            n += 1
            first = first or r
    if not seen:
        return None
    note = "windows guarded: a cwnd seen at two samples in a row counts" if guarded else ""
    if first is not None:
        note += ("; " if note else "") + (
            f"first: {first['flow']} at {first['t_s']} s, cwnd {first['cwnd_pkts']}, ssthresh {first['ssthresh_pkts']}"
        )
    return Check(WILD_WINDOWS, n, None, 0, note)


def guarded(ccstate_columns: Iterable[str]) -> bool:
    """Whether a run's algorithms guarded their windows: its ccstate.csv (columns) records their repairs."""
    return "window_repairs" in ccstate_columns


def is_rtt_check(name: str) -> bool:
    """Whether a fidelity check is one of rtt_checks()' (the network's, a path's or a flow's base RTT)."""
    return name == "base_rtt_ms" or name.endswith(".base_rtt_ms")


def rejudged(
    summ: dict[str, Any],
    link_rows: Callable[[], list[dict[str, Any]]],
    link_buckets: dict[str, int] | None = None,
    tcpinfo_rows: Callable[[], Iterable[dict[str, Any]]] | None = None,
    windows_guarded: bool = False,
) -> dict[str, Any]:
    """``summ``'s fidelity with its base-RTT checks judged by this version's rule (``rtt_checks``), from the run's
    own summary and link polls (``link_rows``, as rtt_checks takes them), its backlogged-rate checks with
    this version's bounds (backlogged_check(), ``link_buckets`` as build() takes them), and its senders' windows
    (wild_windows(), from ``tcpinfo_rows`` and ``windows_guarded``): runs recorded under an earlier rule are then
    judged alike."""
    fid = summ["fidelity"]
    delay = bool(summ.get("bottleneck", {}).get("delay_applied"))
    again = _backlogged_again(summ, link_buckets or {})
    windows = wild_windows(tcpinfo_rows(), windows_guarded) if tcpinfo_rows else None
    if not delay and not again and windows is None:
        return fid
    checks, na = rtt_checks(summ["flows"], link_rows) if delay else ([], {})
    checks += again
    checks += [windows] if windows else []
    redone = {c.name for c in checks}
    recorded = fid.get("checks", {})
    old = {n: c for n, c in recorded.items() if (delay and is_rtt_check(n)) or n in redone}
    stale = {Check.from_dict(n, c).failure_note() for n, c in old.items()}
    notes = [n for n in fid.get("notes", []) if n not in stale and not n.startswith("run incomplete:")]
    notes += [c.failure_note() for c in checks if not c.ok]
    if not summ.get("complete"):
        notes.append(f"run incomplete: {summ.get('reason')}")
    kept = {n: c for n, c in recorded.items() if n not in old}
    return {
        **fid,
        "ok": bool(summ.get("complete")) and not notes and all(c.get("ok", True) for c in kept.values()),
        "notes": notes,
        "checks": kept | {c.name: c.as_dict() for c in checks},
        "not_applicable": {n: w for n, w in fid.get("not_applicable", {}).items() if not (delay and is_rtt_check(n))}
        | na,
    }


def _backlogged_again(summ: dict[str, Any], link_buckets: dict[str, int]) -> list[Check]:
    """The run's backlogged-rate checks with this version's bounds, from the figures its summary recorded."""
    out = []
    links = summ.get("links") or [{"id": None, **summ.get("bottleneck", {})}]
    for i, lk in enumerate(links):
        name = "backlogged_rate_over_rate" if i == 0 else f"{lk['id']}.backlogged_rate_over_rate"
        c = summ["fidelity"].get("checks", {}).get(name)
        rate, secs = lk.get("backlogged_rate_bps"), lk.get("backlogged_s")
        if c is None or c.get("value") is None or rate is None or secs is None:
            continue
        note = str(c.get("note", "")).split("; +-", 1)[0]
        out.append(backlogged_check(name, c["value"], rate * secs, link_buckets.get(str(lk["id"]), 0), note))
    return out


def window_rate(rows: list[dict[str, Any]], start_s: float, end_s: float) -> tuple[float | None, float]:
    """Link rate over the polls in [start_s, end_s], time-weighted (bytes / seconds); and the share of polls
    that found a backlog.  Weighting by each interval's length keeps one late poll (and the short interval
    after it) from skewing the mean."""
    bits = secs = 0.0
    busy = n = 0
    prev_t = 0.0
    for r in rows:
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


def backlogged_rate(rows: list[dict[str, Any]], start_s: float, end_s: float) -> BackloggedRate:
    """A link's departure rate (its link.csv rows) over the polling intervals in [start_s, end_s] with a
    standing backlog: packets waiting (STANDING_BACKLOG_PKTS) at the polls that open and close the interval,
    no departure inside it that left the queue empty (`queue_empties` 0, where the target counts them: a queue
    that drains in less than a polling interval can run dry and refill between two polls), and one configured
    rate throughout (a rate change inside an interval would mix two rates).  There the emulated link had work
    all the time, so it must send at its rate, whatever the flows' algorithms do; intervals in which the queue
    ran dry say nothing about the link."""
    bits = want = secs = 0.0
    n = 0
    prev: dict[str, Any] | None = None
    for r in rows:
        t = r["t_s"]
        if (
            prev is not None
            and start_s < t <= end_s + 1e-6
            and prev["backlog_pkts"] >= STANDING_BACKLOG_PKTS
            and r["backlog_pkts"] >= STANDING_BACKLOG_PKTS
            and prev["capacity_bps"] == r["capacity_bps"]
            and not r.get("queue_empties")
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


def bucket_slack(bucket_bytes: int, capacity_bits: float) -> float:
    """How far off its rate a token-bucket shaper may be, and still conform, over a window in which its rate
    carries `capacity_bits`: in any window it sends at most its rate plus its bucket, and whole frames, so it
    may owe (or repay) the bucket and the frame on the wire at the window's edges. At 1.5 Mbit/s with a 2-frame
    bucket that is 3 frames: 0.24 of a 100 ms interval, under 2 % only past 1.2 s of standing backlog."""
    return (bucket_bytes + FRAME_BYTES) * 8 / capacity_bits if capacity_bits > 0 else 0.0


def backlogged_check(name: str, ratio: float, bits: float, bucket_bytes: int, note: str) -> Check:
    """The backlogged-rate check: `ratio` = the `bits` departed over what the configured rate would send in the
    backlogged intervals, within BACKLOGGED_RATE_TOLERANCE widened by the shaper's bucket_slack()."""
    slack = bucket_slack(bucket_bytes, bits / ratio if ratio > 0 else 0.0)
    lo, hi = BACKLOGGED_RATE_TOLERANCE
    note += f"; +-{slack:.4f} for whole frames and the shaper's bucket of {bucket_bytes} bytes"
    return Check(name, ratio, round(lo - slack, 4), round(hi + slack, 4), note=note)


def buckets(links: list[dict[str, Any]]) -> dict[str, int]:
    """Each emulated link's token-bucket depth, bytes, from the data plane's record of it (manifest.json's
    `links`, as the targets describe them: the kernel target's `burst_bytes`); links without one are not in it."""
    out: dict[str, int] = {}
    for entry in links:
        for v in entry.values():
            if isinstance(v, dict) and isinstance(v.get("burst_bytes"), int):
                out[str(entry.get("id"))] = v["burst_bytes"]
    return out


def _link_entry(
    lid: str,
    ls: LinkSpec,
    flows: list[MonitoredFlow],
    series: Series,
    end_s: float,
    checks: list[Check],
    not_applicable: dict[str, str],
    first_link: bool,
    bucket_bytes: int = 0,
) -> dict[str, Any]:
    """One emulated link's whole-run figures, its per-flow counters, and its fidelity checks (named
    "<link>.<check>"; the first link's without the prefix, as readers of one-bottleneck runs expect)."""
    zero = FlowCounters()
    pre = "" if first_link else f"{lid}."
    last, first = series.last.get(lid), series.first.get(lid)
    link = last.link if last else zero
    link0 = first.link if first else zero
    n_wire = (link.fwd_pkts + link.rnd_drop_pkts) - (link0.fwd_pkts + link0.rnd_drop_pkts)
    k_lost = link.rnd_drop_pkts - link0.rnd_drop_pkts
    rows = [r for r in series.link if r.get("link", lid) == lid]
    achieved, busy = window_rate(rows, min(WARMUP_S, end_s / 5), end_s)
    backlogged = backlogged_rate(rows, min(WARMUP_S, end_s / 5), end_s)
    per_changes = any(s.per is not None for s in ls.schedule) or ls.gilbert_elliott is not None
    loss_interval = None
    if not per_changes and n_wire:
        loss_interval = binomial_interval(n_wire, ls.per)
        checks.append(Check(f"{pre}random_drops_in_99pct_interval", k_lost, *loss_interval, note=f"n = {n_wire}"))
    if backlogged.ratio is not None and backlogged.rate_bps is not None:
        note = f"{backlogged.intervals} intervals, {backlogged.seconds:.1f} s with a standing backlog"
        checks.append(
            backlogged_check(
                f"{pre}backlogged_rate_over_rate",
                round(backlogged.ratio, 4),
                round(backlogged.rate_bps, 1) * round(backlogged.seconds, 3),
                bucket_bytes,
                note,
            )
        )
    else:
        not_applicable[f"{pre}backlogged_rate_over_rate"] = (
            f"only {backlogged.intervals} polling intervals had a standing backlog (at least "
            f"{MIN_BACKLOGGED_INTERVALS} needed; queue busy at {busy:.0%} of polls): the flows did not fill the link"
        )
    per_flow: dict[str, dict[str, int]] = {}
    tputs = []
    for mf in flows:
        if lid not in mf.links:
            continue
        c = last.flows.get(mf.key, zero) if last else zero
        c0 = first.flows.get(mf.key, zero) if first else zero
        per_flow[mf.id] = {
            "bytes": c.fwd_bytes - c0.fwd_bytes,
            "packets": c.fwd_pkts - c0.fwd_pkts,
            "offered_bytes": c.enq_bytes - c0.enq_bytes,
            "offered_packets": c.enq_pkts - c0.enq_pkts,
            "random_drops": c.rnd_drop_pkts - c0.rnd_drop_pkts,
            "queue_drops": c.q_drop_pkts - c0.q_drop_pkts,
        }
        tputs.append(float(per_flow[mf.id]["bytes"]))
    return {
        "id": lid,
        "rate_bps": ls.rate_bps,
        "achieved_bps": None if achieved is None else round(achieved, 1),
        "utilization": None if achieved is None else round(achieved / ls.rate_bps, 4),
        "queue_pkts": ls.queue_pkts,
        "queue_bytes": ls.queue_bytes,
        "delay_ms": ls.delay_ms,
        "per": ls.per,
        "measured_loss": k_lost / n_wire if n_wire else None,
        "loss_interval_99": loss_interval,
        "random_drops": k_lost,
        "queue_drops": link.q_drop_pkts - link0.q_drop_pkts,
        "wire_packets": n_wire,
        "shaper": ls.shaper,
        "backlogged_rate_bps": None if backlogged.rate_bps is None else round(backlogged.rate_bps, 1),
        "backlogged_s": round(backlogged.seconds, 3),
        "jain": jain(tputs),
        "jain_flows": list(per_flow),
        "flows": per_flow,
    }


def active_seconds(rows: Iterable[tuple[float, str, int]], interval_s: float) -> dict[str, float]:
    """Per flow, the time its bytes crossed its last link, from its (t_s, flow, bytes) rows of timeseries.csv:
    from the start of the first polling interval in which any did to the end of the last.  A flow's own
    start-up and the queue it leaves to drain after its sender stops belong to it; the scheduled duration would
    miss them (several percent of a short run)."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    prev_t: dict[str, float] = {}
    for t, fid, nbytes in rows:
        if nbytes > 0:
            first.setdefault(fid, prev_t.get(fid, max(0.0, t - interval_s)))
            last[fid] = t
        prev_t[fid] = t
    return {fid: last[fid] - first[fid] for fid in first if last[fid] > first[fid]}


def spec_flow_rates(flows: list[dict[str, Any]]) -> dict[str, float]:
    """Each spec flow's throughput_bps, as whole-run fairness (`jain`) takes them: an mptcp flow's subflows add
    up to the one flow they are."""
    per_flow: dict[str, float] = {}
    for f in flows:
        per_flow[f["flow"]] = per_flow.get(f["flow"], 0.0) + f["throughput_bps"]
    return per_flow


def connection_bps(subflows: list[dict[str, Any]], fallback_s: float) -> float:
    """An mptcp connection's throughput: its subflows' bytes over the longest of their active times (fallback_s
    where none has one)."""
    secs = max((f["active_s"] or 0.0 for f in subflows), default=0.0) or fallback_s
    return sum(f["bytes"] for f in subflows) * 8 / secs


def wire_over_payload_max(mss: int, options: int = TCP_OPTION_BYTES) -> float:
    """The most wire bytes a connection whose segments are ``mss`` bytes long (its flow's mss_bytes, or the links'
    largest) and carry ``options`` bytes of TCP options puts on a link per payload byte, retransmissions aside:
    1514 / 1448 for full-size TCP segments, 1514 / 1420 for mptcp's, more as segments shrink (mptcp's 1000-byte
    ones: 1054 / 960), widened by WIRE_MARGIN."""
    return round((mss + FRAME_OVER_MSS) / (mss - options) * WIRE_MARGIN, 4)


def wire_over_received(
    cid: str, wire_bytes: int, received: int, pkts: int, retrans: int, mss: int, options: int, sent: int | None = None
) -> Check:
    """A connection's wire bytes on its last link over the payload its receiver read: bytes, not rates (the
    network's polls and the receiver's clock measure different spans, far apart in an emulated VM). The wire
    carries each segment's headers and the retransmissions on top of that payload, so never less than it. Where
    the receiver may stop counting before the last byte crosses (``sent``: what the sender wrote, every byte that
    can cross), the upper bound is taken against what was sent."""
    hi = (wire_over_payload_max(mss, options) + retrans / max(1, pkts)) * max(1.0, (sent or 0) / received)
    notes = [f"{retrans} retransmitted segments" if retrans else "", f"sent {sent}" if sent else ""]
    note = ", ".join(n for n in notes if n)
    return Check(f"{cid}.wire_over_received_bytes", round(wire_bytes / received, 4), 1.0, round(hi, 4), note)


def _mptcp_entry(
    sf: Flow,
    out_flows: list[dict[str, Any]],
    series: Series,
    goodputs: dict[str, float | None],
    traffic: dict[str, dict[str, Any]],
    retrans: dict[str, int],
    complete: bool,
    checks: list[Check],
) -> dict[str, Any]:
    """One mptcp connection: its subflows' bytes added up, and what the algorithm's own state says of the
    coupling — cclab's coupled mptcpw exports, per subflow, the connection's MPTCP token and the number of
    subflows it couples; one token shared by every subflow, each seeing them all, is the coupled form at work."""
    subs = [f for f in out_flows if f["flow"] == sf.id]
    nbytes = sum(f["bytes"] for f in subs)
    tput = connection_bps(subs, sf.duration_s)
    gp = goodputs.get(sf.id)
    ids = {f["id"] for f in subs}
    rows = [r for r in series.ccstate if r["flow"] in ids and "mptcp_token" in r]
    # token 0: a subflow's state exported before it was attached to its connection (its first ACKs, or a join
    # whose handshake a lossy path delayed); it says nothing about the coupling
    joined = [r for r in rows if r["mptcp_token"]]
    tokens = {r["mptcp_token"] for r in joined}
    seen = {r["flow"] for r in rows}
    most = max((int(r.get("subflows") or 0) for r in rows), default=0)
    coupled = bool(joined) and {r["flow"] for r in joined} == ids and len(tokens) == 1 and most == len(ids)
    entry = {
        "id": sf.id,
        "algo": sf.algo,
        "subflows": [f["id"] for f in subs],
        "bytes": nbytes,
        "throughput_bps": round(tput, 1),
        "goodput_bps": gp,
        "offered_bytes": traffic.get(sf.id, {}).get("offered_bytes"),
        "received_bytes": traffic.get(sf.id, {}).get("received_bytes"),
        "coupling": {
            "coupled": coupled,
            "subflows_in_state": sorted(seen),
            "tokens": sorted(tokens),
            "samples_before_joining": len(rows) - len(joined),
            "most_subflows_coupled": most,
            "how": "the algorithm's own state (ccstate.csv): one MPTCP token on every subflow, each coupling them all"
            if rows
            else f"{sf.algo} exports no coupling state: its subflows run uncoupled",
        },
    }
    # the sender's namespace's MPTCP counters: how the connection joined or fell back to TCP, and the data it sent
    # again on a subflow after another lost it (MPTCPRetrans), new to that subflow's TCP and so in no subflow's count
    counters = traffic.get(sf.id, {}).get("mptcp_counters")
    if counters is not None:
        entry["sender_mptcp_counters"] = counters
    reinjected = (counters or {}).get("MPTCPRetrans", 0)
    if complete:
        # a subflow that never carried a byte (its join never happened) leaves a one-path run in a two-path spec
        carrying = sum(1 for f in subs if f["bytes"])
        idle = ", ".join(f["id"] for f in subs if not f["bytes"])
        why = ", ".join(f"{k} {v}" for k, v in (counters or {}).items() if re.search("Fallback|Drop|Disabled", k))
        note = (f"idle: {idle}" + (f"; the sender's {why}" if why else "")) if idle else ""
        checks.append(Check(f"{sf.id}.subflows_carrying_data", carrying, len(subs), None, note))
    got = traffic.get(sf.id, {}).get("received_bytes")
    if complete and got:
        n_pkts = sum(f["packets"] for f in subs)
        n_retrans = sum(retrans.get(i, 0) for i in ids) + reinjected
        checks.append(
            wire_over_received(sf.id, nbytes, got, n_pkts, n_retrans, sf.mss_bytes or MAX_MSS, MPTCP_OPTION_BYTES)
        )
    return entry


def build(
    spec: Spec,
    flows: list[MonitoredFlow],
    series: Series,
    goodputs: dict[str, float | None],
    *,
    paths: dict[str, tuple[list[str], float]] | None = None,
    traffic: dict[str, dict[str, Any]] | None = None,
    complete: bool,
    reason: str | None,
    delay_applied: bool,
    cpu_busy: float | None,
    extra_notes: list[str],
    link_buckets: dict[str, int] | None = None,
) -> dict[str, Any]:
    """summary.json; ``paths``: flow -> (emulated links crossed, spec base RTT ms); ``traffic``: the
    traffic generators' own reports (completion time, offered bytes); ``link_buckets``: each link's shaper
    bucket, bytes (buckets())."""
    paths, traffic = paths or {}, traffic or {}
    by_id = {f.id: f for f in spec.flows}
    checks: list[Check] = []
    not_applicable: dict[str, str] = {}
    notes = list(extra_notes)
    end_s = max((f.start_s + f.duration_s for f in spec.flows), default=spec.duration_s)
    emulated = {e.id: e.spec for e in spec.graph.emulated()}
    links = [
        _link_entry(lid, ls, flows, series, end_s, checks, not_applicable, i == 0, (link_buckets or {}).get(lid, 0))
        for i, (lid, ls) in enumerate(emulated.items())
    ]
    by_link = {lk["id"]: lk for lk in links}
    active_s = active_seconds(((t, fid, n) for t, fid, _algo, n, *_rest in series.timeseries), spec.interval_s)
    min_rtts: dict[str, float] = {}
    retrans: dict[str, int] = {}
    repairs: dict[str, int] = {}
    for r in series.ccstate:
        if r.get("window_repairs") is not None:
            repairs[r["flow"]] = max(repairs.get(r["flow"], 0), r["window_repairs"])
    for r in series.tcpinfo:
        retrans[r["flow"]] = max(retrans.get(r["flow"], 0), r["total_retrans"] or 0)
        if r["min_rtt_us"]:
            min_rtts[r["flow"]] = min(min_rtts.get(r["flow"], 1e18), r["min_rtt_us"] / 1000)
    out_flows: list[dict[str, Any]] = []
    for mf in flows:
        sf = by_id[mf.flow_id]
        path, base_rtt = paths.get(mf.id, (list(mf.links), 0.0))
        hops = [by_link[lid]["flows"][mf.id] for lid in path if lid in by_link]
        at_end = hops[-1] if hops else {"bytes": 0, "packets": 0, "offered_bytes": 0}
        rep = traffic.get(mf.id, {})  # an mptcp flow's generator reports for the flow, not its subflows
        active = active_s.get(mf.id)
        secs = rep.get("completion_s") or active or sf.duration_s
        tput = at_end["bytes"] * 8 / secs
        gp = goodputs.get(mf.id)
        min_rtt = min_rtts.get(mf.id)
        entry = {
            "id": mf.id,
            "flow": mf.flow_id,
            "kind": sf.kind,
            "algo": mf.algo,
            "src": sf.src,
            "dst": sf.dst,
            "start_s": sf.start_s,
            "duration_s": sf.duration_s,
            "active_s": None if active is None else round(active, 3),
            "five_tuple": [mf.key.src, mf.key.dst, mf.key.sport, mf.key.dport, "tcp" if sf.is_tcp else "udp"],
            "path": path,
            "base_rtt_ms": base_rtt if delay_applied else 0.0,
            "min_rtt_ms": None if min_rtt is None else round(min_rtt, 3),
            "throughput_bps": round(tput, 1),
            "bytes": at_end["bytes"],
            "packets": at_end["packets"],
            "random_drops": sum(h["random_drops"] for h in hops),
            "queue_drops": sum(h["queue_drops"] for h in hops),
            "iperf_goodput_bps": gp,
            "completion_s": rep.get("completion_s"),
            "offered_bytes": rep.get("offered_bytes"),
            "window_repairs": repairs.get(mf.id),
        }
        out_flows.append(entry)
        # a finite transfer's ratio mixes its start-up and retransmissions into few bytes: not a check of the emulator.
        # iperf3 3.18 (the lab VM's and the box's Debian 13) counts what its receiver read in whole blocks
        # (128 KiB) until the test's end, a block or more short of what crossed (this host's 3.12 counts every
        # byte): what its sender wrote bounds the wire from above
        got = rep.get("received_bytes")
        if complete and got and sf.is_tcp and sf.bytes is None:
            checks.append(
                wire_over_received(
                    mf.id,
                    at_end["bytes"],
                    got,
                    at_end["packets"],
                    retrans.get(mf.id, 0),
                    sf.mss_bytes or MAX_MSS,
                    TCP_OPTION_BYTES,
                    sent=rep.get("offered_bytes"),
                )
            )
    if delay_applied:
        rtt, rtt_na = rtt_checks(out_flows, lambda: series.link)
        checks += rtt
        not_applicable |= rtt_na
    if cpu_busy is not None:
        checks.append(Check("cpu_busy_fraction", round(cpu_busy, 3), None, CPU_BUSY_LIMIT))
    # repairs has a flow wherever ccstate.csv recorded window_repairs: the run's algorithms guarded their windows
    if (windows := wild_windows(series.tcpinfo, bool(repairs))) is not None:
        checks.append(windows)
    mptcp = [
        _mptcp_entry(sf, out_flows, series, goodputs, traffic, retrans, complete, checks)
        for sf in spec.flows
        if sf.is_mptcp
    ]

    per_flow = spec_flow_rates(out_flows)
    rates = list(per_flow.values())
    interval_j = [r["jain"] for r in series.link if r["jain"] is not None and r.get("link", "l1") == links[0]["id"]]
    notes += [c.failure_note() for c in checks if not c.ok]
    if not complete:
        notes.append(f"run incomplete: {reason}")
    first = dict(links[0])
    first.pop("flows")
    first.pop("id")
    first["delay_applied"] = delay_applied
    return {
        "spec": str(spec.path) if spec.path else None,
        "name": spec.name,
        "dataplane": spec.dataplane,
        "topology": spec.topology.kind,
        "complete": complete,
        "reason": reason,
        "duration_s": spec.duration_s,
        "interval_s": spec.interval_s,
        "seed": spec.seed,
        "bottleneck": first,
        "links": links,
        "flows": out_flows,
        "mptcp": mptcp,
        "jain": jain(rates),
        "jain_n": len(rates),
        "jain_flows": list(per_flow),
        "jain_interval_mean": sum(interval_j) / len(interval_j) if interval_j else None,
        "fidelity": {
            "ok": complete and not notes,
            "notes": notes,
            "checks": {c.name: c.as_dict() for c in checks},
            "not_applicable": not_applicable,
        },
    }

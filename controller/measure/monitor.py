"""Polls every emulated link's counters each interval and derives the time series.

Per interval, link and flow crossing it: wire bytes forwarded, the rate,
random and queue drops (links.csv); per flow, the same at the last emulated
link of its path, what it delivered through the network (timeseries.csv, its
drops summed over the path); per interval and link: utilization, backlog, and
Jain's index over the flows that moved bytes through it (link.csv).  The
senders' tcp_info is sampled on the same clock.  Deadlines are absolute, so
polling does not drift.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller import system
from controller.dataplane import FlowCounters, FlowKey, Snapshot
from controller.measure.ccstate import CcStateReader, ExportKey
from controller.measure.metrics import jain, rate_bps
from controller.spec import CCLAB_ALGOS
from hosts.tcpinfo import TcpInfoSampler, TcpSample

log = logging.getLogger(__name__)
ZERO = FlowCounters()


class CounterSource(Protocol):
    def read(self) -> Snapshot: ...


@dataclass(frozen=True)
class MonitoredFlow:
    """A flow the monitor follows: its id and the 5-tuple the data plane counts."""

    id: str
    algo: str
    key: FlowKey
    sender: str
    """Name of the sending host (whose tcp_info sampler to ask)."""
    links: tuple[str, ...] = ("l1",)
    """The emulated links the flow crosses, in path order."""
    end_s: float | None = None
    """When its schedule ends, seconds after traffic starts (None: not known); the live view then keeps its
    whole-run figures."""
    flow: str = ""
    """The spec's flow this is: an mptcp flow's id for each of its subflows; "" for the flow itself."""

    @property
    def flow_id(self) -> str:
        return self.flow or self.id


@dataclass(frozen=True)
class MonitoredLink:
    """An emulated link the monitor polls: its id, counter source and current rate."""

    id: str
    source: CounterSource
    capacity_bps: Callable[[], float]


@dataclass
class FlowView:
    """The live numbers of one flow after the latest interval."""

    id: str
    algo: str
    rate_bps: float = 0.0
    total_bytes: int = 0
    rnd_drops: int = 0
    q_drops: int = 0
    cwnd_pkts: int | None = None
    srtt_us: int | None = None
    mean_bps: float = 0.0
    """Whole-run rate so far: its bytes over the intervals from its first byte to its last (as summary.json)."""
    ended: bool = False
    """Its schedule is over: a view shows mean_bps, not the last interval's (zero) rate."""
    first_t_s: float | None = None
    """Start of the interval of its first byte."""
    last_t_s: float = 0.0
    """End of the interval of its latest byte."""


@dataclass
class LinkView:
    """The live numbers of one emulated link after the latest interval."""

    id: str
    link_bps: float = 0.0
    capacity_bps: float = 0.0
    backlog_pkts: int = 0
    jain: float | None = None


@dataclass
class LiveState:
    """What a live view shows: the latest interval and totals so far (the first link's numbers at the top)."""

    elapsed_s: float = 0.0
    duration_s: float = 0.0
    capacity_bps: float = 0.0
    link_bps: float = 0.0
    backlog_pkts: int = 0
    jain: float | None = None
    flows: list[FlowView] = field(default_factory=list)
    links: list[LinkView] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        """Every flow's schedule is over: the view shows the run as a whole."""
        return bool(self.flows) and all(f.ended for f in self.flows)

    @property
    def jain_run(self) -> float | None:
        """Jain's index over the flows' whole-run rates so far (summary.json's `jain` at the end)."""
        return jain([f.mean_bps for f in self.flows])


@dataclass
class Series:
    """Everything the monitor recorded, in rows ready for CSV."""

    timeseries: list[tuple[Any, ...]] = field(default_factory=list)
    """flow x interval, FLOW_COLUMNS"""
    link: list[dict[str, Any]] = field(default_factory=list)
    links: list[tuple[Any, ...]] = field(default_factory=list)
    """link x flow x interval, LINK_FLOW_COLUMNS"""
    tcpinfo: list[dict[str, Any]] = field(default_factory=list)
    ccstate: list[dict[str, Any]] = field(default_factory=list)
    first: dict[str, Snapshot] = field(default_factory=dict)
    """link id -> the read before traffic started"""
    last: dict[str, Snapshot] = field(default_factory=dict)
    """link id -> the read after traffic ended"""


#: columns of a links.csv row (link x flow x interval); rows are tuples in this order (cheap at 10 Hz x 1000s)
LINK_FLOW_COLUMNS = (
    "t_s",
    "link",
    "flow",
    "algo",
    "bytes",
    "offered_bytes",
    "pkts",
    "rate_bps",
    "random_drops",
    "queue_drops",
    "cum_bytes",
)
#: columns of a timeseries.csv row (flow x interval: at its last link, drops over its path)
FLOW_COLUMNS = tuple(c for c in LINK_FLOW_COLUMNS if c != "link")


class Monitor:
    """A polling thread; start(), then stop() returns the recorded Series."""

    def __init__(
        self,
        links: list[MonitoredLink],
        flows: list[MonitoredFlow],
        interval_s: float,
        samplers: dict[str, TcpInfoSampler] | None = None,
        on_update: Callable[[LiveState], None] | None = None,
        duration_s: float = 0.0,
        ccstate: CcStateReader | None = None,
    ) -> None:
        self.links = links
        self.flows = flows
        self.interval_s = interval_s
        self.samplers = samplers or {}
        self.on_update = on_update
        self.duration_s = duration_s
        self.ccstate = ccstate
        # cclab algorithms without an export map run as modules: their state comes with tcp_info
        self._module_algos = {
            f.algo for f in flows if f.algo in CCLAB_ALGOS and (ccstate is None or not ccstate.maps.get(f.algo))
        }
        self.series = Series()
        self.error: BaseException | None = None
        self.cpu_busy_fraction: float | None = None
        #: how late each poll woke against its schedule (s): also the polls' own time, when they fall behind
        self.poll_late_s: list[float] = []
        #: how much later than asked each wait for a poll's time ended (s): the machine's own timer and scheduling delay
        self.wake_late_s: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cclab-monitor", daemon=True)
        self._t0 = 0.0
        self._prev_t: float | None = None
        self._cpu0 = (0, 0)
        # per link: (flow index, flow, whether the link is the last on the flow's path)
        self._on_link = [
            [(i, f, f.links[-1] == lk.id) for i, f in enumerate(flows) if lk.id in f.links] for lk in links
        ]
        self._ports: dict[str, set[int]] = {}  # sender host -> client ports
        for f in flows:
            self._ports.setdefault(f.sender, set()).add(f.key.sport)
        self.live = LiveState(
            duration_s=duration_s,
            flows=[FlowView(f.id, f.algo) for f in flows],
            links=[LinkView(lk.id) for lk in links],
        )

    def start(self, t0: float) -> None:
        """Start polling; t0 (time.monotonic) is time zero of every row."""
        self._t0 = t0
        self._cpu0 = system.cpu_busy_total(system.cpu_jiffies())
        self.series.first = self._read()
        self._thread.start()

    def _read(self) -> dict[str, Snapshot]:
        return {lk.id: lk.source.read() for lk in self.links}

    def stop(self) -> Series:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        busy, total = system.cpu_busy_total(system.cpu_jiffies())
        if total > self._cpu0[1]:
            self.cpu_busy_fraction = (busy - self._cpu0[0]) / (total - self._cpu0[1])
        try:
            self.series.last = self._read()
        except OSError as exc:  # the data plane may be gone after an error
            log.warning("final counter read failed: %s", exc)
        # the traffic is over: the last frame a view shows holds every flow's whole-run rate
        for view in self.live.flows:
            view.ended = True
        if self.on_update is not None and self.series.timeseries:
            self.on_update(self.live)
        return self.series

    def timing(self) -> dict[str, Any]:
        """How late the polls were (ms; median, 99th percentile, most): against their schedule (`late_ms_*`), and, of
        those that waited for their time, against the time they asked to wake (`wake_ms_*`)."""
        out: dict[str, Any] = {"polls": len(self.poll_late_s), "waited": len(self.wake_late_s)}
        for name, xs in (("late", self.poll_late_s), ("wake", self.wake_late_s)):
            late = sorted(xs)
            n = len(late)
            out[f"{name}_ms_p50"] = round(late[n // 2] * 1e3, 2) if n else None
            out[f"{name}_ms_p99"] = round(late[min(n - 1, n * 99 // 100)] * 1e3, 2) if n else None
            out[f"{name}_ms_max"] = round(late[-1] * 1e3, 2) if n else None
        return out

    def _loop(self) -> None:
        prev = self.series.first
        assert prev is not None
        deadline = time.monotonic()
        try:
            while not self._stop.is_set():
                deadline += self.interval_s
                asked = deadline - time.monotonic()
                if not self._stop.wait(max(0.0, asked)):
                    late = time.monotonic() - deadline
                    self.poll_late_s.append(max(0.0, late))
                    if asked > 0:
                        self.wake_late_s.append(max(0.0, late))
                snap = self._read()
                self._interval(prev, snap)
                prev = snap
        except BaseException as exc:  # reported by the runner
            log.error("monitor stopped: %s", exc)
            self.error = exc

    def _interval(self, prev: dict[str, Snapshot], snap: dict[str, Snapshot]) -> None:
        t = 0.0
        zero = ZERO
        n = len(self.flows)
        # per flow: the counters at the last link of its path, and its drops summed over the path
        delivered: list[tuple[FlowCounters, FlowCounters, float]] = [(zero, zero, 0.0)] * n
        drops = [[0, 0, 0, 0] for _ in range(n)]  # random now, queue now, random before, queue before
        rows = self.series.links
        for li, lk in enumerate(self.links):
            now_s, was_s = snap[lk.id], prev[lk.id]
            dt = now_s.t - was_s.t
            t = round(now_s.t - self._t0, 4)
            nowf, wasf = now_s.flows, was_s.flows
            rates: list[float] = []
            for fi, flow, last in self._on_link[li]:
                now, was = nowf.get(flow.key, zero), wasf.get(flow.key, zero)
                d_bytes = now.fwd_bytes - was.fwd_bytes
                r = d_bytes * 8 / dt if dt > 0 else 0.0
                if d_bytes > 0:
                    rates.append(r)
                rows.append(
                    (
                        t,
                        lk.id,
                        flow.id,
                        flow.algo,
                        d_bytes,
                        now.enq_bytes - was.enq_bytes,
                        now.fwd_pkts - was.fwd_pkts,
                        r,
                        now.rnd_drop_pkts - was.rnd_drop_pkts,
                        now.q_drop_pkts - was.q_drop_pkts,
                        now.fwd_bytes,
                    )
                )
                acc = drops[fi]
                acc[0] += now.rnd_drop_pkts
                acc[1] += now.q_drop_pkts
                acc[2] += was.rnd_drop_pkts
                acc[3] += was.q_drop_pkts
                if last:
                    delivered[fi] = (now, was, r)
            link_bytes = (now_s.link.fwd_bytes + now_s.link.rnd_drop_bytes) - (
                was_s.link.fwd_bytes + was_s.link.rnd_drop_bytes
            )
            j = jain(rates)
            cap = lk.capacity_bps()
            self.series.link.append(
                {
                    "t_s": t,
                    "link": lk.id,
                    "link_bps": round(rate_bps(link_bytes, dt), 1),
                    "capacity_bps": cap,
                    "backlog_pkts": now_s.backlog_pkts,
                    "jain": None if j is None else round(j, 5),
                    "active_flows": len(rates),
                    "random_drops": now_s.link.rnd_drop_pkts - was_s.link.rnd_drop_pkts,
                    "queue_drops": now_s.link.q_drop_pkts - was_s.link.q_drop_pkts,
                    "queue_empties": None
                    if now_s.empties is None or was_s.empties is None
                    else now_s.empties - was_s.empties,
                }
            )
            lv = self.live.links[li]
            lv.capacity_bps, lv.link_bps = cap, rate_bps(link_bytes, dt)
            lv.backlog_pkts, lv.jain = now_s.backlog_pkts, j
        if self.live.links:
            top = self.live.links[0]
            self.live.capacity_bps, self.live.link_bps = top.capacity_bps, top.link_bps
            self.live.backlog_pkts, self.live.jain = top.backlog_pkts, top.jain
        ts = self.series.timeseries
        for flow, view, (now, was, r), acc in zip(self.flows, self.live.flows, delivered, drops):
            view.rate_bps, view.total_bytes = r, now.fwd_bytes
            if now.fwd_bytes > was.fwd_bytes:
                if view.first_t_s is None:  # as summary.json's active_s: from the previous interval's end
                    view.first_t_s = self._prev_t if self._prev_t is not None else max(0.0, t - self.interval_s)
                view.last_t_s = t
            if view.first_t_s is not None and view.last_t_s > view.first_t_s:
                first = self.series.first.get(flow.links[-1])
                base = first.flows.get(flow.key, zero).fwd_bytes if first is not None else 0
                view.mean_bps = (now.fwd_bytes - base) * 8 / (view.last_t_s - view.first_t_s)
            view.ended = flow.end_s is not None and t >= flow.end_s
            view.rnd_drops, view.q_drops = acc[0], acc[1]
            ts.append(
                (
                    t,
                    flow.id,
                    flow.algo,
                    now.fwd_bytes - was.fwd_bytes,
                    now.enq_bytes - was.enq_bytes,
                    now.fwd_pkts - was.fwd_pkts,
                    r,
                    acc[0] - acc[2],
                    acc[1] - acc[3],
                    now.fwd_bytes,
                )
            )
        self._prev_t = t
        self._sample_tcpinfo(t)
        self._sample_ccstate(t)
        self.live.elapsed_s = t
        if self.on_update is not None:
            self.on_update(self.live)

    def _sample_tcpinfo(self, t: float) -> None:
        views = {f.key.sport: (f, v) for f, v in zip(self.flows, self.live.flows)}
        for host, sampler in self.samplers.items():
            try:
                samples: list[TcpSample] = sampler.sample(self._ports.get(host, set()))
            except OSError as exc:
                log.warning("tcp_info of %s: %s", host, exc)
                continue
            for s in samples:
                flow, view = views[s.sport]
                if s.dport != flow.key.dport:
                    continue
                view.cwnd_pkts, view.srtt_us = s.cwnd_pkts, s.srtt_us
                if flow.algo in self._module_algos and s.cc_bwe_bps is not None:
                    self.series.ccstate.append(
                        {
                            "t_s": t,
                            "flow": flow.id,
                            "algo": flow.algo,
                            "bwe_bps": s.cc_bwe_bps,
                            "rtt_min_us": s.cc_rtt_min_us,
                            "cwnd_pkts": s.cwnd_pkts,
                            "ssthresh_pkts": s.ssthresh_pkts,
                        }
                    )
                self.series.tcpinfo.append(
                    {
                        "t_s": t,
                        "flow": flow.id,
                        "algo": s.algo,
                        "cwnd_pkts": s.cwnd_pkts,
                        "ssthresh_pkts": s.ssthresh_pkts,
                        "srtt_us": s.srtt_us,
                        "rttvar_us": s.rttvar_us,
                        "min_rtt_us": s.min_rtt_us,
                        "mss": s.mss,
                        "sack": "" if s.sack is None else int(s.sack),
                        "total_retrans": s.total_retrans,
                        "bytes_acked": s.bytes_acked,
                        "delivery_rate_bps": s.delivery_rate_Bps * 8,
                        "ca_state": s.ca_state,
                    }
                )

    def _sample_ccstate(self, t: float) -> None:
        if self.ccstate is None:
            return
        by_key = {ExportKey(f.key.src, f.key.dst, f.key.sport, f.key.dport): f for f in self.flows}
        for algo, key, row in self.ccstate.read():
            flow = by_key.get(key)
            if flow is not None and flow.algo == algo:
                self.series.ccstate.append({"t_s": t, "flow": flow.id, "algo": algo, **row})

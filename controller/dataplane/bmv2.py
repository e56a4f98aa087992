"""The BMv2 target: p4/v1model/bottleneck.p4 on simple_switch_grpc, driven over P4Runtime.

Layout on the bottleneck link A -> B (A = the switch's bottleneck port):

    ingress:  ipv4_forward entries (one per sender, one per far-side prefix),
              flow_stats entries (the spec's flows, counter index 1..n;
              index 0 = everything else), `offered` counter
    TM:       BMv2's egress queue of port A: rate in packets/s and depth in
              packets, converted from bit/s and packets with the wire frame
              size (MTU + 14), set over Thrift (simple_switch_CLI); no tc
              queue in front of it
    egress:   random loss after the queue (link_loss default action holds the
              threshold), `forwarded` / `random_drops` counters, the
              `queue_depth` histogram
    delay:    netem on the devices after the link in each direction (the
              far-side Linux bridge's ports), as on the kernel target

Queue drops happen in BMv2's traffic manager, which the program cannot see.
Per flow they are derived here as  offered - forwarded - random_drops -
backlog, where the backlog (packets of the flow still queued) is taken as
large as it can be: at most the queue limit + 2 (one packet in the ingress
hand-off, one in egress), and at most what the flow offered within twice the
time the full queue takes to drain (older packets have left it); zero once
nothing was offered or sent for that long (a non-empty queue would have sent
something).  So a drop is never over-counted while traffic runs (it may
show up a little late), and the counts are exact once the queue has drained;
the runner waits for that before its final read (``wait_drained``).  The
link's total is bounded tighter (all flows together hold at most the queue),
so link-wide queue drops and the backlog are timely while per-flow ones may
lag; after the drain both agree.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller import system
from controller.dataplane import DataPlaneError, FlowCounters, FlowKey, Snapshot
from controller.dataplane.kernel import NETEM_LIMIT_PKTS, LinkParams

log = logging.getLogger(__name__)

ETH_HLEN = 14
PROB_MAX = (1 << 32) - 1
FALLBACK_INDEX = 0
FLOW_SLOTS = 1024
QDEPTH_SLOTS = 1024
#: BMv2 queue depth for "unlimited" (bench ceiling): deeper than any spec here
MAX_QUEUE_PKTS = 1_000_000
#: packets counted as offered but in neither queue nor counter: ingress hand-off, egress pipeline
IN_FLIGHT_PKTS = 2
#: slack on the time a full queue takes to drain, seconds
DRAIN_MARGIN_S = 0.05


class Bmv2Error(DataPlaneError):
    """The BMv2 data plane could not be programmed or read; the message says what to do."""


def loss_threshold(p: float) -> int:
    """p in [0, 1] as the 32-bit threshold a uniform 32-bit draw is compared against."""
    return min(PROB_MAX, int(round(p * (1 << 32))))


def frame_bytes(mtu: int) -> int:
    """A full-size frame on the wire as BMv2 counts it (Ethernet header, no FCS)."""
    return mtu + ETH_HLEN


def queue_rate_pps(rate_bps: int, mtu: int) -> int:
    """BMv2 shapes in packets per second: the spec's bit/s in full-size frames."""
    return max(1, int(round(rate_bps / (8 * frame_bytes(mtu)))))


def queue_depth_pkts(p: LinkParams) -> int:
    """BMv2's queue holds packets: a byte limit becomes whole full-size frames."""
    if p.queue_bytes is not None:
        return max(1, p.queue_bytes // frame_bytes(p.mtu))
    return p.queue_pkts or 100


@dataclass(frozen=True)
class Route:
    """An ipv4_forward entry: destination prefix -> switch port."""

    prefix: str
    """e.g. 10.0.1.1/32 or 10.0.2.0/24."""
    port: int
    """BMv2 port number (Mininet's port number of the switch interface)."""
    bottleneck: bool = False
    """Whether the port is the bottleneck port (its traffic is counted)."""


@dataclass
class _Raw:
    off_p: int = 0
    off_b: int = 0
    fwd_p: int = 0
    fwd_b: int = 0
    rnd_p: int = 0
    rnd_b: int = 0


@dataclass
class Bmv2Bottleneck:
    """One emulated bottleneck on a BMv2 switch node (mininet/p4switch.py)."""

    run_id: str
    switch: Any
    """The Bmv2Switch node: its P4Runtime client and Thrift CLI."""
    bottleneck_port: int
    egress_dev: str
    """A: the switch interface of the bottleneck port."""
    ingress_dev: str
    """B: A's peer, where the link ends."""
    routes: tuple[Route, ...]
    flows: tuple[FlowKey, ...] = ()
    """Declared flows: counter indexes 1..n in this order."""
    fwd_delay_devs: tuple[str, ...] = ()
    rev_delay_devs: tuple[str, ...] = ()
    delay_applied: bool = field(default=False, init=False)
    _params: LinkParams | None = field(default=None, init=False)
    _devs_touched: list[str] = field(default_factory=list, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _still: tuple[tuple[int, int, int], ...] = field(default=(), init=False)
    _still_since: float = field(default=0.0, init=False)
    _qdrop: dict[int, tuple[int, int]] = field(default_factory=dict, init=False)
    _link_qdrop: tuple[int, int] = field(default=(0, 0), init=False)
    _history: deque[tuple[float, dict[int, tuple[int, int]]]] = field(default_factory=deque, init=False)
    quiescent: bool = field(default=False, init=False)
    """Whether the last read found nothing offered or sent for a whole drain window (queue empty)."""
    drain_window_s: float = field(default=0.0, init=False)
    depth_hist: list[int] = field(default_factory=list, init=False)
    """Cumulative histogram of the queue depth (packets) each packet left behind, as of the last read."""

    def __post_init__(self) -> None:
        if len(self.flows) >= FLOW_SLOTS:
            raise Bmv2Error(f"{len(self.flows)} flows: the P4 program counts at most {FLOW_SLOTS - 1}")

    @property
    def client(self) -> Any:
        if self.switch.client is None:
            raise Bmv2Error(f"switch {self.switch.name} is not running; its log: {self.switch.log_path}")
        return self.switch.client

    # --- set-up ------------------------------------------------------------

    def setup(self, params: LinkParams, seed: int, use_delay: bool) -> None:
        """Program routes, flows, queue, loss and delay; on failure undo and raise."""
        del seed  # BMv2's random() draws from the switch's own generator: see README (P4 targets)
        try:
            c = self.client
            updates = []
            for r in self.routes:
                net = ipaddress.IPv4Network(r.prefix)
                entry = c.table_entry(
                    "ipv4_forward",
                    "forward",
                    {"port": r.port, "bottleneck": int(r.bottleneck)},
                    lpm={"hdr.ipv4.dst_addr": (int(net.network_address), net.prefixlen)},
                )
                updates.append(c.update("insert", entry))
            for i, k in enumerate(self.flows, 1):
                entry = c.table_entry(
                    "flow_stats",
                    "set_flow",
                    {"index": i},
                    exact={
                        "hdr.ipv4.src_addr": int(ipaddress.IPv4Address(k.src)),
                        "hdr.ipv4.dst_addr": int(ipaddress.IPv4Address(k.dst)),
                        "meta.src_port": k.sport,
                        "meta.dst_port": k.dport,
                        "hdr.ipv4.protocol": k.proto,
                    },
                )
                updates.append(c.update("insert", entry))
            c.write(updates)
            self._set_queue(params)
            self._set_loss(params)
            if use_delay and (params.delay_ms > 0 or params.jitter_ms > 0):
                for dev in self.fwd_delay_devs + self.rev_delay_devs:
                    self._devs_touched.append(dev)
                    system.run(["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", *_netem_args(params)])
                self.delay_applied = True
            self._params = params
        except (DataPlaneError, system.SystemError_) as exc:
            self.teardown()
            raise Bmv2Error(f"bmv2 data plane: {exc}") from None

    def _set_queue(self, p: LinkParams) -> None:
        port = str(self.bottleneck_port)
        self.switch.cli(
            [
                f"set_queue_depth {queue_depth_pkts(p)} {port}",
                f"set_queue_rate {queue_rate_pps(p.rate_bps, p.mtu)} {port}",
            ]
        )

    def _set_loss(self, p: LinkParams) -> None:
        if p.ge is not None:
            raise Bmv2Error("Gilbert-Elliott loss is not in the BMv2 program yet; use i.i.d. `per` on bmv2")
        c = self.client
        entry = c.table_entry("link_loss", "set_loss", {"threshold": loss_threshold(p.per)}, default=True)
        c.write([c.update("modify", entry)])

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this target."""
        p = self._params
        return {
            "switch": "simple_switch_grpc",
            "bottleneck_port": self.bottleneck_port,
            "frame_bytes": frame_bytes(p.mtu) if p else None,
            "queue_rate_pps": queue_rate_pps(p.rate_bps, p.mtu) if p else None,
            "queue_depth_pkts": queue_depth_pkts(p) if p else None,
            "loss_threshold": loss_threshold(p.per) if p else None,
            "random_seeded": False,
            "p4runtime": self.switch.grpc_address,
            "log": str(self.switch.log_path),
            "flows": {str(i): list(k) for i, k in enumerate(self.flows, 1)},
        }

    # --- while running -----------------------------------------------------

    def apply(self, p: LinkParams) -> None:
        """Set loss and, if changed, the queue's rate/depth and the delay; safe while traffic flows."""
        self._set_loss(p)
        old = self._params
        if old is None or (old.rate_bps, queue_depth_pkts(old)) != (p.rate_bps, queue_depth_pkts(p)):
            self._set_queue(p)
        if old is not None and self.delay_applied and (old.delay_ms, old.jitter_ms) != (p.delay_ms, p.jitter_ms):
            for dev in self.fwd_delay_devs + self.rev_delay_devs:
                system.run(["tc", "qdisc", "change", "dev", dev, "root", "handle", "1:", *_netem_args(p)])
        self._params = p

    def read(self) -> Snapshot:
        """All counters now, in one ReadRequest; queue drops derived (module docstring)."""
        c = self.client
        indexes = range(len(self.flows) + 1)
        names = ("offered", "forwarded", "random_drops")
        entities = [c.counter_entity(n, i) for i in indexes for n in names]
        entities.append(c.counter_entity("queue_depth"))
        with self._lock:
            t_sent = time.monotonic()
            got = c.read(entities)
            t = (t_sent + time.monotonic()) / 2  # the switch sampled somewhere in between
            ids = {c.p4info.counter_id(n): n for n in (*names, "queue_depth")}
            raw = {i: _Raw() for i in indexes}
            hist = [0] * QDEPTH_SLOTS
            for e in got:
                ce = e.counter_entry
                name = ids.get(ce.counter_id)
                i = ce.index.index
                if name == "queue_depth":
                    if 0 <= i < QDEPTH_SLOTS:
                        hist[i] = ce.data.packet_count
                    continue
                if name is None or i not in raw:
                    continue
                r = raw[i]
                p, b = ce.data.packet_count, ce.data.byte_count
                if name == "offered":
                    r.off_p, r.off_b = p, b
                elif name == "forwarded":
                    r.fwd_p, r.fwd_b = p, b
                else:
                    r.rnd_p, r.rnd_b = p, b
            return self._derive(t, raw, hist)

    def _derive(self, t: float, raw: dict[int, _Raw], hist: list[int]) -> Snapshot:
        self.depth_hist = hist
        p = self._params
        rate_pps = queue_rate_pps(p.rate_bps, p.mtu) if p else 1
        qlim = queue_depth_pkts(p) if p else MAX_QUEUE_PKTS
        frame = frame_bytes(p.mtu if p else 1500)  # no frame on the link is larger
        # Twice the time the full queue takes to drain (for a switch that falls
        # behind its rate), plus slack: older packets have left the queue.
        window_s = 2 * (qlim + IN_FLIGHT_PKTS) / rate_pps + DRAIN_MARGIN_S
        self.drain_window_s = window_s
        # Quiescent: no packet offered or sent for a whole window, so the queue is empty.
        still = tuple((r.off_p, r.fwd_p, r.rnd_p) for _, r in sorted(raw.items()))
        if still != self._still:
            self._still, self._still_since = still, t
        quiescent = t - self._still_since >= window_s
        self.quiescent = quiescent
        # What may still be queued: nothing once quiescent, else up to the whole
        # queue plus a packet in each of the ingress hand-off and egress ...
        held_max = 0 if quiescent else qlim + IN_FLIGHT_PKTS
        # ... and no more than the flow offered within the window. Bytes held are bounded
        # the same way, and by full-size frames: never by the flow's average frame, which
        # earlier traffic of other sizes skews (a drop would then be over-counted for good).
        self._history.append((t, {i: (r.off_p, r.off_b) for i, r in raw.items()}))
        while len(self._history) > 1 and self._history[1][0] <= t - window_s:
            self._history.popleft()
        t_ref, off_ref = self._history[0]
        windowed = t_ref <= t - window_s
        snap = Snapshot(t=t)
        link = FlowCounters()
        for i, r in raw.items():
            d_p = r.off_p - r.fwd_p - r.rnd_p
            d_b = r.off_b - r.fwd_b - r.rnd_b
            held = min(max(0, d_p), held_max)
            held_b = max(0, d_b)
            if windowed:
                ref_p, ref_b = off_ref.get(i, (0, 0))
                held = min(held, r.off_p - ref_p)
                held_b = min(held_b, r.off_b - ref_b)
            held_b = min(held_b, held * frame)
            q_p0, q_b0 = self._qdrop.get(i, (0, 0))
            q_p = max(q_p0, d_p - held)
            q_b = max(q_b0, d_b - held_b if d_p - held > 0 else 0)
            self._qdrop[i] = (q_p, q_b)
            fc = FlowCounters(
                fwd_bytes=r.fwd_b,
                fwd_pkts=r.fwd_p,
                rnd_drop_bytes=r.rnd_b,
                rnd_drop_pkts=r.rnd_p,
                q_drop_bytes=q_b,
                q_drop_pkts=q_p,
                enq_bytes=r.off_b,
                enq_pkts=r.off_p,
            )
            if i != FALLBACK_INDEX:
                snap.flows[self.flows[i - 1]] = fc
            for name in vars(fc):
                setattr(link, name, getattr(link, name) + getattr(fc, name))
        # The link as a whole holds at most the queue (+ a packet in each of ingress
        # hand-off and egress): its drops are bounded tighter than the flows' sum.
        d_p = link.enq_pkts - link.fwd_pkts - link.rnd_drop_pkts
        d_b = link.enq_bytes - link.fwd_bytes - link.rnd_drop_bytes
        held = min(max(0, d_p), 0 if quiescent else qlim + IN_FLIGHT_PKTS)
        held_b = min(max(0, d_b), held * frame)
        q_p0, q_b0 = self._link_qdrop
        link.q_drop_pkts = max(q_p0, link.q_drop_pkts, d_p - held)
        link.q_drop_bytes = max(q_b0, link.q_drop_bytes, d_b - held_b if d_p > held else 0)
        self._link_qdrop = (link.q_drop_pkts, link.q_drop_bytes)
        snap.link = link
        return snap

    @staticmethod
    def deepest(before: list[int], after: list[int]) -> int:
        """Deepest queue (packets) seen between two histograms (-1: no packet dequeued)."""
        return max((k for k, (a, b) in enumerate(zip(after, before or [0] * len(after))) if a > b), default=-1)

    def wait_drained(self, timeout_s: float = 3.0, interval_s: float = 0.05) -> bool:
        """Poll until a read finds the link quiescent (the queue empty); False after the timeout."""
        self.read()
        deadline = time.monotonic() + max(timeout_s, 3 * self.drain_window_s)
        while not self.quiescent:
            if time.monotonic() > deadline:
                return False
            time.sleep(interval_s)  # polling interval
            self.read()
        return True

    # --- teardown ----------------------------------------------------------

    def teardown(self) -> None:
        """Remove what set-up added outside the switch (netem); the switch's state goes with it."""
        for dev in dict.fromkeys(self._devs_touched):
            if Path(f"/sys/class/net/{dev}").exists():
                system.run(["tc", "qdisc", "del", "dev", dev, "root"], check=False)
        self._devs_touched.clear()
        self._params = None
        self.delay_applied = False


def _netem_args(p: LinkParams) -> list[str]:
    args = ["netem", "limit", str(NETEM_LIMIT_PKTS), "delay", f"{p.delay_ms}ms"]
    if p.jitter_ms > 0:
        args.append(f"{p.jitter_ms}ms")
    return args

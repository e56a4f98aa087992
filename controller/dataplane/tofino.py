"""The Tofino target: p4/tna/bottleneck.p4 driven over BfRt (gRPC), same interface as the others.

NOT RUN HERE: it needs Intel's P4 Studio SDE (bf_switchd with the compiled
program, and its Python package ``bfrt_grpc``), which no machine of this
project has.  Written against the BfRt gRPC client the SDE ships
(``bfrt_grpc.client.ClientInterface``) and the fixed TM tables of Tofino 1
(``tf1.tm.*``); check the names against your SDE's ``bfrt.json`` before use.

Layout on the bottleneck port:

    ingress:  ipv4_forward, flow_stats (index 1..n; 0 = undeclared), `offered`
    TM:       port shaping: tf1.tm.port.sched_shaping (rate in kbit/s, burst),
              queue limit: tf1.tm.queue.buffer (cells) for the port's queue 0
    egress:   RED (red_params on, red_average's idle-rule entries, red_ramp's
              drop thresholds: tna_red) -> red_drops; then Random<bit<32>>
              against loss_decide's range entry [0, threshold) -> random_drops,
              else forwarded; queue_depth histogram

Queue drops are derived from the same counters as on BMv2 (offered less
forwarded less random and RED drops, less what the queue can still hold),
RED's early drops added.  Delay is not the switch's: an external delay
element on the link carries it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from controller.dataplane import COUNTER_FIELDS, DataPlaneError, FlowCounters, FlowKey, LinkParams, Snapshot
from controller.dataplane.p4common import DRAIN_MARGIN_S, FALLBACK_INDEX, Route, frame_bytes, loss_threshold
from controller.dataplane.red import RedConfig, red_config
from controller.network import TNA_RED_WLOG, Red

log = logging.getLogger(__name__)

#: Tofino 1 buffer cell, bytes
CELL_BYTES = 80
PROGRAM = "bottleneck"
#: BfRt gRPC server of bf_switchd; loopback only
BFRT_ADDRESS = "127.0.0.1:50052"


class TofinoError(DataPlaneError):
    """The Tofino data plane could not be programmed or read; the message says what to do."""


#: red_ramp's steps between RED's min and max (RED_RAMP_STEPS in p4/tna/bottleneck.p4)
RED_RAMP_STEPS = 64
#: RED's clock in the program: the egress timestamp in ns >> RED_TIME_SHIFT (1.024 us), 32 bits of it
RED_TIME_SHIFT = 10
#: the top of a 32-bit range key
RANGE_MAX = (1 << 32) - 1
#: red_average's actions for a packet that found the queue empty, by the idle time before it in halvings of the
#: average (from, action): under half a halving one ordinary update (red_update, the table's default), then the
#: idle rule rounded to whole halvings; from 2.5 on the v1model program would leave under 18 %: cleared
RED_DECAY = ((0.5, "red_decay_half"), (1.5, "red_decay_quarter"), (2.5, "red_decay_all"))


class TnaRed(NamedTuple):
    """A link's RED as the TNA program takes it: red.py's integers in the program's units (80-byte cells, the
    1.024 us clock) and, where Tofino cannot multiply, as range entries the controller computes."""

    on: int
    min_c: int
    """min << wlog, in cells (packets as full-size frames of cells, bytes rounded up to cells)."""
    max_c: int
    """max << wlog, in cells."""
    norm: int
    """red.py's norm for this span: (max_c - min_c) >> norm < 2^31."""
    ramp: tuple[tuple[int, int, int], ...]
    """red_ramp's entries over [min_c, max_c): (low, high, threshold), the threshold the v1model program's at the
    step's middle: P(early drop) * 2^32 there."""
    decay: tuple[tuple[int, int, str], ...]
    """red_average's entries for an empty queue: (low, high, action) over the idle time in the program's clock."""


TNA_RED_OFF = TnaRed(0, 0, 0, 0, (), ())


def red_threshold(cfg: RedConfig, avg_s: int) -> int:
    """The v1model program's early drop at average avg_s (<< wlog, in cfg's unit) as a threshold: it drops iff
    draw * span < max_p_thr * over (over, span: avg_s - min_s, max_s - min_s, >> norm), i.e. iff draw <
    ceil(max_p_thr * over / span), this."""
    over, span = (avg_s - cfg.min_s) >> cfg.norm, (cfg.max_s - cfg.min_s) >> cfg.norm
    return -(-cfg.max_p_thr * over // span)


def tna_red(red: Red | None, rate_bps: int, frame: int) -> TnaRed:
    """`red` on a Tofino link of rate_bps whose full-size frames are `frame` wire bytes; TNA_RED_OFF for None.
    The thresholds go into cells (Tofino's queue depth), red.py's norm is taken again for their span, and its
    max_p_thr and half_ns become red_ramp's and red_average's entries (p4/tna/bottleneck.p4)."""
    base = red_config(red, rate_bps, frame)
    if red is None or not base.on:
        return TNA_RED_OFF
    if base.wlog != TNA_RED_WLOG:
        raise TofinoError(f"red.wlog = {base.wlog}: the TNA program's RED average has the weight 2^-{TNA_RED_WLOG}")
    frame_cells = -(-frame // CELL_BYTES)
    min_c, max_c = ((-(-v // CELL_BYTES) if red.in_bytes else v * frame_cells) for v in (base.min_s, base.max_s))
    if max_c > RANGE_MAX:
        lo, hi = red.thresholds
        raise TofinoError(f"red max = {hi}: {max_c} cells << wlog do not fit the program's 32-bit average")
    span = max_c - min_c
    norm = max(0, span.bit_length() - 31)  # red.py's rule, for the span in cells
    cfg = base._replace(norm=norm, min_s=min_c, max_s=max_c)
    steps = min(RED_RAMP_STEPS, span)
    ramp = []
    for i in range(steps):
        lo, hi = min_c + span * i // steps, min_c + span * (i + 1) // steps - 1
        ramp.append((lo, hi, red_threshold(cfg, (lo + hi) // 2)))
    unit_ns = 1 << RED_TIME_SHIFT
    bounds = [max(1, -(-int(2 * h) * base.half_ns // (2 * unit_ns))) for h, _ in RED_DECAY]
    for i in range(1, len(bounds)):  # a halving under a clock tick: one tick per range
        bounds[i] = max(bounds[i], bounds[i - 1] + 1)
    ends = [b - 1 for b in bounds[1:]] + [RANGE_MAX]
    decay = tuple((b, e, action) for b, e, (_h, action) in zip(bounds, ends, RED_DECAY))
    return TnaRed(1, min_c, max_c, norm, tuple(ramp), decay)


def queue_cells(p: LinkParams) -> int:
    """The drop-tail limit in TM cells: packets as full-size frames, or bytes, rounded up to cells."""
    limit_bytes = p.queue_bytes if p.queue_bytes is not None else (p.queue_pkts or 100) * frame_bytes(p.mtu)
    return max(1, -(-limit_bytes // CELL_BYTES))


def _client(address: str, device_id: int) -> Any:
    try:
        import bfrt_grpc.client as gc  # from Intel's SDE; not on any public registry
    except ImportError:
        raise TofinoError(
            "bfrt_grpc is not importable: the tofino target needs Intel's P4 Studio SDE "
            "(source its set_sde.bash and use its Python)"
        ) from None
    try:
        iface = gc.ClientInterface(grpc_addr=address, client_id=0, device_id=device_id)
        iface.bind_pipeline_config(PROGRAM)
    except Exception as exc:  # the SDE raises its own and grpc's errors
        raise TofinoError(f"BfRt at {address}: {exc}; is bf_switchd running with {PROGRAM}?") from None
    return gc, iface


@dataclass
class TofinoBottleneck:
    """One emulated bottleneck on a Tofino switch (program p4/tna/bottleneck.p4)."""

    delays_itself: ClassVar[bool] = False
    """The TNA program holds no packet for a time: delay needs a delay element on the link."""
    run_id: str
    bottleneck_port: int
    """Device port (dev_port) of the bottleneck."""
    routes: tuple[Route, ...]
    flows: tuple[FlowKey, ...] = ()
    address: str = BFRT_ADDRESS
    device_id: int = 0
    egress_dev: str = ""
    ingress_dev: str = ""
    delay_applied: bool = field(default=False, init=False)
    _gc: Any = field(default=None, init=False)
    _iface: Any = field(default=None, init=False)
    _info: Any = field(default=None, init=False)
    _target: Any = field(default=None, init=False)
    _params: LinkParams | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _qdrop: dict[int, tuple[int, int]] = field(default_factory=dict, init=False)
    _prev: dict[int, tuple[int, int, int, int]] = field(default_factory=dict, init=False)
    _prev_t: float = field(default=0.0, init=False)
    quiescent: bool = field(default=False, init=False)

    def _table(self, name: str) -> Any:
        return self._info.table_get(name)

    # --- set-up ------------------------------------------------------------

    def setup(self, params: LinkParams, seed: int) -> None:
        """Connect, install routes and flows, shape the port, set loss; on failure undo and raise.
        params.delay_ms is not the switch's (delays_itself is False)."""
        del seed  # Tofino's Random<> extern is not seedable from the control plane
        self._gc, self._iface = _client(self.address, self.device_id)
        self._info = self._iface.bfrt_info_get(PROGRAM)
        self._target = self._gc.Target(device_id=self.device_id, pipe_id=0xFFFF)
        gc = self._gc
        try:
            fwd = self._table("pipe.CclabIngress.ipv4_forward")
            fwd.info.key_field_annotation_add("hdr.ipv4.dst_addr", "ipv4")
            keys, datas = [], []
            for r in self.routes:
                addr, plen = r.prefix.split("/")
                keys.append(fwd.make_key([gc.KeyTuple("hdr.ipv4.dst_addr", addr, prefix_len=int(plen))]))
                datas.append(
                    fwd.make_data(
                        [gc.DataTuple("port", r.port), gc.DataTuple("bottleneck", int(r.bottleneck))],
                        "CclabIngress.forward",
                    )
                )
            fwd.entry_add(self._target, keys, datas)
            fs = self._table("pipe.CclabIngress.flow_stats")
            for name in ("hdr.ipv4.src_addr", "hdr.ipv4.dst_addr"):
                fs.info.key_field_annotation_add(name, "ipv4")
            keys, datas = [], []
            for i, k in enumerate(self.flows, 1):
                keys.append(
                    fs.make_key(
                        [
                            gc.KeyTuple("hdr.ipv4.src_addr", k.src),
                            gc.KeyTuple("hdr.ipv4.dst_addr", k.dst),
                            gc.KeyTuple("meta.src_port", k.sport),
                            gc.KeyTuple("meta.dst_port", k.dport),
                            gc.KeyTuple("hdr.ipv4.protocol", k.proto),
                        ]
                    )
                )
                datas.append(fs.make_data([gc.DataTuple("index", i)], "CclabIngress.set_flow"))
            if keys:
                fs.entry_add(self._target, keys, datas)
            self.apply(params)
        except Exception as exc:
            self.teardown()
            raise TofinoError(f"tofino data plane: {exc}") from None

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this target."""
        p = self._params
        return {
            "target": "tofino",
            "switch": "bf_switchd",
            "bfrt": self.address,
            "device_id": self.device_id,
            "bottleneck_port": self.bottleneck_port,
            "frame_bytes": frame_bytes(p.mtu) if p else None,
            "queue_cells": queue_cells(p) if p else None,
            "loss_threshold": loss_threshold(p.per) if p else None,
            "red": tna_red(p.red, p.rate_bps, frame_bytes(p.mtu))._asdict() if p and p.red else None,
            "random_seeded": False,
            "flows": {str(i): list(k) for i, k in enumerate(self.flows, 1)},
        }

    # --- while running -----------------------------------------------------

    def _shape(self, p: LinkParams) -> None:
        gc = self._gc
        shaping = self._table("tf1.tm.port.sched_shaping")
        shaping.entry_mod(
            self._target,
            [shaping.make_key([gc.KeyTuple("dev_port", self.bottleneck_port)])],
            [
                shaping.make_data(
                    [
                        gc.DataTuple("unit", str_val="BPS"),
                        gc.DataTuple("provisioning", str_val="MIN_ERROR"),
                        gc.DataTuple("max_rate", max(1, p.rate_bps // 1000)),  # kbit/s
                        gc.DataTuple("max_burst_size", 2 * frame_bytes(p.mtu)),
                    ]
                )
            ],
        )
        cfg = self._table("tf1.tm.port.cfg")
        resp = cfg.entry_get(
            self._target, [cfg.make_key([gc.KeyTuple("dev_port", self.bottleneck_port)])], {"from_hw": False}
        )
        port_cfg = next(resp)[0].to_dict()
        pg_id, pg_queue = port_cfg["pg_id"], port_cfg["egress_qid_queues"][0]
        buf = self._table("tf1.tm.queue.buffer")
        buf.entry_mod(
            self._target,
            [buf.make_key([gc.KeyTuple("pg_id", pg_id), gc.KeyTuple("pg_queue", pg_queue)])],
            [
                buf.make_data(
                    [
                        gc.DataTuple("guaranteed_cells", queue_cells(p)),
                        gc.DataTuple("pool_max_cells", 0),  # no shared-pool overflow: a hard limit
                        gc.DataTuple("dynamic_baf", str_val="DISABLE"),
                    ]
                )
            ],
        )

    def _set_loss(self, p: LinkParams) -> None:
        if p.ge is not None:
            raise TofinoError("Gilbert-Elliott loss is not in the TNA program; use i.i.d. `per`")
        gc = self._gc
        t = self._table("pipe.CclabEgress.loss_decide")
        t.entry_del(self._target, [])
        thr = loss_threshold(p.per)
        if thr > 0:
            key = t.make_key([gc.KeyTuple("meta.loss_draw", low=0, high=thr - 1)])
            t.entry_add(self._target, [key], [t.make_data([], "CclabEgress.drop_random")])

    def _set_red(self, p: LinkParams, old: LinkParams | None) -> None:
        """RED's entries and red_params' default action, where they change: on after the entries, off before
        they go; a new RED starts from an empty average (the register, written over BfRt)."""
        red = tna_red(p.red, p.rate_bps, frame_bytes(p.mtu))
        before = tna_red(old.red, old.rate_bps, frame_bytes(old.mtu)) if old is not None else TNA_RED_OFF
        if red == before:
            return
        gc, target = self._gc, self._target
        params = self._table("pipe.CclabEgress.red_params")
        switch = params.make_data([gc.DataTuple("on", red.on)], "CclabEgress.set_red")
        if not red.on:
            params.default_entry_set(target, switch)
        average, ramp = self._table("pipe.CclabEgress.red_average"), self._table("pipe.CclabEgress.red_ramp")
        for t in (average, ramp):
            t.entry_del(target, [])
        if not red.on:
            return
        average.entry_add(
            target,
            [
                average.make_key([gc.KeyTuple("meta.red_empty", 1), gc.KeyTuple("meta.red_idle", low=lo, high=hi)])
                for lo, hi, _ in red.decay
            ],
            [average.make_data([], f"CclabEgress.{action}") for _, _, action in red.decay],
        )
        keys = [ramp.make_key([gc.KeyTuple("meta.red_avg", low=lo, high=hi)]) for lo, hi, _ in red.ramp]
        datas = [ramp.make_data([gc.DataTuple("thr", thr)], "CclabEgress.red_set_threshold") for *_, thr in red.ramp]
        keys.append(ramp.make_key([gc.KeyTuple("meta.red_avg", low=red.max_c, high=RANGE_MAX)]))
        datas.append(ramp.make_data([], "CclabEgress.red_force_drop"))
        ramp.entry_add(target, keys, datas)
        if old is None or old.red != p.red:
            reg = self._table("pipe.CclabEgress.red_avg")
            reg.entry_mod(
                target,
                [reg.make_key([gc.KeyTuple("$REGISTER_INDEX", 0)])],
                [reg.make_data([gc.DataTuple("CclabEgress.red_avg.f1", 0)])],
            )
        params.default_entry_set(target, switch)

    def apply(self, p: LinkParams) -> None:
        """Loss, RED, and if changed the port's rate and queue limit; safe while traffic flows."""
        self._set_loss(p)
        old = self._params
        self._set_red(p, old)
        if old is None or (old.rate_bps, queue_cells(old)) != (p.rate_bps, queue_cells(p)):
            self._shape(p)
        self._params = p

    def _counter(self, name: str, indexes: range) -> dict[int, tuple[int, int]]:
        gc = self._gc
        t = self._table(name)
        keys = [t.make_key([gc.KeyTuple("$COUNTER_INDEX", i)]) for i in indexes]
        out = {}
        for data, key in t.entry_get(self._target, keys, {"from_hw": True}):
            d, k = data.to_dict(), key.to_dict()
            out[int(k["$COUNTER_INDEX"]["value"])] = (
                int(d.get("$COUNTER_SPEC_PKTS", 0)),
                int(d["$COUNTER_SPEC_BYTES"]),
            )
        return out

    def read(self) -> Snapshot:
        """Counters by index (one BfRt read per counter table), queue drops derived as on BMv2."""
        indexes = range(len(self.flows) + 1)
        with self._lock:
            off = self._counter("pipe.CclabIngress.offered", indexes)
            fwd = self._counter("pipe.CclabEgress.forwarded", indexes)
            rnd = self._counter("pipe.CclabEgress.random_drops", indexes)
            red = self._counter("pipe.CclabEgress.red_drops", indexes)
            t = time.monotonic()
            now = {i: (off[i][0], fwd[i][0], rnd[i][0], red[i][0]) for i in indexes}
            rate_pps = (self._params.rate_bps / 8 / frame_bytes(self._params.mtu)) if self._params else 1.0
            qlim = (self._params.queue_pkts or 100) if self._params else 100
            # quiescent: nothing moved for twice the time the full queue takes to drain
            if now != self._prev:
                self._prev, self._prev_t = now, t
            quiescent = t - self._prev_t >= 2 * (qlim + 2) / rate_pps + DRAIN_MARGIN_S
            self.quiescent = quiescent
            held_max = 0 if quiescent else qlim + 1
            snap, link = Snapshot(t=t), FlowCounters()
            for i in indexes:
                # the TM's drops, derived: what was offered and neither left nor was dropped in the egress
                d_p = off[i][0] - fwd[i][0] - rnd[i][0] - red[i][0]
                d_b = off[i][1] - fwd[i][1] - rnd[i][1] - red[i][1]
                held = min(max(0, d_p), held_max)
                avg = off[i][1] / off[i][0] if off[i][0] else 0.0
                q_p0, q_b0 = self._qdrop.get(i, (0, 0))
                q_p = max(q_p0, d_p - held)
                q_b = max(q_b0, int(round(d_b - held * avg)) if d_p - held > 0 else 0)
                self._qdrop[i] = (q_p, q_b)
                q_p, q_b = q_p + red[i][0], q_b + red[i][1]  # RED's early drops are queue drops too
                fc = FlowCounters(fwd[i][1], fwd[i][0], rnd[i][1], rnd[i][0], q_b, q_p, off[i][1], off[i][0])
                if i != FALLBACK_INDEX:
                    snap.flows[self.flows[i - 1]] = fc
                for name in COUNTER_FIELDS:
                    setattr(link, name, getattr(link, name) + getattr(fc, name))
            snap.link = link
            return snap

    def wait_drained(self, timeout_s: float = 3.0) -> bool:
        """Poll until a read finds the link quiescent (the queue empty); False after the timeout."""
        deadline = time.monotonic() + timeout_s
        self.read()
        while not self.quiescent:
            if time.monotonic() > deadline:
                return False
            time.sleep(DRAIN_MARGIN_S)  # polling interval
            self.read()
        return True

    # --- teardown ----------------------------------------------------------

    def teardown(self) -> None:
        """Delete the entries set-up added and unshape the port; safe to call twice."""
        if self._iface is None:
            return
        try:
            for name in (
                "pipe.CclabIngress.ipv4_forward",
                "pipe.CclabIngress.flow_stats",
                "pipe.CclabEgress.loss_decide",
                "pipe.CclabEgress.red_average",
                "pipe.CclabEgress.red_ramp",
            ):
                self._table(name).entry_del(self._target, [])
            self._table("pipe.CclabEgress.red_params").default_entry_reset(self._target)
        except Exception as exc:  # keep tearing down
            log.warning("tofino teardown: %s", exc)
        finally:
            self._iface.tear_down_stream()
            self._iface = None
            self._params = None

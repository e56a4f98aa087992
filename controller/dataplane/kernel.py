"""The kernel target: tc qdiscs for rate and queue; BPF for loss and counters.

Layout on the bottleneck link A -> B (A, B a veth pair):

    A root:    htb (one class, rate = ceil = R; a bucket at a time:
               htb_hysteresis, dataplane/sysctls.py) or tbf (rate R)
               + pfifo/bfifo leaf: the drop-tail queue, the only queue
    A egress:  clsact / bn_enqueue     (offered to the queue; a packet still
                                        owned by its socket is queued as an
                                        unowned clone: dataplane/sysctls.py)
    kfree_skb: bn_qdrop                (queue drops on A, per flow; one it
                                        misses is healed for the link at the
                                        next, and for its flow at the end)
    B ingress: clsact / bn_link        (random loss on the wire, forwarded)

RED, when the link has it, is bn_enqueue's, not tc's red qdisc (a kernel
built without CONFIG_NET_SCH_RED, as this host's, has none); the pfifo/bfifo
limit stays behind it.  The program reads the queue's length from the
link's counters; controller/dataplane/red.py gives it integers.

Delay is not this target's (delays_itself is False): the link's delay
element on the devices after it has it (controller/dataplane/delay.py).

Nothing here is a shell string; every tc call is an argument list.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from controller import bpf, system
from controller.dataplane import (
    COUNTER_FIELDS,
    DataPlaneError,
    FlowCounters,
    FlowKey,
    LinkParams,
    Snapshot,
    remove_pins,
)
from controller.dataplane.red import red_config

log = logging.getLogger(__name__)

OBJECT = system.BUILD / "bottleneck.bpf.o"
_KEY = struct.Struct("=4s4sHHB3x")
_CTR = struct.Struct("=8Q")
_CONFIG = struct.Struct("=5QIIQ4I4Q")
#: struct bn_red_state: lock, pad, avg_s, last_fwd_ns
_RED_STATE = struct.Struct("=IIQQ")
_RNG = struct.Struct("=QQ")
_U64 = struct.Struct("=Q")
#: the key of a one-entry array map (bn_config, bn_link_ctr, bn_rng, bn_owned, bn_empties)
_ONLY = b"\0" * 4
PROB_ONE = 1 << 32
#: Ethernet header + FCS-less frame: the wire MTU of a veth frame.
ETH_HLEN = 14
#: how often wait_drained reads the counters, seconds
DRAIN_POLL_S = 0.02
#: how long nothing may move before what is left in the balance counts as missed drops, seconds
STILL_S = 0.5


def _unbalanced(c: FlowCounters) -> int:
    """Packets offered and not yet forwarded, lost or dropped: in the queue, or drops bn_qdrop missed."""
    return c.enq_pkts - c.fwd_pkts - c.rnd_drop_pkts - c.q_drop_pkts


def prob_threshold(p: float) -> int:
    """p in [0, 1] as the threshold the BPF program compares a 32-bit draw against."""
    return min(PROB_ONE, int(round(p * PROB_ONE)))


def burst_time_s() -> float:
    """How much line-rate time the token bucket holds.

    HTB and TBF refill on timer ticks and dequeue events; a bucket shallower
    than the gap between them costs rate (measured: with tc's default burst,
    3 Gbit/s came out 4.7 % short).  1 ms suffices on a real CPU.  Under
    software emulation timers fire late: measured in the lab VM (its init
    sets CCLAB_IN_VM) at 20 Mbit/s, 1 ms gave 0.78 of the rate, 5 ms 0.94,
    20 ms 0.996; in a Vagrant box under TCG at 40 Mbit/s, 1 ms gave 0.957.
    """
    return 0.020 if os.environ.get("CCLAB_IN_VM") or system.software_emulated() else 0.001


def htb_hysteresis_wanted() -> bool:
    """Whether runs set HTB's hysteresis (dataplane/sysctls.py): where the bucket is 1 ms, not in the lab VM."""
    return burst_time_s() <= 0.001


def htb_burst_bytes(rate_bps: int, mtu: int) -> int:
    """Token bucket depth: burst_time_s() at line rate, at least two frames."""
    return max(2 * (mtu + ETH_HLEN), int(rate_bps / 8 * burst_time_s()))


@dataclass
class KernelBottleneck:
    """One emulated bottleneck link on the kernel data plane."""

    delays_itself: ClassVar[bool] = False
    """Delaying on the rate limiter's device would put the delay line's packets in the queue: the link's
    delay element, after the link, has it."""

    run_id: str
    egress_dev: str
    """A: the rate limiter's device."""
    ingress_dev: str
    """B: A's veth peer, where the link ends."""
    owned_pkts: int | None = field(default=None, init=False)
    """Packets that reached the queue still owned by their socket (bn_enqueue freed each), kept by teardown."""
    missed_qdrops: int | None = field(default=None, init=False)
    """Queue drops bn_qdrop missed as they happened, given back to their flows by wait_drained (None: none)."""
    _pin: Path = field(init=False)
    _maps: dict[str, bpf.BpfMap] = field(default_factory=dict, init=False)
    _tp_fd: int = field(default=-1, init=False)
    _params: LinkParams | None = field(default=None, init=False)
    _devs_touched: list[str] = field(default_factory=list, init=False)
    _keys: dict[bytes, FlowKey] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._pin = system.PIN_ROOT / self.run_id

    # --- set-up ------------------------------------------------------------

    def setup(self, params: LinkParams, seed: int) -> None:
        """Program the link; on any failure, undo what was done and raise."""
        if not OBJECT.exists():
            raise DataPlaneError(f"{OBJECT} is missing; run `make build`")
        system.require_tools("tc", "bpftool")
        system.ensure_bpffs()
        self.owned_pkts = self.missed_qdrops = None
        try:
            self._load_bpf()
            self._seed(seed)
            self._install_qdiscs(params)
            self._attach()
            self.apply(params)
        except (system.SystemError_, bpf.BpfError) as exc:
            self.teardown()
            raise DataPlaneError(f"kernel data plane: {exc}") from None

    def _load_bpf(self) -> None:
        if self._pin.exists():
            raise DataPlaneError(f"{self._pin} exists: an earlier run left it; run `cclab clean`")
        self._pin.mkdir(parents=True)
        system.run(
            ["bpftool", "prog", "loadall", str(OBJECT), str(self._pin / "progs"), "pinmaps", str(self._pin / "maps")]
        )
        for name in (
            "bn_flows",
            "bn_link_ctr",
            "bn_config",
            "bn_rng",
            "bn_owned",
            "bn_red",
            "bn_empties",
            "bn_early_drops",
        ):
            self._maps[name] = bpf.BpfMap.pinned(self._pin / "maps" / name)
        prog_fd = bpf.obj_get(self._pin / "progs" / "bn_qdrop")
        try:
            self._tp_fd = bpf.raw_tracepoint_open(prog_fd)
        finally:
            os.close(prog_fd)

    def _seed(self, seed: int) -> None:
        rng = self._maps["bn_rng"]
        ncpu = bpf.possible_cpus()
        stride = rng.value_size // ncpu
        value = b"".join(
            _RNG.pack((seed * 0x9E3779B97F4A7C15 + cpu * 0xD1B54A32D192ED03) & (2**64 - 1), 0).ljust(stride, b"\0")
            for cpu in range(ncpu)
        )
        rng.update(_ONLY, value)

    def _tc(self, *args: str) -> None:
        system.run(["tc", *args])

    def _install_qdiscs(self, p: LinkParams) -> None:
        a, b = self.egress_dev, self.ingress_dev
        for dev in (a, b):
            self._devs_touched.append(dev)
            self._tc("qdisc", "replace", "dev", dev, "clsact")
        if p.shaper == "htb":
            self._tc("qdisc", "replace", "dev", a, "root", "handle", "1:", "htb", "default", "1")
        self._shape("replace", p)
        self._tc("qdisc", "replace", "dev", a, "parent", "1:1", "handle", "10:", *self._queue_args(p))

    def _shape(self, verb: str, p: LinkParams) -> None:
        """Create ("replace") or retune ("change") the rate limiter on A."""
        rate = f"{p.rate_bps}bit"
        burst = f"{htb_burst_bytes(p.rate_bps, p.mtu)}b"
        if p.shaper == "htb":
            where = ["class", verb, "dev", self.egress_dev, "parent", "1:", "classid", "1:1", "htb"]
            self._tc(*where, "rate", rate, "ceil", rate, "burst", burst, "cburst", burst)
        else:
            where = ["qdisc", verb, "dev", self.egress_dev, "root", "handle", "1:", "tbf"]
            self._tc(*where, "rate", rate, "burst", burst, "limit", "1000000")

    @staticmethod
    def _queue_args(p: LinkParams) -> list[str]:
        if p.queue_bytes is not None:
            return ["bfifo", "limit", str(p.queue_bytes)]
        return ["pfifo", "limit", str(p.queue_pkts or 100)]

    def _attach(self) -> None:
        progs = self._pin / "progs"
        for dev, hook, prog in ((self.egress_dev, "egress", "bn_enqueue"), (self.ingress_dev, "ingress", "bn_link")):
            self._tc("filter", "replace", "dev", dev, hook, "pref", "1", "handle", "1",
                     "bpf", "direct-action", "object-pinned", str(progs / prog))  # fmt: skip

    # --- while running -----------------------------------------------------

    def apply(self, p: LinkParams) -> None:
        """Set loss, RED and (if changed) the rate; safe while traffic flows.  The queue limit and the shaper are
        set-up's (a new limit: teardown, then setup)."""
        ge = p.ge or (0.0, 1.0, 0.0, 0.0)
        cfg = _CONFIG.pack(
            prob_threshold(p.per if p.ge is None else 0.0),
            *(prob_threshold(x) for x in ge),
            1 if p.ge is not None else 0,
            system.ifindex(self.egress_dev),
            system.netns_inode(),
            *red_config(p.red, p.rate_bps, p.mtu + ETH_HLEN),
        )
        old = self._params
        if old is None or old.red != p.red:  # a new RED starts from an empty average
            self._maps["bn_red"].update(_ONLY, _RED_STATE.pack(0, 0, 0, 0))
        self._maps["bn_config"].update(_ONLY, cfg)
        if old is not None and old.rate_bps != p.rate_bps:
            self._shape("change", p)
        self._params = p

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this target."""
        p = self._params
        return {
            "target": "kernel",
            "shaper": p.shaper if p else None,
            "burst_bytes": htb_burst_bytes(p.rate_bps, p.mtu) if p else None,
            "queue": self._queue_args(p) if p else None,
            "loss_threshold": prob_threshold(p.per) if p and p.ge is None else None,
            "gilbert_elliott": list(p.ge) if p and p.ge is not None else None,
            "red": red_config(p.red, p.rate_bps, p.mtu + ETH_HLEN)._asdict() if p and p.red else None,
            "pins": str(self._pin),
        }

    def read(self) -> Snapshot:
        """All counters now: one batch read of the flow map, one of the link."""
        snap = Snapshot(t=time.monotonic())
        keys = self._keys
        for kraw, vraw in self._maps["bn_flows"].items():
            key = keys.get(kraw)
            if key is None:  # decoded once per flow, not once per poll
                saddr, daddr, sport, dport, proto = _KEY.unpack(kraw)
                key = keys[kraw] = FlowKey(socket.inet_ntoa(saddr), socket.inet_ntoa(daddr), sport, dport, proto)
            snap.flows[key] = FlowCounters(*_CTR.unpack(vraw))
        link = self._maps["bn_link_ctr"].lookup(_ONLY)
        if link is not None:
            snap.link = FlowCounters(*_CTR.unpack(link))
        empties = self._maps["bn_empties"].lookup(_ONLY)
        if empties is not None:
            snap.empties = _U64.unpack(empties)[0]
        return snap

    def red_state(self) -> tuple[float, int] | None:
        """RED's average queue now (packets or bytes, its thresholds' unit) and when the link last delivered a
        packet (CLOCK_MONOTONIC ns, bpf_ktime_get_ns); None without RED."""
        p = self._params
        raw = self._maps["bn_red"].lookup(_ONLY) if p is not None and p.red is not None else None
        if p is None or p.red is None or raw is None:
            return None
        _lock, _pad, avg_s, last_fwd_ns = _RED_STATE.unpack(raw)
        return avg_s / (1 << p.red.wlog), last_fwd_ns

    def wait_drained(self, timeout_s: float = 3.0) -> bool:
        """Poll until a read finds the queue empty; False after the timeout.  The counters are timely (offered at
        A's egress hook, queue drops as the qdisc frees them, forwarded at B), so the queue is empty when they
        balance.  Once nothing moves any more (no packet offered, forwarded or lost over STILL_S), what is left
        in the balance are drops bn_qdrop missed (bottleneck.bpf.c): each flow gets its own back."""
        deadline = time.monotonic() + timeout_s
        last, still_since = None, time.monotonic()
        while True:
            snap = self.read()
            if snap.backlog_pkts == 0 and not any(_unbalanced(c) > 0 for c in snap.flows.values()):
                return True
            moved = (snap.link.enq_pkts, snap.link.fwd_pkts, snap.link.rnd_drop_pkts)
            if moved != last:
                last, still_since = moved, time.monotonic()
            elif time.monotonic() - still_since >= STILL_S:
                if self._qdisc_qlen() > 0:  # the queue really holds packets (a link at rate 0): not drained
                    return False
                self._give_back_missed_drops()
                return self.read().backlog_pkts == 0
            if time.monotonic() > deadline:
                return snap.backlog_pkts == 0
            time.sleep(DRAIN_POLL_S)

    def _qdisc_qlen(self) -> int:
        """The packets A's root qdisc holds now, as it counts them (tc -s)."""
        out = system.run(["tc", "-s", "-j", "qdisc", "show", "dev", self.egress_dev, "root"]).stdout
        try:
            return int(json.loads(out)[0]["qlen"])
        except (ValueError, LookupError, TypeError) as exc:
            raise DataPlaneError(f"kernel data plane: cannot read {self.egress_dev}'s queue from tc: {exc}") from None

    def _give_back_missed_drops(self) -> None:
        """Add each flow's unbalanced remainder (offered - forwarded - lost - dropped) to its queue drops, and the
        link's; called only when nothing has moved for STILL_S, so no packet is in the queue or on its way.  The
        write replaces a counter entry whole: a stray frame counted in that instant would be lost from it."""
        for m in (self._maps["bn_flows"], self._maps["bn_link_ctr"]):
            for kraw, vraw in m.items():
                c = FlowCounters(*_CTR.unpack(vraw))
                pkts = _unbalanced(c)
                nbytes = c.enq_bytes - c.fwd_bytes - c.rnd_drop_bytes - c.q_drop_bytes
                if pkts <= 0 and nbytes <= 0:  # the link's packets were healed already (bn_qdrop_heal)
                    continue
                c.q_drop_pkts += max(0, pkts)
                c.q_drop_bytes += max(0, nbytes)
                m.update(kraw, _CTR.pack(*(getattr(c, f) for f in COUNTER_FIELDS)))
                if m is self._maps["bn_flows"]:
                    self.missed_qdrops = (self.missed_qdrops or 0) + max(0, pkts)

    # --- teardown ----------------------------------------------------------

    def teardown(self) -> None:
        """Remove everything set-up made; safe to call twice and after a partial set-up."""
        owned = self._maps.get("bn_owned")
        raw = owned.lookup(_ONLY) if owned is not None else None
        if raw is not None:
            self.owned_pkts = _U64.unpack(raw)[0]
        for m in self._maps.values():
            m.close()
        self._maps.clear()
        if self._tp_fd >= 0:
            os.close(self._tp_fd)
            self._tp_fd = -1
        for dev in dict.fromkeys(self._devs_touched):
            if Path(f"/sys/class/net/{dev}").exists():
                for parent in ("root", "clsact"):
                    system.run(["tc", "qdisc", "del", "dev", dev, parent], check=False)
        self._devs_touched.clear()
        self._params = None
        remove_pins(self._pin)

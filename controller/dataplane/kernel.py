"""The kernel target: tc qdiscs for rate, queue and delay; BPF for loss and counters.

Layout on the bottleneck link A -> B (A, B a veth pair):

    A root:    htb (one class, rate = ceil = R; a bucket at a time:
               htb_hysteresis, dataplane/sysctls.py) or tbf (rate R)
               + pfifo/bfifo leaf: the drop-tail queue, the only queue
    A egress:  clsact / bn_enqueue     (offered to the queue; a packet still
                                        owned by its socket is queued as an
                                        unowned clone: dataplane/sysctls.py)
    kfree_skb: bn_qdrop                (queue drops on A, per flow)
    B ingress: clsact / bn_link        (random loss on the wire, forwarded)
    delay:     on the devices after the link in each direction (never on
               the rate limiter: its queue would then hold packets in the
               delay line too): netem with a large limit where the kernel
               has it, else cclab-delay (controller/dataplane/delayline.py)

Nothing here is a shell string; every tc call is an argument list.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller import bpf, system
from controller.dataplane import DataPlaneError, FlowCounters, FlowKey, Snapshot
from controller.dataplane.delay import LinkDelay, pick_element

log = logging.getLogger(__name__)

OBJECT = system.BUILD / "bottleneck.bpf.o"
_KEY = struct.Struct("=4s4sHHB3x")
_CTR = struct.Struct("=8Q")
_CONFIG = struct.Struct("=5QIIQ")
_RNG = struct.Struct("=QQ")
#: the key of a one-entry array map (bn_config, bn_link_ctr, bn_rng, bn_owned)
_ONLY = b"\0" * 4
PROB_ONE = 1 << 32
#: Ethernet header + FCS-less frame: the wire MTU of a veth frame.
ETH_HLEN = 14


def prob_threshold(p: float) -> int:
    """p in [0, 1] as the threshold the BPF program compares a 32-bit draw against."""
    return min(PROB_ONE, int(round(p * PROB_ONE)))


def burst_time_s() -> float:
    """How much line-rate time the token bucket holds.

    HTB and TBF refill on timer ticks and dequeue events; a bucket shallower
    than the gap between them costs rate (measured: with tc's default burst,
    3 Gbit/s came out 4.7 % short).  1 ms suffices on a real CPU.  Under
    software emulation (the lab VM sets CCLAB_IN_VM) timers fire late:
    measured there at 20 Mbit/s, 1 ms gave 0.78 of the rate, 5 ms 0.94,
    20 ms 0.996.
    """
    return 0.020 if os.environ.get("CCLAB_IN_VM") else 0.001


def htb_hysteresis_wanted() -> bool:
    """Whether runs set HTB's hysteresis (dataplane/sysctls.py): where the bucket is 1 ms, not in the lab VM."""
    return burst_time_s() <= 0.001


def htb_burst_bytes(rate_bps: int, mtu: int) -> int:
    """Token bucket depth: burst_time_s() at line rate, at least two frames."""
    return max(2 * (mtu + ETH_HLEN), int(rate_bps / 8 * burst_time_s()))


@dataclass
class LinkParams:
    """The bottleneck's parameters at one moment (the contract's knobs)."""

    rate_bps: int
    queue_pkts: int | None = None
    queue_bytes: int | None = None
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    per: float = 0.0
    ge: tuple[float, float, float, float] | None = None
    """Gilbert-Elliott (p_gb, p_bg, loss_good, loss_bad), or None for i.i.d."""
    shaper: str = "htb"
    mtu: int = 1500


@dataclass
class KernelBottleneck:
    """One emulated bottleneck link on the kernel data plane."""

    run_id: str
    egress_dev: str
    """A: the rate limiter's device."""
    ingress_dev: str
    """B: A's veth peer, where the link ends."""
    fwd_delay_devs: tuple[str, ...] = ()
    """Devices after the link in the forward direction (netem there)."""
    rev_delay_devs: tuple[str, ...] = ()
    """Devices in the reverse direction (netem there)."""
    delay_choice: str = "auto"
    """One of delay.ELEMENTS: "auto" takes netem where the kernel has it, else cclab-delay."""
    delay_applied: bool = field(default=False, init=False)
    delay_element: str | None = field(default=None, init=False)
    """What delays the packets once set up: "netem", "cclab-delay", or None."""
    delay_stats: dict[str, Any] | None = field(default=None, init=False)
    """cclab-delay's last counters (drops, lateness), kept by teardown."""
    owned_pkts: int | None = field(default=None, init=False)
    """Packets that reached the queue still owned by their socket (bn_enqueue freed each), kept by teardown."""
    _delay: LinkDelay | None = field(default=None, init=False)
    _pin: Path = field(init=False)
    _maps: dict[str, bpf.BpfMap] = field(default_factory=dict, init=False)
    _tp_fd: int = field(default=-1, init=False)
    _params: LinkParams | None = field(default=None, init=False)
    _devs_touched: list[str] = field(default_factory=list, init=False)
    _keys: dict[bytes, FlowKey] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._pin = system.PIN_ROOT / self.run_id

    # --- set-up ------------------------------------------------------------

    def setup(self, params: LinkParams, seed: int, use_delay: bool) -> None:
        """Program the link; on any failure, undo what was done and raise."""
        if not OBJECT.exists():
            raise DataPlaneError(f"{OBJECT} is missing; run `make build`")
        system.require_tools("tc", "bpftool")
        element = pick_element(self.delay_choice) if use_delay else None
        system.ensure_bpffs()
        try:
            self._load_bpf()
            self._seed(seed)
            self._install_qdiscs(params, element, seed)
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
        for name in ("bn_flows", "bn_link_ctr", "bn_config", "bn_rng", "bn_owned"):
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

    def _install_qdiscs(self, p: LinkParams, element: str | None, seed: int) -> None:
        a, b = self.egress_dev, self.ingress_dev
        for dev in (a, b):
            self._devs_touched.append(dev)
            self._tc("qdisc", "replace", "dev", dev, "clsact")
        if p.shaper == "htb":
            self._tc("qdisc", "replace", "dev", a, "root", "handle", "1:", "htb", "default", "1")
        self._shape("replace", p)
        self._tc("qdisc", "replace", "dev", a, "parent", "1:1", "handle", "10:", *self._queue_args(p))
        if element is not None:
            self._install_delay(p, element, seed)

    def _install_delay(self, p: LinkParams, element: str, seed: int) -> None:
        """The delay element on the devices after the link (the schedule may raise a delay of 0 later)."""
        self._delay = LinkDelay(self.fwd_delay_devs + self.rev_delay_devs, self._pin / "delay", element, seed)
        self._delay.setup(p.delay_ms, p.jitter_ms)
        self.delay_element = element
        self.delay_applied = True

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
        """Set loss and (if changed) rate and delay; safe while traffic flows."""
        ge = p.ge or (0.0, 1.0, 0.0, 0.0)
        cfg = _CONFIG.pack(
            prob_threshold(p.per if p.ge is None else 0.0),
            *(prob_threshold(x) for x in ge),
            1 if p.ge is not None else 0,
            system.ifindex(self.egress_dev),
            system.netns_inode(),
        )
        self._maps["bn_config"].update(_ONLY, cfg)
        old = self._params
        if old is not None and old.rate_bps != p.rate_bps:
            self._shape("change", p)
        if old is not None and self.delay_applied and (old.delay_ms, old.jitter_ms) != (p.delay_ms, p.jitter_ms):
            assert self._delay is not None
            self._delay.apply(p.delay_ms, p.jitter_ms)
        self._params = p

    def delay_stats_now(self) -> dict[str, Any] | None:
        """The delay element's counters while it runs (cclab-delay's; None for netem or no delay)."""
        return self._delay.stats_now() if self._delay is not None else None

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
        return snap

    # --- teardown ----------------------------------------------------------

    def teardown(self) -> None:
        """Remove everything set-up made; safe to call twice and after a partial set-up."""
        if self._delay is not None:
            self._delay.teardown()
            self.delay_stats = self._delay.stats
            self._delay = None
        owned = self._maps.get("bn_owned")
        raw = owned.lookup(_ONLY) if owned is not None else None
        if raw is not None:
            self.owned_pkts = struct.unpack("=Q", raw)[0]
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
        self.delay_applied = False
        self.delay_element = None
        remove_pins(self._pin)


def remove_pins(path: Path) -> None:
    """Unlink a pinned-object directory tree (bpffs needs unlink, not rmtree of files)."""
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)

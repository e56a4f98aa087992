"""The BMv2 target: p4/v1model/bottleneck.p4 on simple_switch_grpc, driven over P4Runtime.

Layout on the bottleneck link A -> B (A = the switch's bottleneck port):

    ingress:  ipv4_forward entries (one per sender, one per far-side prefix),
              flow_stats entries (the spec's flows, counter index 1..n;
              index 0 = everything else), `offered` counter; drop-tail
              admission: the program keeps the queue's occupancy (packets
              and wire bytes, registers) and admits a packet iff it fits the
              limit of queue_limit (packets or bytes), after RED's verdict
              where the link has RED (red_params, the kernel target's
              integers: controller/dataplane/red.py); `queue_drops` counts
              those it refuses, per flow
    TM:       BMv2's egress queue of port A shapes: rate in packets/s,
              converted from bit/s with the full-size frame (MTU + 14), set
              over Thrift (simple_switch_CLI); its depth is set far above any
              limit, so it never drops: the program's admission is the queue
              limit. No tc queue in front of it
    egress:   release the packet's place in the queue, then random loss
              after the queue (link_loss default action holds the threshold),
              `forwarded` / `random_drops` counters, the `queue_depth`
              histogram
    delay:    not here: the link's delay node carries it on every target
              (controller/dataplane/delay.py)

Every counter is exact and timely: offered = forwarded + random drops +
queue drops + what is queued, per flow and for the link, so the queue is
empty when the counters balance (``wait_drained``).

The program is p4/v1model/bottleneck.p4 as `make build` compiles it into build/p4/, or one of one's own
(a spec's p4_program, the conformance suite's --p4-program): compiled here with p4/common/ on the include
path (compile_program) and held to the names this driver reads and writes (program_problems).
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from controller import system
from controller.dataplane import COUNTER_FIELDS, DataPlaneError, FlowCounters, FlowKey, LinkParams, Snapshot
from controller.dataplane.p4common import DRAIN_MARGIN_S, FALLBACK_INDEX, Route, frame_bytes, loss_threshold
from controller.dataplane.red import RED_OFF, RedConfig, red_config

log = logging.getLogger(__name__)

FLOW_SLOTS = 1024
QDEPTH_SLOTS = 1024
#: BMv2's own queue depth: deeper than any limit the program enforces, so the TM never drops
MAX_QUEUE_PKTS = 1_000_000
#: queue_limit's value for "no limit" (the other unit's limit binds)
QUEUE_UNLIMITED = (1 << 32) - 1
#: the smallest frame a queue in bytes can hold: bounds how many packets it holds
MIN_FRAME_BYTES = 60


class Bmv2Error(DataPlaneError):
    """The BMv2 data plane could not be programmed or read; the message says what to do."""


# --- the program ---------------------------------------------------------------------------------------------

P4C = "p4c-bm2-ss"
#: cclab's own program (`make build` compiles it into build/p4/)
PROGRAM = system.REPO / "p4" / "v1model" / "bottleneck.p4"
#: on the include path of every program compiled here: `#include "headers.p4"` finds the shared headers
INCLUDE = system.REPO / "p4" / "common"
#: what the driver writes: table -> (its match fields, its action, the action's parameters)
TABLES = {
    "ipv4_forward": (("hdr.ipv4.dst_addr",), "forward", ("port", "bottleneck")),
    "flow_stats": (
        ("hdr.ipv4.src_addr", "hdr.ipv4.dst_addr", "meta.src_port", "meta.dst_port", "hdr.ipv4.protocol"),
        "set_flow",
        ("index",),
    ),
    "queue_limit": ((), "set_queue_limit", ("pkts", "bytes")),
    "link_loss": ((), "set_loss", ("threshold",)),
}
#: written only where a link has RED
RED_TABLE = {"red_params": ((), "set_red", ("on", "bytes", "wlog", "norm", "min_s", "max_s", "max_p_thr", "idle_inv"))}


@dataclass(frozen=True)
class Program:
    """A compiled BMv2 program: what a switch node loads."""

    json: Path
    """The BMv2 JSON (p4c-bm2-ss -o)."""
    p4info: Path
    """Its P4Info, text format (--p4runtime-files)."""
    source: Path | None = None
    """The P4 source it was compiled from, where known."""
    output: tuple[str, ...] = ()
    """What the compiler said while it compiled (warnings), line by line."""


class CompileError(Bmv2Error):
    """A P4 program does not compile: the message is one line, `lines` the compiler's whole output."""

    def __init__(self, source: Path, lines: list[str]) -> None:
        first = next((ln.strip() for ln in lines if "error" in ln.lower()), lines[0].strip() if lines else "")
        super().__init__(
            f"{source} does not compile: {first or 'no output'} (the whole output: cclab p4 build {source})"
        )
        self.lines = lines


def compile_program(source: Path, out: Path) -> Program:
    """Compile a v1model program into out/ (NAME.json, NAME.p4info.txtpb), p4/common/ on the include path."""
    if not source.is_file():
        raise Bmv2Error(f"{source}: no such P4 program")
    out.mkdir(parents=True, exist_ok=True)
    json_path, p4info = out / f"{source.stem}.json", out / f"{source.stem}.p4info.txtpb"
    args = [P4C, "--std", "p4-16", "-I", str(INCLUDE), "--p4runtime-files", str(p4info), "-o", str(json_path)]
    log.debug("compile %s", args)
    try:
        done = subprocess.run([*args, str(source)], capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise Bmv2Error(f"{P4C} is not on PATH; install p4c (README: P4 targets)") from None
    said = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode != 0:
        raise CompileError(source, said)
    return Program(json_path, p4info, source, tuple(said))


def program_files(path: Path, out: Path) -> Program:
    """The program at `path`: a P4 source (.p4) compiled into out/, or a compiled BMv2 JSON (.json) with its
    P4Info beside it (NAME.p4info.txtpb, as p4c names it)."""
    if path.suffix == ".p4":
        return compile_program(path, out)
    if path.suffix != ".json":
        raise Bmv2Error(f"{path}: a BMv2 program is a P4 source (.p4) or p4c-bm2-ss's JSON (.json)")
    prog = Program(path, path.with_name(f"{path.stem}.p4info.txtpb"))
    for f in (prog.json, prog.p4info):
        if not f.is_file():
            raise Bmv2Error(f"{f}: no such file (a compiled program is NAME.json and NAME.p4info.txtpb)")
    return prog


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def program_problems(p4info: Path, red: bool = False) -> list[str]:
    """What the driver needs and the program lacks (a table, its match fields, an action's parameters, a counter),
    one line each; empty when it has it all. `red`: the RED table too."""
    from controller.dataplane.p4runtime import P4Info, P4RuntimeError  # finsy: only where bmv2 runs

    try:
        info = P4Info.load(p4info)
    except P4RuntimeError as exc:
        return [str(exc)]
    tables = {**TABLES, **(RED_TABLE if red else {})}
    problems = []
    for name, (fields, action, params) in tables.items():
        try:
            have = {mf.name for mf in info.table(name).match_fields}
        except P4RuntimeError:
            problems.append(f"no table {name} (the controller writes its entries)")
            continue
        if set(fields) != have:
            problems.append(
                f"table {name} matches on {sorted(have) or 'nothing'}; the controller writes {list(fields)}"
            )
        try:
            got = [p.name for p in info.action(action).params]
        except P4RuntimeError:
            problems.append(f"no action {action} (table {name}'s)")
            continue
        if got != list(params):
            problems.append(f"action {action} takes ({', '.join(got)}); the controller passes ({', '.join(params)})")
    for name in (*_COUNTERS, "queue_depth"):
        try:
            info.counter(name)
        except P4RuntimeError:
            problems.append(f"no counter {name} (the controller reads it)")
    return problems


def red_idle_inv(cfg: RedConfig) -> int:
    """2^32 / the idle time that halves RED's average, in us (BMv2's timestamps): the P4 program multiplies the
    idle time by it, having no division; at most 2^32 (a halving time under 1 us is taken as 1 us)."""
    return min(1 << 32, round((1 << 32) / max(1.0, cfg.half_ns / 1000)))


def queue_rate_pps(rate_bps: int, mtu: int) -> int:
    """BMv2 shapes in packets per second: the spec's bit/s in full-size frames."""
    return max(1, int(round(rate_bps / (8 * frame_bytes(mtu)))))


def queue_limits(p: LinkParams) -> tuple[int, int]:
    """The program's drop-tail limits (packets, bytes): the spec's unit binds, the other does not."""
    if p.queue_bytes is not None:
        return QUEUE_UNLIMITED, p.queue_bytes
    return p.queue_pkts or 100, QUEUE_UNLIMITED


def queue_depth_pkts(p: LinkParams) -> int:
    """The most packets the queue can hold (a byte limit: in minimum-size frames)."""
    if p.queue_bytes is not None:
        return max(1, p.queue_bytes // MIN_FRAME_BYTES)
    return p.queue_pkts or 100


#: the program's per-flow counters and the FlowCounters fields (packets, bytes) each fills
_COUNTERS: dict[str, tuple[str, str]] = {
    "offered": ("enq_pkts", "enq_bytes"),
    "forwarded": ("fwd_pkts", "fwd_bytes"),
    "random_drops": ("rnd_drop_pkts", "rnd_drop_bytes"),
    "queue_drops": ("q_drop_pkts", "q_drop_bytes"),
}


@dataclass
class Bmv2Bottleneck:
    """One emulated bottleneck on a BMv2 switch node (mininet/p4switch.py)."""

    delays_itself: ClassVar[bool] = False
    """The link's delay node carries the delay (controller/dataplane/delay.py), not the switch."""
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
    _params: LinkParams | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    quiescent: bool = field(default=False, init=False)
    """Whether the last read found the queue empty (the link's counters balance)."""
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

    def setup(self, params: LinkParams, seed: int) -> None:
        """Program routes, flows, queue and loss; on failure undo and raise.  Delay is the link's delay
        node's (controller/dataplane/delay.py): params.delay_ms is not the switch's."""
        del seed  # BMv2's random() draws from the switch's own generator: see p4/README.md
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
            self._set_red(params, None)
            self._params = params
        except (DataPlaneError, system.SystemError_) as exc:
            self.teardown()
            raise Bmv2Error(f"bmv2 data plane: {exc}") from None

    def _set_queue(self, p: LinkParams) -> None:
        port = str(self.bottleneck_port)
        self.switch.cli(
            [
                f"set_queue_depth {MAX_QUEUE_PKTS} {port}",
                f"set_queue_rate {queue_rate_pps(p.rate_bps, p.mtu)} {port}",
            ]
        )
        c = self.client
        pkts, nbytes = queue_limits(p)
        entry = c.table_entry("queue_limit", "set_queue_limit", {"pkts": pkts, "bytes": nbytes}, default=True)
        c.write([c.update("modify", entry)])

    def _set_red(self, p: LinkParams, old: LinkParams | None) -> None:
        """red_params' default action, where it changes (the program's own default is off); a new RED starts
        from an empty average (a register, written over Thrift: BMv2's P4Runtime server writes none)."""
        cfg = red_config(p.red, p.rate_bps, frame_bytes(p.mtu))
        before = red_config(old.red, old.rate_bps, frame_bytes(old.mtu)) if old is not None else RED_OFF
        if cfg == before:
            return
        if p.red is not None and (old is None or old.red != p.red):
            self.switch.cli(["register_write red_avg 0 0"])
        params = {k: v for k, v in cfg._asdict().items() if k != "half_ns"}
        c = self.client
        entry = c.table_entry("red_params", "set_red", {**params, "idle_inv": red_idle_inv(cfg)}, default=True)
        c.write([c.update("modify", entry)])

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
            "target": "bmv2",
            "switch": "simple_switch_grpc",
            "bottleneck_port": self.bottleneck_port,
            "frame_bytes": frame_bytes(p.mtu) if p else None,
            "queue_rate_pps": queue_rate_pps(p.rate_bps, p.mtu) if p else None,
            "queue_limit_pkts_bytes": list(queue_limits(p)) if p else None,
            "loss_threshold": loss_threshold(p.per) if p else None,
            "red": red_config(p.red, p.rate_bps, frame_bytes(p.mtu))._asdict() if p and p.red else None,
            "random_seeded": False,
            "program": str(self.switch.json_path),
            "program_sha256": _sha256(self.switch.json_path),
            "p4runtime": self.switch.grpc_address,
            "log": str(self.switch.log_path),
            "flows": {str(i): list(k) for i, k in enumerate(self.flows, 1)},
        }

    # --- while running -----------------------------------------------------

    def apply(self, p: LinkParams) -> None:
        """Set loss and RED and, if changed, the queue's rate/depth; safe while traffic flows."""
        self._set_loss(p)
        old = self._params
        self._set_red(p, old)
        if old is None or (old.rate_bps, queue_limits(old)) != (p.rate_bps, queue_limits(p)):
            self._set_queue(p)
        self._params = p

    def read(self) -> Snapshot:
        """All counters now, in one ReadRequest."""
        c = self.client
        indexes = range(len(self.flows) + 1)
        entities = [c.counter_entity(n, i) for i in indexes for n in _COUNTERS]
        entities.append(c.counter_entity("queue_depth"))
        with self._lock:
            t_sent = time.monotonic()
            got = c.read(entities)
            t = (t_sent + time.monotonic()) / 2  # the switch sampled somewhere in between
            ids = {c.p4info.counter_id(n): n for n in (*_COUNTERS, "queue_depth")}
            per_index = {i: FlowCounters() for i in indexes}
            hist = [0] * QDEPTH_SLOTS
            for e in got:
                ce = e.counter_entry
                name = ids.get(ce.counter_id)
                i = ce.index.index
                if name == "queue_depth":
                    if 0 <= i < QDEPTH_SLOTS:
                        hist[i] = ce.data.packet_count
                elif name is not None and i in per_index:
                    f_pkts, f_bytes = _COUNTERS[name]
                    setattr(per_index[i], f_pkts, ce.data.packet_count)
                    setattr(per_index[i], f_bytes, ce.data.byte_count)
            self.depth_hist = hist
            snap = Snapshot(t=t)
            for i, fc in per_index.items():
                if i != FALLBACK_INDEX:
                    snap.flows[self.flows[i - 1]] = fc
                for name in COUNTER_FIELDS:
                    setattr(snap.link, name, getattr(snap.link, name) + getattr(fc, name))
            self.quiescent = snap.backlog_pkts == 0
            return snap

    @staticmethod
    def deepest(before: list[int], after: list[int]) -> int:
        """Deepest queue (packets) seen between two histograms (-1: no packet dequeued)."""
        return max((k for k, (a, b) in enumerate(zip(after, before or [0] * len(after))) if a > b), default=-1)

    def drain_time_s(self) -> float:
        """The longest the full queue takes to drain at the link's rate."""
        p = self._params
        if p is None:
            return 0.0
        return queue_depth_pkts(p) / queue_rate_pps(p.rate_bps, p.mtu) + DRAIN_MARGIN_S

    def wait_drained(self, timeout_s: float = 3.0) -> bool:
        """Poll until a read finds the queue empty (the link's counters balance); False after the timeout."""
        self.read()
        deadline = time.monotonic() + max(timeout_s, 2 * self.drain_time_s())
        while not self.quiescent:
            if time.monotonic() > deadline:
                return False
            time.sleep(DRAIN_MARGIN_S)  # polling interval
            self.read()
        return True

    # --- teardown ----------------------------------------------------------

    def teardown(self) -> None:
        """Nearly a no-op: forget the parameters.  The tables, registers and counters are the switch process's
        and go with it (Mininet stops the switch node); deleting entries first would only cost time."""
        self._params = None

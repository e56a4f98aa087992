"""The fpga-sim target: the FPGA bottleneck element (fpga/rtl/), Verilated, in the loop of a real link.

Layout on the bottleneck link A -> B:

    A egress:   steer.bpf.c redirects every frame A sends into a capture
                veth pair (controller/dataplane/delayline.py, `Steering`)
    harness:    cclab-fpga-sim (fpga/sim/harness.cpp) reads the pair, feeds
                the frames to the Verilated element (queue, token-bucket
                shaper, random loss, delay line, per-flow counters) and sends
                what leaves it back out of A, marked, so it reaches B
    registers:  the element's AXI4-Lite map over the harness's Unix socket
                under /run/cclab/fpga (controller/dataplane/fpgaregs.py)

The element delays by itself (`delays_itself`): its delay line holds each
frame D cycles, and the runner puts no delay element on its links.  Every
counter is the RTL's: the eight `FlowCounters` per installed 5-tuple and a
fallback entry for everything else.  Simulated cycles are tied to the wall
clock at the element's clock (register 0x24, set by the build's
FPGA_SIM_KHZ): rate, queue and delay are the element's in cycles, so they
hold in real time as long as the model keeps up (fpga/README.md, "In the loop").

Nothing here is a shell string; the harness is started with an argument list.
"""

from __future__ import annotations

import ipaddress
import logging
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from controller import system
from controller.dataplane import COUNTER_FIELDS, DataPlaneError, FlowCounters, FlowKey, LinkParams, Snapshot, delayline
from controller.dataplane import fpgaregs as fr
from controller.dataplane.delayline import Steering, missing_steer
from controller.dataplane.p4common import frame_bytes, loss_threshold
from controller.network.fpga import BEAT_BYTES, CLOCK_KHZ, DELAY_ADDR_W, QUEUE_ADDR_W, QUEUE_FRAMES, capacity_refusal

log = logging.getLogger(__name__)

#: the harness's executable name (`cclab clean` kills a leftover one by it)
HARNESS = "cclab-fpga-sim"
BINARY = system.BUILD / "fpga-sim" / HARNESS
SOCKET_DIR = system.RUN_STATE / "fpga"
READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
#: how far the model may fall behind the wall clock before the harness forgets the rest (lag_resets,
#: lag_lost_cycles), ms: a run's element is then late by at most this much, never by more
MAX_LAG_MS = 20
#: how often wait_drained reads the element's occupancy, seconds
DRAIN_POLL_S = 0.02
#: register offsets in the element's blocks (fpga/rtl/cclab_bottleneck.v, its header comment)
CONTROL, MALFORMED, Q_BYTES, Q_PKTS, DL_FILL, CLK_KHZ = 0x10, 0x14, 0x18, 0x1C, 0x20, 0x24
SHAPE_ON, CLEAR = 1, 2
RATE, BURST = 0x0C, 0x10
LIM_BYTES, LIM_PKTS, Q_MEM_BYTES, Q_MAX_PKTS = 0x0C, 0x10, 0x14, 0x18
DELAY_CYCLES, DL_MEM_BEATS = 0x0C, 0x10
LOSS_THR, LOSS_SEED = 0x0C, 0x10
N_ENTRIES, TABLE, STRIDE = 0x0C, 0x10, 0x14
KEY_SRC, KEY_DST, KEY_PORTS, KEY_PROTO, COUNTERS = 0x00, 0x04, 0x08, 0x0C, 0x40
KEY_VALID = 1 << 31
#: "no limit" for the queue's other unit
UNLIMITED = (1 << 32) - 1
#: Q8.24: the rate register's fraction bits
RATE_FRAC = 24


def missing() -> str | None:
    """Why the fpga-sim target cannot run here, or None."""
    if not BINARY.exists():
        return f"{BINARY} is missing; run `make build` with Verilator installed (`make deps`)"
    return missing_steer()


def rate_q824(rate_bps: int, clock_khz: int) -> int:
    """Bytes per cycle in Q8.24 for `rate_bps` at the element's clock (integer arithmetic: exact to a unit)."""
    q = (rate_bps << RATE_FRAC) // (8 * clock_khz * 1000)
    if not 0 < q < 1 << 32:
        cycle_bps = 8 * clock_khz * 1000  # a rate of one byte per cycle
        lo, hi = -(-cycle_bps >> RATE_FRAC), ((1 << 32) - 1) * cycle_bps >> RATE_FRAC
        raise DataPlaneError(
            f"rate_mbps = {rate_bps / 1e6:g}: the element at {clock_khz} kHz shapes {lo} .. {hi} bit/s"
        )
    return q


def delay_cycles(delay_ms: float, clock_khz: int) -> int:
    """The delay line's D for `delay_ms`: cycles of the element's clock, to the nearest."""
    return int(round(delay_ms * clock_khz))


@dataclass
class ElementSnapshot(Snapshot):
    """A read of the element: its counters and, as its backlog, the frames waiting in its queue."""

    queued_pkts: int = 0
    """Frames in the element's queue at the read (register 0x1C)."""

    @property
    def backlog_pkts(self) -> int:
        """The queue's frames only: offered minus left minus dropped would count the delay line's frames too,
        which are on the link, not waiting (on the other targets the delay element is not in the counters), and
        would make the ACKs' direction look backlogged to the fidelity check (summary.backlogged_rate)."""
        return self.queued_pkts


@dataclass
class FpgaSimBottleneck:
    """One emulated bottleneck direction on the Verilated FPGA element."""

    delays_itself: ClassVar[bool] = True
    """The element's delay line holds each frame for LinkParams.delay_ms, exact to its clock cycle."""
    run_id: str
    egress_dev: str
    """A: the device whose outgoing frames the element takes."""
    ingress_dev: str
    """B: A's peer, where the element's output arrives."""
    flows: tuple[FlowKey, ...] = ()
    """Declared flows: table entries 0..n-1 in this order; the element's last entry counts the rest."""
    max_lag_ms: int = MAX_LAG_MS
    """The harness's lag limit (--max-lag-ms): the model catches up on a stall shorter than this, frames entering
    at the cycles of their arrival; of a longer one the excess is forgotten and the element runs late."""
    clock_khz: int = field(default=0, init=False)
    final_stats: dict[str, Any] | None = field(default=None, init=False)
    """As the harness stopped (kept by teardown, `final_account`): its own counters, what the RTL counted,
    and the controller's last read beside it."""
    _proc: subprocess.Popen[str] | None = field(default=None, init=False)
    _steering: Steering | None = field(default=None, init=False)
    _regs: fr.Element | None = field(default=None, init=False)
    _params: LinkParams | None = field(default=None, init=False)
    _entries: int = field(default=0, init=False)
    _table: tuple[int, int] = field(default=(0, 0), init=False)
    """The flow table's offset and entry stride."""
    _seed: int = field(default=1, init=False)
    _memory: tuple[int, int] = field(default=(0, 0), init=False)
    """What the queue memory holds: bytes, frames."""
    _last_read: Snapshot | None = field(default=None, init=False)
    """The controller's last read of the counters (the monitor's final one, at the end of a run)."""

    @property
    def socket_path(self) -> Path:
        return SOCKET_DIR / f"{self.run_id}.sock"

    @property
    def regs(self) -> fr.Element:
        if self._regs is None:
            raise DataPlaneError(f"fpga-sim {self.run_id}: the harness is not running")
        return self._regs

    # --- set-up ------------------------------------------------------------

    def setup(self, params: LinkParams, seed: int) -> None:
        """Start the harness, program the element, then steer A's frames into it; on failure undo and raise."""
        why = missing()
        if why:
            raise DataPlaneError(f"fpga-sim data plane: {why}")
        try:
            self._start()
            regs = self.regs
            regs.discover()
            self.clock_khz = regs.read(fr.ELEMENT, CLK_KHZ)
            self._memory = self.queue_memory()
            self._check_build(regs.read(fr.DELAY, DL_MEM_BEATS))
            self._entries = regs.read(fr.FLOWS, N_ENTRIES)
            if len(self.flows) >= self._entries:
                raise DataPlaneError(
                    f"{len(self.flows)} flows on link {self.run_id}: the element counts at most "
                    f"{self._entries - 1} by 5-tuple"
                )
            self._install_flows()
            self._seed = seed & UNLIMITED or 1
            regs.write(fr.LOSS, LOSS_SEED, self._seed)
            regs.write(fr.ELEMENT, CONTROL, SHAPE_ON | CLEAR)
            self.apply(params)
            assert self._steering is not None
            self._steering.steer()
        except (DataPlaneError, system.SystemError_) as exc:
            self.teardown()
            raise DataPlaneError(f"fpga-sim data plane: {exc}") from None

    def _start(self) -> None:
        self._steering = Steering(system.PIN_ROOT / f"{self.run_id}-fpga", (self.egress_dev,), whole_frames=True)
        ((capture, _dev),) = self._steering.build()
        SOCKET_DIR.mkdir(parents=True, exist_ok=True)
        args = [str(BINARY), "--rx", capture, "--tx", self.egress_dev, "--socket", str(self.socket_path)]
        args += ["--max-lag-ms", str(self.max_lag_ms)]
        self._proc = delayline.start(args)
        first = delayline.read_line(self._proc, READY_TIMEOUT_S)
        if first is None or first.get("ready") is not True:
            raise DataPlaneError(f"{HARNESS} did not start: {delayline.stderr_of(self._proc)}")
        self._regs = fr.Element(fr.HarnessTransport(self.socket_path))

    def _install_flows(self) -> None:
        regs = self.regs
        self._table = (regs.read(fr.FLOWS, TABLE), regs.read(fr.FLOWS, STRIDE))
        for e, k in enumerate(self.flows):
            at = self._entry_at(e)
            regs.io.write32(at + KEY_PROTO, k.proto)  # not valid while the key changes
            regs.io.write32(at + KEY_SRC, int(ipaddress.IPv4Address(k.src)))
            regs.io.write32(at + KEY_DST, int(ipaddress.IPv4Address(k.dst)))
            regs.io.write32(at + KEY_PORTS, k.sport << 16 | k.dport)
            regs.io.write32(at + KEY_PROTO, KEY_VALID | k.proto)

    # --- while running -----------------------------------------------------

    def _queue_limits(self, p: LinkParams) -> tuple[int, int]:
        """(frames, bytes) limits: the spec's unit binds, the other is unlimited."""
        if p.queue_bytes is not None:
            return UNLIMITED, p.queue_bytes
        return p.queue_pkts or 100, UNLIMITED

    def queue_memory(self) -> tuple[int, int]:
        """(bytes, frames) the element's queue memory holds: below a larger limit, the memory is what binds."""
        return self.regs.read(fr.QUEUE, Q_MEM_BYTES), self.regs.read(fr.QUEUE, Q_MAX_PKTS)

    def _check_build(self, delay_beats: int) -> None:
        """The element is the build the spec was judged against (capacity_refusal): clock and memories."""
        got = (self.clock_khz, *self._memory, delay_beats)
        want = (CLOCK_KHZ, BEAT_BYTES << QUEUE_ADDR_W, QUEUE_FRAMES, 1 << DELAY_ADDR_W)
        if got != want:
            raise DataPlaneError(
                f"{BINARY} is built with clock {got[0]} kHz, a queue of {got[1]} bytes and {got[2]} frames, a "
                f"delay line of {got[3]} beats; specs are checked against {want[0]}, {want[1]}, {want[2]}, "
                f"{want[3]}: run `make build`"
            )

    def apply(self, p: LinkParams) -> None:
        """Write rate, burst, queue limits, delay and loss; every register may change while frames flow."""
        if p.ge is not None:
            raise DataPlaneError("Gilbert-Elliott loss is not in the FPGA element; use i.i.d. `per` on fpga-sim")
        if p.jitter_ms:
            raise DataPlaneError(f"jitter_ms = {p.jitter_ms:g}: the FPGA element's delay line has no jitter")
        if p.red is not None:
            raise DataPlaneError("a RED queue is not in the FPGA element yet; RED runs on the kernel and bmv2 targets")
        why = capacity_refusal(p.rate_bps, p.delay_ms, p.queue_pkts, p.queue_bytes, p.mtu)
        if why is not None:
            raise DataPlaneError(f"{why[0]} = {why[1]}: {why[2]}")
        regs = self.regs
        rate = rate_q824(p.rate_bps, self.clock_khz)
        pkts, nbytes = self._queue_limits(p)
        d = delay_cycles(p.delay_ms, self.clock_khz)
        regs.write(fr.SHAPER, BURST, 2 * frame_bytes(p.mtu))
        regs.write(fr.SHAPER, RATE, rate)
        regs.write(fr.QUEUE, LIM_PKTS, pkts)
        regs.write(fr.QUEUE, LIM_BYTES, nbytes)
        regs.write(fr.DELAY, DELAY_CYCLES, d)
        regs.write(fr.LOSS, LOSS_THR, loss_threshold(p.per))
        self._params = p

    def _entry_at(self, e: int) -> int:
        table, stride = self._table
        return table + stride * e

    def _entry(self, e: int) -> FlowCounters:
        at = self._entry_at(e) + COUNTERS
        return FlowCounters(*(self.regs.read64(at + 8 * c) for c in range(len(COUNTER_FIELDS))))

    def read(self) -> ElementSnapshot:
        """All counters now: the declared flows' entries and the fallback (the link is their sum), and the
        frames in the queue."""
        t_sent = time.monotonic()
        got = {e: self._entry(e) for e in (*range(len(self.flows)), self._entries - 1)}
        queued = self.regs.read(fr.ELEMENT, Q_PKTS)
        snap = ElementSnapshot(t=(t_sent + time.monotonic()) / 2, queued_pkts=queued)
        for e, fc in got.items():
            if e < len(self.flows):
                snap.flows[self.flows[e]] = fc
            for name in COUNTER_FIELDS:
                setattr(snap.link, name, getattr(snap.link, name) + getattr(fc, name))
        self._last_read = snap
        return snap

    def occupancy(self) -> tuple[int, int, int]:
        """(frames queued, bytes queued, beats in the delay line) now."""
        regs = self.regs
        return regs.read(fr.ELEMENT, Q_PKTS), regs.read(fr.ELEMENT, Q_BYTES), regs.read(fr.ELEMENT, DL_FILL)

    def wait_drained(self, timeout_s: float = 3.0) -> bool:
        """Poll until the queue and the delay line are empty; False after the timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            q, _, fill = self.occupancy()
            if q == 0 and fill == 0:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(DRAIN_POLL_S)

    def harness_stats(self) -> dict[str, Any]:
        """The harness's counters now (cycles, simulated cycles per second, frames, lag)."""
        io = self.regs.io
        assert isinstance(io, fr.HarnessTransport)
        return io.stats()

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this target."""
        p = self._params
        return {
            "target": "fpga-sim",
            "harness": str(BINARY),
            "socket": str(self.socket_path),
            "clock_khz": self.clock_khz,
            "rate_q8_24": rate_q824(p.rate_bps, self.clock_khz) if p else None,
            "burst_bytes": 2 * frame_bytes(p.mtu) if p else None,
            "queue_limit_pkts_bytes": list(self._queue_limits(p)) if p else None,
            "queue_memory_bytes_frames": list(self._memory),
            "delay_cycles": delay_cycles(p.delay_ms, self.clock_khz) if p else None,
            "loss_threshold": loss_threshold(p.per) if p else None,
            "loss_seed": self._seed,
            "flows": {str(e): list(k) for e, k in enumerate(self.flows)},
            "fallback_entry": self._entries - 1,
        }

    # --- teardown ----------------------------------------------------------

    def teardown(self) -> None:
        """Unsteer A, stop the harness (keeping its last counters), remove the pair, pins and socket.

        Safe to call twice and after a partial set-up."""
        if self._steering is not None:
            self._steering.unsteer()
        if self._regs is not None:
            self._regs.close()
            self._regs = None
        if self._proc is not None:
            proc, self._proc = self._proc, None
            # closing stdin stops it: its last line has its counters and the RTL's
            self.final_stats = final_account(delayline.stop(proc, STOP_TIMEOUT_S), self.flows, self._last_read)
        if self._steering is not None:
            self._steering.remove()
            self._steering = None
        self.socket_path.unlink(missing_ok=True)
        self._params = None


def _named(values: list[int]) -> dict[str, int]:
    return dict(zip(COUNTER_FIELDS, values, strict=True))


def final_account(last: dict[str, Any] | None, flows: tuple[FlowKey, ...], read: Snapshot | None) -> dict[str, Any]:
    """summary.json's account of one element as its harness stopped (its `element_stats`).

    ``harness``: the harness's own counters (frames in and out, simulated cycles, lag); ``rtl``: what the
    element counted, read through its register map after the last frame (the declared flows' entries by
    5-tuple, the fallback entry, their sum for the link, the malformed count); ``rx_frames_unaccounted``: the
    frames the harness took that the RTL did not count (0 when none is lost between them); ``last_read``: the
    link as the controller last read it (the monitor's final poll, where summary.json's figures come from),
    and ``rtl_minus_last_read``: what the element counted after that read (frames of a closing connection)."""
    if last is None:
        return {"harness": None, "rtl": None, "note": "the harness gave no last line (killed or crashed)"}
    harness = dict(last)
    rtl_raw = harness.pop("rtl", None)
    out: dict[str, Any] = {"harness": harness, "rtl": None}
    if isinstance(rtl_raw, dict) and rtl_raw.get("entries"):
        entries = [_named(e) for e in rtl_raw["entries"]]
        link = {name: sum(e[name] for e in entries) for name in COUNTER_FIELDS}
        out["rtl"] = {
            "malformed": rtl_raw.get("malformed"),
            "link": link,
            "flows": [{"five_tuple": list(k), **entries[i]} for i, k in enumerate(flows)],
            "fallback": entries[-1],
        }
        # every frame the harness took is one the RTL counted (offered, or malformed) or one it never fed in
        fed = link["enq_pkts"] + int(rtl_raw.get("malformed") or 0) + int(harness.get("unfed") or 0)
        out["rx_frames_unaccounted"] = int(harness.get("rx_frames") or 0) - fed
        if read is not None:
            seen = {name: getattr(read.link, name) for name in COUNTER_FIELDS}
            out["last_read"] = seen
            out["rtl_minus_last_read"] = {name: link[name] - seen[name] for name in COUNTER_FIELDS}
    return out

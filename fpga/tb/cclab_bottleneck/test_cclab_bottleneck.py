"""cocotb testbench of cclab_bottleneck, the whole element: one test per behaviour of the contract.

Frames go in through an AXI4-Stream source (length on tuser[16:1] of the first beat, the bad-frame
flag on tuser[0]), out through a sink; parameters and counters through the AXI4-Lite register map,
exactly as a driver reaches them.  The clock is the reference 156.25 MHz (6.4 ns).
"""

from __future__ import annotations

import logging
import os
import random

import cocotb
from cclab_model import Xoshiro128pp, flow_frame, seq_of
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.axi import (
    AxiLiteBus,
    AxiLiteMaster,
    AxiStreamBus,
    AxiStreamFrame,
    AxiStreamMonitor,
    AxiStreamSink,
    AxiStreamSource,
)
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import ARP, Ether

PERIOD_NS = 6.4
FRAC = 1 << 24                       # rate register: bytes per cycle, Q8.24
TIMEOUT_US = 5000

# register map (cclab_bottleneck.v)
CTRL, MALFORMED, Q_BYTES, Q_PKTS = 0x0010, 0x0014, 0x0018, 0x001C
RATE, BURST = 0x010C, 0x0110
LIM_BYTES, LIM_PKTS = 0x020C, 0x0210
DELAY = 0x030C
THR, SEED = 0x040C, 0x0410
HIST_SHIFT, HIST_BIN0 = 0x050C, 0x0540
FLOWS, STRIDE = 0x1000, 0x80
N_FLOWS = int(os.environ.get("PARAM_N_FLOWS", "8"))
FALLBACK = N_FLOWS
COUNTERS = ("fwd_bytes", "fwd_pkts", "rnd_drop_bytes", "rnd_drop_pkts",
            "q_drop_bytes", "q_drop_pkts", "enq_bytes", "enq_pkts")


class TB:
    def __init__(self, dut) -> None:
        self.dut = dut
        cocotb.start_soon(Clock(dut.clk, PERIOD_NS, unit="ns").start())
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        for bfm in (self.source, self.sink, self.axil.write_if, self.axil.read_if):
            bfm.log.setLevel(logging.WARNING)          # a line per frame slows the simulation down
        for name in ("wr_ready", "rd_ready", "rd_valid", "rd_data"):
            getattr(dut, f"dl_mem_{name}").value = 0

    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 5)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 5)

    async def wr(self, addr: int, value: int) -> None:
        await self.axil.write_dword(addr, value)

    async def rd(self, addr: int) -> int:
        return int(await self.axil.read_dword(addr))

    async def send(self, data: bytes, declared: int | None = None, bad: bool = False,
                   tkeep: list[int] | None = None) -> None:
        n = len(data) if declared is None else declared
        await self.source.send(AxiStreamFrame(data, tkeep=tkeep, tuser=(n << 1) | int(bad)))

    async def recv_all(self, n: int) -> list[AxiStreamFrame]:
        return [await with_timeout(self.sink.recv(), TIMEOUT_US, "us") for _ in range(n)]

    async def idle(self) -> None:
        """Wait until the source has sent everything and the element holds no frame."""
        await self.source.wait()
        for _ in range(100000):
            await ClockCycles(self.dut.clk, 50)
            if await self.rd(Q_PKTS) == 0 and int(self.dut.m_axis_tvalid.value) == 0 and \
                    int(self.dut.delay_line.fill.value) == 0 and int(self.dut.delay_line.pf_cnt.value) == 0:
                return
        raise AssertionError("the element did not drain")

    async def install(self, entry: int, src: str, dst: str, sport: int, dport: int, proto: int) -> None:
        base = FLOWS + STRIDE * entry
        await self.wr(base + 0x0C, 0)
        await self.wr(base + 0x00, _ip(src))
        await self.wr(base + 0x04, _ip(dst))
        await self.wr(base + 0x08, (sport << 16) | dport)
        await self.wr(base + 0x0C, (1 << 31) | proto)

    async def counters(self, entry: int) -> dict[str, int]:
        out = {}
        for c, name in enumerate(COUNTERS):
            addr = FLOWS + STRIDE * entry + 0x40 + 8 * c
            lo = await self.rd(addr)
            out[name] = lo | (await self.rd(addr + 4)) << 32
        return out

    async def set_rate(self, bytes_per_cycle: float) -> None:
        await self.wr(RATE, round(bytes_per_cycle * FRAC))


def _ip(a: str) -> int:
    p = [int(x) for x in a.split(".")]
    return (p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]


def cycles(t_ps: int) -> float:
    return t_ps / (PERIOD_NS * 1000)


def empty_counters() -> dict[str, int]:
    return dict.fromkeys(COUNTERS, 0)


@cocotb.test()
async def test_register_map(dut) -> None:
    """A driver finds every block by walking the headers from 0: types in order, version, the last next is 0."""
    tb = TB(dut)
    await tb.reset()
    addr, types = 0, []
    while True:
        types.append(await tb.rd(addr))
        assert await tb.rd(addr + 4) == 0x00010000, f"block at {addr:#x}: version"
        nxt = await tb.rd(addr + 8)
        if nxt == 0:
            break
        assert nxt > addr, f"block at {addr:#x} points back to {nxt:#x}"
        addr = nxt
    assert types == [0xCC1B0000 + i for i in range(7)], [hex(t) for t in types]
    params = await tb.rd(0x000C)
    assert params >> 16 == 64 and (params >> 8) & 0xFF == N_FLOWS, hex(params)
    assert await tb.rd(0x0024) == 156250
    assert await tb.rd(0x060C) == N_FLOWS + 1
    await tb.wr(LIM_BYTES, 12345)
    assert await tb.rd(LIM_BYTES) == 12345
    await tb.install(3, "10.1.2.3", "10.4.5.6", 1234, 80, 6)
    assert [await tb.rd(FLOWS + STRIDE * 3 + o) for o in (0, 4, 8, 12)] == \
        [0x0A010203, 0x0A040506, (1234 << 16) | 80, (1 << 31) | 6]


def _rate(out: list[AxiStreamFrame]) -> float:
    """Bytes per cycle from the first departure of `out` to its last (the last frame's bytes excluded)."""
    return sum(len(f.tdata) for f in out[:-1]) / cycles(out[-1].sim_time_start - out[0].sim_time_start)


#: departures left out of a rate measurement: those the full bucket (BURST) lets through at line rate
SKIP = 8


@cocotb.test()
async def test_rate_long_burst(dut) -> None:
    """Over a long burst (200 frames of mixed sizes) the shaped rate is R within 1 %."""
    tb = TB(dut)
    await tb.reset()
    rng = random.Random(1)
    rate = 2.5                                       # bytes/cycle: 3.125 Gbit/s at 156.25 MHz
    await tb.set_rate(rate)
    await tb.wr(CTRL, 1)
    frames = [flow_frame(i, rng.choice((64, 576, 1000, 1514))) for i in range(200)]
    for f in frames:
        await tb.send(f)
    out = await tb.recv_all(len(frames))
    assert [f.tdata for f in out] == frames
    got = _rate(out[SKIP:])
    assert abs(got / rate - 1) < 0.01, f"rate {got:.4f} bytes/cycle, set {rate}"


@cocotb.test()
async def test_rate_changed_midstream(dut) -> None:
    """The rate written while a backlog drains applies at once: each half within 1 % of its rate."""
    tb = TB(dut)
    await tb.reset()
    await tb.set_rate(4.0)
    await tb.wr(CTRL, 1)
    frames = [flow_frame(i, 1000) for i in range(160)]
    for f in frames:
        await tb.send(f)
    first = await tb.recv_all(60)
    await tb.set_rate(1.5)
    second = await tb.recv_all(100)
    assert [f.tdata for f in first + second] == frames
    # left out: the bucket's burst at the start, and the frames around the write (its AXI-Lite transaction
    # takes cycles while one frame leaves)
    r1 = _rate(first[SKIP:])
    r2 = _rate(second[2:])
    assert abs(r1 / 4.0 - 1) < 0.01, f"before the change: {r1:.4f} bytes/cycle, set 4.0"
    assert abs(r2 / 1.5 - 1) < 0.01, f"after the change: {r2:.4f} bytes/cycle, set 1.5"


async def _hold_queue(tb: TB) -> None:
    """Let one frame through and then none: rate 0, an empty bucket, the shaper on."""
    await tb.wr(CTRL, 0)
    await tb.set_rate(0)
    await tb.wr(BURST, 0)
    await tb.wr(CTRL, 1)


@cocotb.test()
async def test_queue_limit_exact(dut) -> None:
    """The limit in frames and in bytes is exact: a frame that fits to the byte is admitted, one byte more is not."""
    tb = TB(dut)
    await tb.reset()
    await tb.install(0, "10.0.0.1", "10.0.1.1", 40000, 5201, 6)
    await tb.wr(HIST_SHIFT, 10)
    # frames: the first passes (the bucket's only frame), the next 5 fill a 5-frame limit, 4 are dropped
    await _hold_queue(tb)
    await tb.wr(LIM_PKTS, 5)
    for i in range(10):
        await tb.send(flow_frame(i, 1000))
    await tb.source.wait()
    await ClockCycles(dut.clk, 200)
    assert await tb.rd(Q_PKTS) == 5 and await tb.rd(Q_BYTES) == 5000
    c = await tb.counters(0)
    assert (c["enq_pkts"], c["q_drop_pkts"], c["q_drop_bytes"], c["fwd_pkts"]) == (10, 4, 4000, 1), c
    # the histogram: each arrival's queue depth (the first two found it empty), bins of 1024 bytes
    depths = [0, 0] + [1000 * k for k in range(1, 5)] + [5000] * 4
    want = [0] * 16
    for d in depths:
        want[min(d >> 10, 15)] += 1
    got = [await tb.rd(HIST_BIN0 + 4 * b) for b in range(16)]
    assert got == want, f"histogram {got}, want {want}"
    # drain, then bytes: 3000 bytes hold 1000 + 1000 + 900 + 100 exactly, not 200 more, nor 64
    await tb.wr(CTRL, 0)
    await tb.recv_all(6)
    await tb.idle()
    await tb.wr(LIM_PKTS, 0xFFFFFFFF)
    await tb.wr(LIM_BYTES, 3000)
    await tb.wr(CTRL, 2)                            # clear the counters
    await _hold_queue(tb)
    sizes = [500, 1000, 1000, 900, 200, 100, 64]
    for i, s in enumerate(sizes):
        await tb.send(flow_frame(i, s))
    await tb.source.wait()
    await ClockCycles(dut.clk, 200)
    assert await tb.rd(Q_BYTES) == 3000 and await tb.rd(Q_PKTS) == 4
    c = await tb.counters(0)
    assert (c["q_drop_pkts"], c["q_drop_bytes"]) == (2, 264), c
    await tb.wr(CTRL, 0)
    out = await tb.recv_all(5)
    assert [seq_of(f.tdata) for f in out] == [0, 1, 2, 3, 5]


@cocotb.test()
async def test_random_loss(dut) -> None:
    """Loss at p = 0.1 over 3000 frames: the drops are the seeded generator's draws, their count and the
    count of consecutive drops inside their binomial intervals."""
    from controller.measure.metrics import binomial_interval
    tb = TB(dut)
    await tb.reset()
    n, p, seed = 3000, 0.1, 0xC0FFEE
    thr = round(p * 2**32)
    await tb.install(0, "10.0.0.1", "10.0.1.1", 40000, 5201, 6)
    await tb.wr(SEED, seed)
    await tb.wr(THR, thr)
    model = Xoshiro128pp(seed)
    dropped = [model.next() < thr for _ in range(n)]
    for i in range(n):
        await tb.send(flow_frame(i, 64))
    kept = n - sum(dropped)
    out = await tb.recv_all(kept)
    assert [seq_of(f.tdata) for f in out] == [i for i in range(n) if not dropped[i]]
    c = await tb.counters(0)
    assert (c["rnd_drop_pkts"], c["fwd_pkts"], c["enq_pkts"]) == (sum(dropped), kept, n), c
    level = 1 - 1e-5
    lo, hi = binomial_interval(n, p, level)
    assert lo <= sum(dropped) <= hi, f"{sum(dropped)} drops of {n} at p={p}: outside [{lo}, {hi}]"
    pairs = sum(a and b for a, b in zip(dropped, dropped[1:]))
    lo, hi = binomial_interval(n - 1, p * p, level)
    assert lo <= pairs <= hi, f"{pairs} consecutive drops: outside [{lo}, {hi}] (p^2 = {p * p})"


@cocotb.test()
async def test_delay_exact(dut) -> None:
    """Every frame leaves the delay line exactly D cycles after it entered, for D = 1000 and, changed while
    frames flow, D = 2345; gaps between frames are kept."""
    tb = TB(dut)
    await tb.reset()
    mon = AxiStreamMonitor(AxiStreamBus.from_prefix(dut, "sh"), dut.clk, dut.rst)
    rng = random.Random(2)
    for d in (1000, 2345):
        await tb.wr(DELAY, d)
        frames = [flow_frame(i, rng.choice((64, 65, 300, 1514))) for i in range(20)]
        for f in frames:
            await tb.send(f)
            await ClockCycles(dut.clk, rng.randrange(0, 400))
        out = await tb.recv_all(len(frames))
        ins = [await with_timeout(mon.recv(), TIMEOUT_US, "us") for _ in frames]
        assert [f.tdata for f in out] == frames
        lat = [cycles(o.sim_time_start - i.sim_time_start) for i, o in zip(ins, out)]
        assert all(x == d for x in lat), f"D = {d}: latencies {lat}"
        lat = [cycles(o.sim_time_end - i.sim_time_end) for i, o in zip(ins, out)]
        assert all(x == d for x in lat), f"D = {d}: last-beat latencies {lat}"


@cocotb.test()
async def test_counters_exact(dut) -> None:
    """The eight counters of every entry are exact, classified as the contract keys frames: 5-tuple, ports after
    IP options, zero ports for non-first fragments and ICMP, the all-zero key (fallback) for non-IP frames."""
    tb = TB(dut)
    await tb.reset()
    seed, p = 99, 0.2
    thr = round(p * 2**32)
    await tb.install(0, "10.0.0.1", "10.0.1.1", 40000, 5201, 6)      # TCP
    await tb.install(1, "10.0.0.2", "10.0.1.1", 40001, 5202, 17)     # UDP
    await tb.install(2, "10.0.0.3", "10.0.1.1", 40002, 5203, 6)      # TCP behind 12 bytes of IP options
    await tb.install(3, "10.0.0.1", "10.0.1.1", 0, 0, 6)             # non-first fragments of flow 0's pair
    await tb.install(4, "10.0.0.4", "10.0.1.1", 0, 0, 1)             # ICMP
    await tb.wr(SEED, seed)
    await tb.wr(THR, thr)
    opts = b"\x01" * 12
    kinds = [
        (0, lambda i, s: flow_frame(i, s)),
        (1, lambda i, s: flow_frame(i, s, src="10.0.0.2", sport=40001, dport=5202, proto="udp")),
        (2, lambda i, s: flow_frame(i, max(s, 80), src="10.0.0.3", sport=40002, dport=5203, ip_opts=opts)),
        (3, lambda i, s: flow_frame(i, s, frag=100)),
        (4, lambda i, s: _pad(Ether() / IP(src="10.0.0.4", dst="10.0.1.1") / ICMP(), s)),
        (FALLBACK, lambda i, s: _pad(Ether() / ARP(), s)),
        (FALLBACK, lambda i, s: flow_frame(i, s, sport=1, dport=2)),  # not installed
    ]
    rng = random.Random(3)
    model = Xoshiro128pp(seed)
    want = {e: empty_counters() for e in (0, 1, 2, 3, 4, FALLBACK)}
    sent = []
    for i in range(400):
        entry, make = rng.choice(kinds)
        f = make(i, rng.choice((64, 128, 1514)))
        drop = model.next() < thr
        w = want[entry]
        w["enq_pkts"] += 1
        w["enq_bytes"] += len(f)
        if drop:
            w["rnd_drop_pkts"] += 1
            w["rnd_drop_bytes"] += len(f)
        else:
            w["fwd_pkts"] += 1
            w["fwd_bytes"] += len(f)
            sent.append(f)
        await tb.send(f)
    out = await tb.recv_all(len(sent))
    assert [f.tdata for f in out] == sent
    for e, w in want.items():
        got = await tb.counters(e)
        assert got == w, f"entry {e}: {got}, want {w}"
    assert await tb.rd(MALFORMED) == 0
    await tb.wr(CTRL, 2)
    assert await tb.counters(0) == empty_counters()


def _pad(pkt, size: int) -> bytes:
    b = bytes(pkt)
    return b + bytes(size - len(b))


@cocotb.test()
async def test_backpressure(dut) -> None:
    """A sink that takes a beat only now and then (60 % of cycles paused): every frame arrives intact and in
    order, none dropped, and the element drains."""
    tb = TB(dut)
    await tb.reset()
    rng = random.Random(4)
    tb.sink.set_pause_generator(iter(lambda: rng.random() < 0.6, None))
    frames = [flow_frame(i, rng.randrange(64, 1515)) for i in range(150)]
    for f in frames:
        await tb.send(f)
    out = await tb.recv_all(len(frames))
    assert [f.tdata for f in out] == frames
    c = await tb.counters(FALLBACK)
    assert c["fwd_pkts"] == c["enq_pkts"] == 150 and c["q_drop_pkts"] == 0, c
    tb.sink.clear_pause_generator()
    await tb.idle()


@cocotb.test()
async def test_min_max_frames(dut) -> None:
    """64-byte and 1514-byte frames (and 1518, MAX_LEN) pass byte for byte, back to back at line rate;
    1519 bytes is malformed."""
    tb = TB(dut)
    await tb.reset()
    frames = [flow_frame(i, 64 if i % 2 else 1514) for i in range(100)] + [flow_frame(100, 1518)]
    for f in frames:
        await tb.send(f)
    await tb.send(flow_frame(101, 1519))
    out = await tb.recv_all(len(frames))
    assert [f.tdata for f in out] == frames
    await tb.idle()
    assert await tb.rd(MALFORMED) == 1
    assert tb.sink.empty()


@cocotb.test()
async def test_malformed_frames(dut) -> None:
    """Truncated, overlong, flagged bad, too short, too long, and gapped frames (a partial tkeep mid-frame, or a
    last beat whose tkeep is not its low bytes though it keeps as many as declared), mixed with good ones and
    back to back: each is counted malformed and dropped, the good ones pass, nothing hangs and the queue
    returns every byte it charged."""
    tb = TB(dut)
    await tb.reset()
    good = [flow_frame(i, 200) for i in range(10)]
    f = flow_frame(99, 300)
    gap = [1] * 300
    gap[20] = 0
    hole = [1] * 300                                      # the last beat's kept bytes are as many as declared,
    hole[297] = 0                                         # but not its low bytes
    bad = [
        dict(data=f[:150], declared=300),                 # truncated
        dict(data=f, declared=200),                       # longer than declared
        dict(data=f, bad=True),                           # the MAC's bad-frame flag
        dict(data=f[:10]),                                # shorter than an Ethernet header
        dict(data=f[:8]),                                 # one beat
        dict(data=bytes(2000)),                           # longer than MAX_LEN
        dict(data=f, tkeep=gap),                          # a hole in the middle
        dict(data=f, declared=299, tkeep=hole),           # a hole in the last beat
        dict(data=f[:8], declared=300),                   # one beat, truncated
    ]
    for g, b in zip(good, bad):
        await tb.send(g)
        await tb.send(**b)
    for _ in range(3):                                    # one-beat frames back to back
        await tb.send(f[:8])
    for g in good[len(bad):]:
        await tb.send(g)
    out = await tb.recv_all(len(good))
    assert [x.tdata for x in out] == good
    await tb.idle()
    assert await tb.rd(MALFORMED) == len(bad) + 3
    assert await tb.rd(Q_BYTES) == 0 and await tb.rd(Q_PKTS) == 0
    c = await tb.counters(FALLBACK)
    assert c["enq_pkts"] == c["fwd_pkts"] == len(good), c

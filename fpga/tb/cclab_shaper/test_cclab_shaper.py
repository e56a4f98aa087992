"""cocotb testbench of cclab_shaper, the token bucket, in either form (PIPELINE=0 or 1): one test per behaviour."""

from __future__ import annotations

import logging
import random

import cocotb
from cclab_model import flow_frame, seq_of
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

PERIOD_PS = 6400
FRAC = 1 << 24


class TB:
    def __init__(self, dut) -> None:
        self.dut = dut
        cocotb.start_soon(Clock(dut.clk, PERIOD_PS, unit="ps").start())
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst)
        for bfm in (self.source, self.sink):
            bfm.log.setLevel(logging.WARNING)

    async def reset(self, rate: float, burst: int, enable: bool = True) -> None:
        self.dut.rate.value = round(rate * FRAC)
        self.dut.burst.value = burst
        self.dut.enable.value = int(enable)
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def run(self, frames: list[bytes]) -> list[AxiStreamFrame]:
        for f in frames:
            await self.source.send(AxiStreamFrame(f, tuser=len(f) << 1))
        out = [await with_timeout(self.sink.recv(), 2000, "us") for _ in frames]
        assert [o.tdata for o in out] == frames, "frames changed or reordered"
        return out


def rate_of(out: list[AxiStreamFrame]) -> float:
    """Bytes per cycle from the first departure to the last (the last frame's bytes excluded)."""
    return sum(len(o.tdata) for o in out[:-1]) * PERIOD_PS / (out[-1].sim_time_start - out[0].sim_time_start)


@cocotb.test()
async def test_rate_long_burst(dut) -> None:
    """A backlog of 300 mixed frames leaves at R = 1.7 bytes/cycle within 1 %, once the full bucket has
    emptied."""
    tb = TB(dut)
    await tb.reset(1.7, 1514)
    rng = random.Random(1)
    out = await tb.run([flow_frame(i, rng.choice((64, 65, 300, 1514))) for i in range(300)])
    got = rate_of(out[2:])
    assert abs(got / 1.7 - 1) < 0.01, f"{got:.4f} bytes/cycle, set 1.7"


@cocotb.test()
async def test_burst_bound(dut) -> None:
    """After idling the bucket holds `burst` bytes: the first frames leave back to back (the pipelined form may
    idle a cycle between them), and at any time the bytes sent are at most burst + R * t + one frame (a frame is
    charged at its start)."""
    tb = TB(dut)
    burst, rate = 6000, 0.5
    await tb.reset(rate, burst)
    await ClockCycles(dut.clk, 100)
    out = await tb.run([flow_frame(i, 1000) for i in range(20)])
    t0 = out[0].sim_time_start
    starts = [(o.sim_time_start - t0) // PERIOD_PS for o in out]
    gaps = [b - a for a, b in zip(starts, starts[1:6])]
    assert all(g in (125, 126) for g in gaps), f"the bucket's frames did not leave back to back: {starts[:6]}"
    for k, t in enumerate(starts):
        assert 1000 * k <= burst + rate * t + 1000, f"frame {k} left at cycle {t}: more than the bucket allows"


@cocotb.test()
async def test_rate_changed_midstream(dut) -> None:
    """The rate changed while a backlog drains applies from that cycle: each side within 1 %."""
    tb = TB(dut)
    await tb.reset(3.0, 1514)
    frames = [flow_frame(i, 500) for i in range(200)]
    for f in frames:
        await tb.source.send(AxiStreamFrame(f, tuser=len(f) << 1))
    first = [await with_timeout(tb.sink.recv(), 2000, "us") for _ in range(100)]
    dut.rate.value = round(1.0 * FRAC)
    second = [await with_timeout(tb.sink.recv(), 2000, "us") for _ in range(100)]
    assert [seq_of(o.tdata) for o in first + second] == list(range(200))
    r1, r2 = rate_of(first[4:]), rate_of(second[1:])
    assert abs(r1 / 3.0 - 1) < 0.01 and abs(r2 / 1.0 - 1) < 0.01, f"{r1:.4f}, {r2:.4f} bytes/cycle; set 3.0, 1.0"


@cocotb.test()
async def test_backpressure(dut) -> None:
    """A sink paused half the time: frames intact and in order, and no more bytes sent than the bucket allows
    (R * t + burst + one frame: what the bucket gained during a stall it may spend after it)."""
    tb = TB(dut)
    await tb.reset(2.0, 1514)
    rng = random.Random(2)
    tb.sink.set_pause_generator(iter(lambda: rng.random() < 0.5, None))
    out = await tb.run([flow_frame(i, rng.randrange(64, 1515)) for i in range(100)])
    t0 = out[0].sim_time_start
    sent = 0
    for o in out:
        t = (o.sim_time_start - t0) / PERIOD_PS
        assert sent <= 2.0 * t + 1514 + 1514, f"{sent} bytes sent in {t} cycles"
        sent += len(o.tdata)


@cocotb.test()
async def test_disabled_line_rate(dut) -> None:
    """Shaper off: minimum (64 B) and maximum (1514 B) frames pass at the line rate, a beat a cycle."""
    tb = TB(dut)
    await tb.reset(0.1, 0, enable=False)
    out = await tb.run([flow_frame(i, 64 if i % 2 else 1514) for i in range(40)])
    beats = sum((len(o.tdata) + 7) // 8 for o in out[:-1])
    span = (out[-1].sim_time_start - out[0].sim_time_start) // PERIOD_PS
    assert span == beats, f"{beats} beats took {span} cycles"

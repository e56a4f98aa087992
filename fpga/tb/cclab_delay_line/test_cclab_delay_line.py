"""cocotb testbench of cclab_delay_line, its memory port served by a Python model with a variable read latency
and back-pressure (as DDR behind an AXI4 master would serve it): one test per behaviour."""

from __future__ import annotations

import logging
import os
import random
from collections import deque

import cocotb
from cclab_model import flow_frame
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamMonitor, AxiStreamSink, AxiStreamSource

PERIOD_PS = 6400
ADDR_W = int(os.environ.get("PARAM_ADDR_W", "6"))


class Memory:
    """The memory behind the port: reads answered in order, each 1..max_lat cycles after it was issued (never
    earlier than the one before); ready inputs low with probability `stall`."""

    def __init__(self, dut, max_lat: int, stall: float, seed: int) -> None:
        self.dut, self.max_lat, self.stall = dut, max_lat, stall
        self.rng = random.Random(seed)
        self.mem: dict[int, int] = {}
        self.pending: deque[tuple[int, int]] = deque()        # (cycle due, data)
        dut.mem_wr_ready.value = 1
        dut.mem_rd_ready.value = 1
        dut.mem_rd_valid.value = 0
        dut.mem_rd_data.value = 0
        cocotb.start_soon(self.run())

    async def run(self) -> None:
        """At each edge: take what the element asked in the cycle that ended, drive the next cycle's answer."""
        dut, cycle = self.dut, 0
        while True:
            await RisingEdge(dut.clk)
            cycle += 1
            if not (dut.mem_wr_en.value.is_resolvable and dut.mem_rd_en.value.is_resolvable):
                continue                                      # before reset
            if int(dut.mem_wr_en.value):
                self.mem[int(dut.mem_wr_addr.value)] = int(dut.mem_wr_data.value)
            if int(dut.mem_rd_en.value):
                last = self.pending[-1][0] if self.pending else cycle
                due = max(last + 1, cycle + self.rng.randint(1, self.max_lat))
                self.pending.append((due, self.mem[int(dut.mem_rd_addr.value)]))
            valid = bool(self.pending) and self.pending[0][0] <= cycle + 1
            dut.mem_rd_valid.value = int(valid)
            if valid:
                dut.mem_rd_data.value = self.pending.popleft()[1]
            dut.mem_wr_ready.value = int(self.rng.random() >= self.stall)
            dut.mem_rd_ready.value = int(self.rng.random() >= self.stall)


class TB:
    def __init__(self, dut, max_lat: int = 3, stall: float = 0.0) -> None:
        self.dut = dut
        cocotb.start_soon(Clock(dut.clk, PERIOD_PS, unit="ps").start())
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst)
        self.mon = AxiStreamMonitor(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
        for bfm in (self.source, self.sink, self.mon):
            bfm.log.setLevel(logging.WARNING)
        self.memory = Memory(dut, max_lat, stall, seed=5)

    async def reset(self, delay: int) -> None:
        self.dut.delay.value = delay
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def send_gapped(self, frames: list[bytes], rng: random.Random, max_gap: int) -> None:
        for f in frames:
            await self.source.send(AxiStreamFrame(f))
            await ClockCycles(self.dut.clk, rng.randrange(0, max_gap))

    async def latencies(self, n: int) -> tuple[list[AxiStreamFrame], list[int], list[int]]:
        """n frames out; each one's first-beat and last-beat latency in cycles."""
        out = [await with_timeout(self.sink.recv(), 1000, "us") for _ in range(n)]
        ins = [await with_timeout(self.mon.recv(), 1000, "us") for _ in range(n)]
        first = [(o.sim_time_start - i.sim_time_start) // PERIOD_PS for i, o in zip(ins, out)]
        last = [(o.sim_time_end - i.sim_time_end) // PERIOD_PS for i, o in zip(ins, out)]
        return out, first, last


@cocotb.test()
async def test_delay_exact(dut) -> None:
    """With a memory of 1 to 3 cycles' latency, every frame (64 to 1514 bytes, random gaps) leaves exactly D
    cycles after it arrived, first beat and last beat, for D = 10, 100 and 1000."""
    tb = TB(dut, max_lat=3)
    rng = random.Random(1)
    await tb.reset(10)
    for d in (10, 100, 1000):
        dut.delay.value = d
        frames = [flow_frame(i, rng.choice((64, 65, 200, 1514))) for i in range(15)]
        # at D = 10 a frame longer than the buffer's 2^ADDR_W beats still streams through
        await tb.send_gapped(frames, rng, 60)
        out, first, last = await tb.latencies(len(frames))
        assert [o.tdata for o in out] == frames
        assert first == [d] * len(frames) and last == [d] * len(frames), f"D = {d}: {first} / {last}"


@cocotb.test()
async def test_delay_changed_midstream(dut) -> None:
    """Lowering D while frames are held releases the held ones at the new D: order kept, nothing lost, every
    latency between the new D and the old one."""
    tb = TB(dut)
    rng = random.Random(2)
    await tb.reset(400)
    frames = [flow_frame(i, 64) for i in range(12)]
    await tb.send_gapped(frames, rng, 30)
    dut.delay.value = 50
    out, first, _ = await tb.latencies(len(frames))
    assert [o.tdata for o in out] == frames
    assert all(50 <= x <= 400 for x in first), first


@cocotb.test()
async def test_full_buffer_backpressure(dut) -> None:
    """A sink that stalls and a memory that back-pressures a third of the time: when the buffer (2^ADDR_W
    beats) is full the input waits; every frame arrives intact and in order."""
    tb = TB(dut, max_lat=4, stall=0.33)
    rng = random.Random(3)
    tb.sink.set_pause_generator(iter(lambda: rng.random() < 0.7, None))
    await tb.reset(20)
    frames = [flow_frame(i, rng.choice((64, 300, 1514))) for i in range(30)]
    for f in frames:
        await tb.source.send(AxiStreamFrame(f))
    out = [await with_timeout(tb.sink.recv(), 2000, "us") for _ in frames]
    assert [o.tdata for o in out] == frames

"""cocotb testbench of cclab_loss: the generator is xoshiro128++ draw for draw, and its drops pass the loss test."""

from __future__ import annotations

import cocotb
from cclab_model import Xoshiro128pp
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from controller.measure.metrics import binomial_interval

LEVEL = 1 - 1e-5


async def setup(dut, seed: int, thr: int) -> None:
    cocotb.start_soon(Clock(dut.clk, 6.4, unit="ns").start())
    dut.draw.value = 0
    dut.seed_load.value = 0
    dut.seed.value = seed
    dut.thr.value = thr
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)


async def drops(dut, n: int) -> list[bool]:
    """n draws, three cycles apart as the queue makes them at the most, read where the queue reads them."""
    out = []
    for _ in range(n):
        await FallingEdge(dut.clk)
        out.append(bool(int(dut.drop.value)))
        dut.draw.value = 1
        await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.draw.value = 0
        await ClockCycles(dut.clk, 2)
    return out


@cocotb.test()
async def test_draws_match_model(dut) -> None:
    """5000 draws at p = 0.3 are exactly those of the xoshiro128++ reference with the same seed."""
    seed, thr = 0x1234ABCD, round(0.3 * 2**32)
    await setup(dut, seed, thr)
    model = Xoshiro128pp(seed)
    got = await drops(dut, 5000)
    want = [model.next() < thr for _ in range(5000)]
    assert got == want, f"first difference at draw {next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)}"


@cocotb.test()
async def test_loss_interval_and_runs(dut) -> None:
    """At p = 0.05 over 20000 draws the drops and the consecutive drops (pairs, p^2) fall inside their binomial
    intervals, and so do the drops that follow a drop (the loss is memoryless)."""
    p, n = 0.05, 20000
    await setup(dut, 7, round(p * 2**32))
    d = await drops(dut, n)
    lo, hi = binomial_interval(n, p, LEVEL)
    assert lo <= sum(d) <= hi, f"{sum(d)} drops of {n}: outside [{lo}, {hi}]"
    pairs = sum(a and b for a, b in zip(d, d[1:]))
    lo, hi = binomial_interval(n - 1, p * p, LEVEL)
    assert lo <= pairs <= hi, f"{pairs} consecutive pairs: outside [{lo}, {hi}]"
    after = [b for a, b in zip(d, d[1:]) if a]
    lo, hi = binomial_interval(len(after), p, LEVEL)
    assert lo <= sum(after) <= hi, f"{sum(after)} drops of {len(after)} right after a drop: outside [{lo}, {hi}]"


@cocotb.test()
async def test_reseed_and_extremes(dut) -> None:
    """Writing the seed restarts the sequence; threshold 0 never drops."""
    await setup(dut, 42, round(0.5 * 2**32))
    first = await drops(dut, 200)
    dut.seed_load.value = 1
    await RisingEdge(dut.clk)
    dut.seed_load.value = 0
    await ClockCycles(dut.clk, 2)
    assert await drops(dut, 200) == first
    dut.thr.value = 0
    await ClockCycles(dut.clk, 2)
    assert not any(await drops(dut, 500))

"""The BMv2 target on a real Mininet dumbbell: p4c, simple_switch_grpc, P4Runtime, iperf3.

s1 is the BMv2 switch (mininet/p4switch.py) running p4/v1model/bottleneck.p4;
UDP with an exact packet count (udp_tool.py) makes every counter checkable:
what the sender sent, what the switch counted, what the receiver got.
Skips with the reason where p4c-bm2-ss or simple_switch_grpc is not on PATH.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.dataplane import FlowCounters, FlowKey, LinkParams, bmv2
from controller.dataplane.bmv2 import Bmv2Bottleneck, queue_rate_pps
from tests.conftest import BMV2_MISSING, BMV2_SKIP_REASON, P4C, bmv2_dumbbell, loss_interval
from tests.conftest import pids as _pids  # noqa: F401 (tests/test_bmv2_run.py imports it from here)

pytestmark = [
    pytest.mark.bmv2,
    pytest.mark.root,
    pytest.mark.skipif(shutil.which(P4C) is None, reason=f"{P4C} not on PATH (install p4c)"),
]
needs_switch = pytest.mark.skipif(bool(BMV2_MISSING), reason=BMV2_SKIP_REASON)

SRC, DST = "10.0.1.1", "10.0.2.1"
SPORT, DPORT = 41001, 5301
PAYLOAD = 1000
#: UDP payload that makes a full-size 1514-byte frame
FULL_PAYLOAD = 1500 - 20 - 8
HEADERS = 14 + 20 + 8
TOOL = Path(__file__).with_name("udp_tool.py")
KEY = FlowKey(SRC, DST, SPORT, DPORT, 17)
#: a rate BMv2 carries here with room to spare (it is a software switch)
FAST_BPS = 200_000_000


def test_p4_compiles_without_warnings(tmp_path: Path) -> None:
    """p4c-bm2-ss compiles bottleneck.p4 with P4Runtime files and says nothing: no warning, no error; the program
    has every table, action and counter the driver writes and reads."""
    prog = bmv2.compile_program(bmv2.PROGRAM, tmp_path)
    assert prog.output == (), f"compiler output: {prog.output}"
    assert bmv2.program_problems(prog.p4info, red=True) == []


@dataclass
class Bed:
    net: Any
    dp: Bmv2Bottleneck

    def flow(self) -> FlowCounters:
        return self.dp.read().flows.get(KEY, FlowCounters())

    def udp(self, packets: int, rate_bps: float, payload: int = PAYLOAD, reverse: bool = False) -> int:
        """Send exactly `packets` UDP datagrams h1 -> r1 (or back); return how many arrived."""
        src, dst, snd, rcv = (DST, SRC, "r1", "h1") if reverse else (SRC, DST, "h1", "r1")
        rx = self.net.get(rcv).popen([sys.executable, str(TOOL), "recv", dst, str(DPORT), "0.5"], text=True)
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        args = [sys.executable, str(TOOL), "send", src, str(SPORT), dst, str(DPORT), str(packets), str(payload)]
        tx = self.net.get(snd).popen([*args, str(rate_bps)], text=True)
        sent = json.loads(tx.communicate(timeout=120)[0])["sent"]
        assert sent == packets
        got: int = json.loads(rx.communicate(timeout=60)[0])["received"]
        return got

    def settle(self) -> None:
        assert self.dp.wait_drained(), "the BMv2 queue did not drain"


def _params(rate_bps: int = FAST_BPS, queue_pkts: int = 1000, per: float = 0.0) -> LinkParams:
    return LinkParams(rate_bps=rate_bps, queue_pkts=queue_pkts, per=per)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    out = tmp_path_factory.mktemp("p4")
    with bmv2_dumbbell("pytest-bmv2", out, (KEY,), _params()) as (net, dp):
        assert isinstance(dp, Bmv2Bottleneck)  # its queue-depth histogram is read below
        yield Bed(net, dp)


@needs_switch
def test_forwarding_both_ways_counting_only_the_bottleneck(bed: Bed) -> None:
    """Routes installed over P4Runtime carry UDP h1 -> r1 and r1 -> h1; only h1 -> r1 crosses the bottleneck."""
    bed.dp.apply(_params())
    before = bed.dp.read()
    got = bed.udp(300, 5e6)
    back = bed.udp(300, 5e6, reverse=True)
    bed.settle()
    after = bed.dp.read()
    assert got == 300, f"h1 -> r1: {got} of 300 arrived"
    assert back == 300, f"r1 -> h1: {back} of 300 arrived"
    fwd = after.link.fwd_pkts - before.link.fwd_pkts
    assert 300 <= fwd <= 300 + 10, f"bottleneck forwarded {fwd} packets for 300 sent one way (+ stray)"
    assert FlowKey(DST, SRC, SPORT, DPORT, 17) not in after.flows


@needs_switch
def test_counters_equal_packets_sent(bed: Bed) -> None:
    """With no loss every datagram is counted once: offered = forwarded = sent = received, wire bytes exact."""
    n = 5000
    bed.dp.apply(_params())
    b = bed.flow()
    received = bed.udp(n, 20e6)
    bed.settle()
    a = bed.flow()
    enq, fwd = a.enq_pkts - b.enq_pkts, a.fwd_pkts - b.fwd_pkts
    rnd, q = a.rnd_drop_pkts - b.rnd_drop_pkts, a.q_drop_pkts - b.q_drop_pkts
    print(f"sent {n}: offered {enq}, forwarded {fwd}, random {rnd}, queue {q}, received {received}")
    assert enq == n, f"offered to the queue {enq}, sent {n}"
    assert (fwd, rnd, q) == (n, 0, 0), f"forwarded {fwd}, random drops {rnd}, queue drops {q} of {n} at p = 0"
    assert received == n, f"receiver got {received} of {n}"
    wire = a.fwd_bytes - b.fwd_bytes
    assert wire == n * (PAYLOAD + HEADERS), f"wire bytes {wire} for {n} packets of {PAYLOAD} B payload"


@needs_switch
def test_loss_ratio_in_binomial_interval(bed: Bed) -> None:
    """p = 0.02: random drops inside the binomial interval (LOSS_LEVEL), and the receiver lost exactly those."""
    p, n = 0.02, 10_000
    bed.dp.apply(_params(per=p))
    b = bed.flow()
    received = bed.udp(n, 20e6)
    bed.settle()
    a = bed.flow()
    fwd, rnd = a.fwd_pkts - b.fwd_pkts, a.rnd_drop_pkts - b.rnd_drop_pkts
    q = a.q_drop_pkts - b.q_drop_pkts
    lo, hi = loss_interval(n, p)
    print(f"p = {p}: {rnd} random drops of {n}, interval [{lo}, {hi}]; received {received}")
    assert q == 0, f"{q} queue drops at 20 of 200 Mbit/s"
    assert fwd + rnd == n, f"forwarded {fwd} + random drops {rnd} != {n}"
    assert lo <= rnd <= hi, f"random drops {rnd} outside the interval [{lo}, {hi}] of Bin({n}, {p})"
    assert received == fwd, f"receiver got {received}, switch forwarded {fwd}"


@needs_switch
def test_runtime_loss_change(bed: Bed) -> None:
    """The loss threshold changes while the switch runs: no drops at p = 0, about half at p = 0.5."""
    n = 2000
    bed.dp.apply(_params(per=0.0))
    b0 = bed.flow()
    bed.udp(n, 10e6)
    bed.settle()
    b1 = bed.flow()
    assert b1.rnd_drop_pkts == b0.rnd_drop_pkts, f"{b1.rnd_drop_pkts - b0.rnd_drop_pkts} random drops at p = 0"
    bed.dp.apply(_params(per=0.5))
    bed.udp(n, 10e6)
    bed.settle()
    b2 = bed.flow()
    rnd = b2.rnd_drop_pkts - b1.rnd_drop_pkts
    lo, hi = loss_interval(n, 0.5)
    print(f"p = 0.5: {rnd} drops of {n}, interval [{lo}, {hi}]")
    assert lo <= rnd <= hi, f"{rnd} drops of {n} at p = 0.5, interval [{lo}, {hi}]"


@needs_switch
def test_queue_limit_holds_and_rate_is_shaped(bed: Bed) -> None:
    """10 Mbit/s, 20-packet queue, offered 30 Mbit/s of full frames for 2.4 s: queue drops equal the receiver's loss,
    the queue never exceeds 20 packets, and the link runs at 10 Mbit/s (-3 %, +2 %) while backlogged."""
    import threading

    rate, qlim, n = 10_000_000, 20, 6000
    bed.dp.apply(_params(rate_bps=rate, queue_pkts=qlim))
    polls: list[tuple[float, int, list[int]]] = []  # (t, link bytes forwarded, depth histogram)
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            snap = bed.dp.read()
            polls.append((snap.t, snap.link.fwd_bytes, list(bed.dp.depth_hist)))
            time.sleep(0.01)

    b = bed.flow()
    hist0 = list(bed.dp.depth_hist)
    t = threading.Thread(target=poll)
    t.start()
    try:
        received = bed.udp(n, 30e6, payload=FULL_PAYLOAD)
    finally:
        stop.set()
        t.join()
    bed.settle()
    a = bed.flow()
    try:
        enq, fwd = a.enq_pkts - b.enq_pkts, a.fwd_pkts - b.fwd_pkts
        q = a.q_drop_pkts - b.q_drop_pkts
        depth = bed.dp.deepest(hist0, bed.dp.depth_hist)
        print(f"offered {enq}, forwarded {fwd}, queue drops {q}, received {received}, deepest queue {depth}")
        assert enq == n, f"offered {enq} of {n} sent"
        assert q > 0, "no queue drops although offered 3x the rate"
        assert received == fwd, f"receiver got {received}, switch forwarded {fwd}"
        assert q == n - received, f"queue drops {q}, but the receiver missed {n - received}"
        assert 0 < depth <= qlim, f"deepest queue {depth} packets, limit {qlim}"
        # The link is busy through an interval in which packets left a queue that never
        # emptied (every dequeue left >= 1 behind): the rate is measured over those.
        busy_s = busy_bytes = 0.0
        for (t0, b0, h0), (t1, b1, h1) in zip(polls, polls[1:]):
            if h1[0] == h0[0] and sum(h1[1:]) > sum(h0[1:]):
                busy_s, busy_bytes = busy_s + (t1 - t0), busy_bytes + (b1 - b0)
        assert busy_s > 0.3, f"queue backlogged for only {busy_s:.2f} s"
        measured = busy_bytes * 8 / busy_s
        want = queue_rate_pps(rate, 1500) * 1514 * 8  # the rate BMv2 was given, in whole packets/s
        print(f"link rate while backlogged: {measured / 1e6:.3f} Mbit/s (set {want / 1e6:.3f})")
        # the kernel target's tolerance for the same test (tests/test_dataplane_kernel.py)
        assert 0.97 * want <= measured <= 1.02 * want, f"{measured / 1e6:.3f} Mbit/s on a {want / 1e6:.3f} link"
    finally:
        bed.dp.apply(_params())

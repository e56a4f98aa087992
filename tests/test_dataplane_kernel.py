"""The kernel data plane on a real Mininet dumbbell: loss, counters, queue limit, run-time changes.

UDP from iperf3 with a fixed packet count makes every counter checkable:
what the sender sent, what the link counted, what the receiver lost.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.dataplane import Bottleneck, FlowCounters, FlowKey, LinkParams
from controller.dataplane.kernel import KernelBottleneck
from controller.dataplane.red import red_config
from controller.experiment import runner
from controller.network import Red
from tests import hostload
from tests.conftest import kernel_dumbbell, loss_interval
from tests.timing import on_time
from tests.udp_tool import STALL_S

pytestmark = pytest.mark.root

SRC, DST = "10.0.1.1", "10.0.2.1"
SPORT, DPORT = 41001, 5301
PAYLOAD = 1000
TOOL = Path(__file__).with_name("udp_tool.py")


class Bed:
    def __init__(self, net: Any, dp: Bottleneck) -> None:
        self.net, self.dp = net, dp
        self.sender_stalls = 0
        """Every stall of the UDP sender so far (tests/udp_tool.py): the host, not the data plane, was slow."""
        self.softirq_waits = 0
        """Polls of an overload (`_overload`) that found a ksoftirqd thread had waited STALL_S or more for a CPU
        since the last: the kernel's deferred packet processing and qdisc timers run there, so the host held the
        offer back from the queue, or its shaper's wake-up, although the sender was on time."""

    def late(self) -> int:
        """The host's late moments so far: the sender's stalls and the softirq threads' waits."""
        return self.sender_stalls + self.softirq_waits

    def flow(self) -> FlowCounters:
        return self.dp.read().flows.get(FlowKey(SRC, DST, SPORT, DPORT, 17), FlowCounters())

    def udp(self, packets: int, rate_bps: float) -> int:
        """Send exactly `packets` UDP datagrams h1 -> r1; return how many r1 received."""
        rx = self.net.get("r1").popen([sys.executable, str(TOOL), "recv", DST, str(DPORT), "0.5"], text=True)
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        tx = self.net.get("h1").popen(
            [
                sys.executable,
                str(TOOL),
                "send",
                SRC,
                str(SPORT),
                DST,
                str(DPORT),
                str(packets),
                str(PAYLOAD),
                str(rate_bps),
            ],
            text=True,
        )
        report = json.loads(tx.communicate(timeout=120)[0])
        self.sender_stalls += report["stalls"]
        assert report["sent"] == packets
        got: int = json.loads(rx.communicate(timeout=60)[0])["received"]
        return got


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    with kernel_dumbbell("pytest-dataplane", LinkParams(rate_bps=1_000_000_000, queue_pkts=1000)) as (net, dp):
        yield Bed(net, dp)


def test_counters_equal_packets_sent_and_loss_in_binomial_interval(bed: Bed) -> None:
    """p = 1e-2: every datagram is counted once, drops are random drops only, within the interval (LOSS_LEVEL)."""
    p, n = 0.01, 20_000
    bed.dp.apply(LinkParams(rate_bps=1_000_000_000, queue_pkts=1000, per=p))
    before = bed.flow()
    received = bed.udp(n, 100e6)
    after = bed.flow()
    enq = after.enq_pkts - before.enq_pkts
    fwd = after.fwd_pkts - before.fwd_pkts
    rnd = after.rnd_drop_pkts - before.rnd_drop_pkts
    q = after.q_drop_pkts - before.q_drop_pkts
    assert enq == n, f"offered to the queue {enq}, sent {n}"
    assert q == 0, f"{q} queue drops at 100 of 1000 Mbit/s"
    assert fwd + rnd == n, f"forwarded {fwd} + random drops {rnd} != {n}"
    lo, hi = loss_interval(n, p)
    assert lo <= rnd <= hi, f"random drops {rnd} outside the interval [{lo}, {hi}] of Bin({n}, {p})"
    assert received == fwd, f"receiver got {received}, data plane forwarded {fwd}"
    wire = after.fwd_bytes - before.fwd_bytes
    assert wire == fwd * (PAYLOAD + 14 + 20 + 8), f"wire bytes {wire} for {fwd} packets of {PAYLOAD} B payload"


def test_runtime_loss_change(bed: Bed) -> None:
    """Loss set while running: none at p = 0, about half at p = 0.5."""
    n = 4000
    bed.dp.apply(LinkParams(rate_bps=1_000_000_000, queue_pkts=1000, per=0.0))
    b0 = bed.flow()
    bed.udp(n, 50e6)
    b1 = bed.flow()
    assert b1.rnd_drop_pkts == b0.rnd_drop_pkts, "random drops at p = 0"
    bed.dp.apply(LinkParams(rate_bps=1_000_000_000, queue_pkts=1000, per=0.5))
    bed.udp(n, 50e6)
    b2 = bed.flow()
    rnd = b2.rnd_drop_pkts - b1.rnd_drop_pkts
    lo, hi = loss_interval(n, 0.5)
    assert lo <= rnd <= hi, f"{rnd} drops of {n} at p = 0.5, interval [{lo}, {hi}]"


@dataclass
class Overload:
    """What a shaped link did while offered more than its rate."""

    rate_bps: float
    """Forwarded rate from the first poll that found the queue standing to the last that found it backlogged."""
    peak_backlog: int
    queue_drops: int
    """The flow's."""
    link_drops: int
    """The link's: the flow's and those of packets of no flow (an IGMP report of a port that has just come up)."""
    forwarded: int
    received: int
    empties_while_backlogged: int
    """Departures that left the queue empty between the first poll that found the queue standing and the last that
    found it backlogged."""
    qdisc_drops: int
    """What the queue's own qdisc (tc -s) says it dropped meanwhile."""


def _overload(bed: Bed, packets: int, offered_bps: float, standing: int = 1) -> Overload:
    """Offer UDP above the link rate; measure the rate while backlogged and the peak backlog.  The queue stands
    from the first poll that finds `standing` packets in it: before, the shaper's bucket lets the offer's first
    frames through unqueued, each departure leaving the queue empty."""
    peak = 0
    threads = _softirq_threads()
    waited = _softirq_waits(threads)
    busy: list[tuple[float, int, int, int, int]] = []  # (t, backlog, link bytes, empties before, after) if backlogged
    stop = threading.Event()

    def poll() -> None:
        nonlocal peak, waited
        while not stop.is_set():
            now = _softirq_waits(threads)
            bed.softirq_waits += any(b - a >= STALL_S * 1e9 for a, b in zip(waited, now))
            waited = now
            before = _empties(bed.dp)
            snap = bed.dp.read()  # reads the empties after the link's counters
            peak = max(peak, snap.backlog_pkts)
            if snap.backlog_pkts > 0:
                busy.append((snap.t, snap.backlog_pkts, snap.link.fwd_bytes, before, snap.empties or 0))
            time.sleep(0.005)

    t = threading.Thread(target=poll)
    t.start()
    before, link_before = bed.flow(), bed.dp.read().link
    qdisc_before = _qdisc_drops()
    try:
        received = bed.udp(packets, offered_bps)
    finally:
        stop.set()
        t.join()
    after, link_after = bed.flow(), bed.dp.read().link
    # the empties read after the first standing poll's backlog and before the last busy one's: the drain at the end
    # of the offer empties the queue once, and a poll that found its last packet could otherwise count that empty
    stood = [b for b in busy if b[1] >= standing]
    assert stood, f"the queue never held {standing} packets (peak {peak})"
    (t_a, _, b_a, _, e_a), (t_b, _, b_b, e_b, _) = stood[0], busy[-1]
    assert t_b - t_a > 0.3, f"queue backlogged for only {t_b - t_a:.2f} s"
    return Overload(
        rate_bps=(b_b - b_a) * 8 / (t_b - t_a),
        peak_backlog=peak,
        queue_drops=after.q_drop_pkts - before.q_drop_pkts,
        link_drops=link_after.q_drop_pkts - link_before.q_drop_pkts,
        forwarded=after.fwd_pkts - before.fwd_pkts,
        received=received,
        empties_while_backlogged=e_b - e_a,
        qdisc_drops=_qdisc_drops() - qdisc_before,
    )


def _softirq_threads() -> list[Path]:
    """The schedstat files of the kernel's ksoftirqd threads (one a CPU)."""
    procs = hostload.snapshot().procs
    return [Path(f"/proc/{pid}/schedstat") for pid, (comm, _) in procs.items() if comm.startswith("ksoftirqd/")]


def _softirq_waits(threads: list[Path]) -> list[int]:
    """How long each of `threads` has waited for a CPU so far (ns): the second field of its schedstat (none on a
    kernel without it)."""
    try:
        return [int(t.read_text().split()[1]) for t in threads]
    except (OSError, IndexError, ValueError):
        return []


def _empties(dp: Bottleneck) -> int:
    """How many departures have left the queue empty so far."""
    assert isinstance(dp, KernelBottleneck)
    raw = dp._maps["bn_empties"].lookup(b"\0" * 4)
    return struct.unpack("=Q", raw)[0] if raw is not None else 0


def _qdisc_drops() -> int:
    """Drops A's qdiscs counted (the root's: HTB or TBF counts its leaf's), from `tc -s`."""
    out = subprocess.run(["tc", "-s", "-j", "qdisc", "show", "dev", "s1-eth1", "root"], capture_output=True)
    return int(json.loads(out.stdout)[0]["drops"])


@pytest.fixture
def shaped(bed: Bed) -> Iterator[Callable[[LinkParams], None]]:
    """Re-program the bottleneck for one test, and restore the module's 1 Gbit/s link after it."""

    def program(params: LinkParams) -> None:
        bed.dp.teardown()
        bed.dp.setup(params, seed=7)

    yield program
    program(LinkParams(rate_bps=1_000_000_000, queue_pkts=1000))


@pytest.mark.parametrize("shaper", ["htb", "tbf"])
def test_queue_limit_holds_and_rate_is_shaped(bed: Bed, shaped: Callable[[LinkParams], None], shaper: str) -> None:
    """10 Mbit/s with a 20-packet queue, offered 40 Mbit/s: the rate holds, never more than 20 queued, and once
    the queue stands (half full: the bucket of two frames lets the first through unqueued) it never runs empty
    until the offer ends. The queue drains in 17 ms: a sender the host stalled for longer lets it run empty, and
    so does a host that kept the kernel's softirq thread (which forwards what the sender sent once the kernel
    defers it, and wakes the shaper) off the CPU; the try is made again where either says it waited (on_time),
    and a queue that ran empty with both on time fails."""
    rate, qlim = 10_000_000, 20
    shaped(LinkParams(rate_bps=rate, queue_pkts=qlim, shaper=shaper))

    def attempt() -> None:
        sent = 3000
        o = _overload(bed, sent, 40e6, standing=qlim // 2)
        assert o.queue_drops > 0, "no queue drops although offered 4x the rate"
        assert o.link_drops == o.qdisc_drops, f"counted {o.link_drops} queue drops, the qdisc {o.qdisc_drops}"
        assert o.queue_drops + o.forwarded == sent, f"{o.queue_drops} of the flow dropped, {o.forwarded} forwarded"
        assert o.received == o.forwarded, f"receiver got {o.received}, data plane forwarded {o.forwarded}"
        assert o.peak_backlog <= qlim + 2, f"backlog reached {o.peak_backlog} packets, limit {qlim} (+2 in flight)"
        assert 0.97 * rate <= o.rate_bps <= 1.02 * rate, f"{o.rate_bps / 1e6:.3f} Mbit/s on a 10 Mbit/s {shaper} link"
        assert o.empties_while_backlogged == 0, f"queue empty {o.empties_while_backlogged} times, overloaded"

    on_time(attempt, bed.late, "the UDP sender or the kernel's softirq threads")


def _counters(dp: KernelBottleneck, flow: FlowKey | None) -> tuple[Any, bytes]:
    """The map and key of a flow's counters (None: the link's)."""
    if flow is None:
        return dp._maps["bn_link_ctr"], b"\0" * 4
    return dp._maps["bn_flows"], socket.inet_aton(flow.src) + socket.inet_aton(flow.dst) + struct.pack(
        "=HHB3x", *flow[2:]
    )


def _take_drops(dp: KernelBottleneck, n: int, flow: FlowKey | None) -> None:
    """Take n queue drops of 1042-byte frames off a flow's counters (None: the link's), as a drop the kfree_skb
    program missed leaves them."""
    m, k = _counters(dp, flow)
    raw = m.lookup(k)
    assert raw is not None, f"no counters under {k.hex()}"
    v = list(struct.unpack("=8Q", raw))
    v[4], v[5] = v[4] - n * (PAYLOAD + 42), v[5] - n  # q_drop bytes and packets
    m.update(k, struct.pack("=8Q", *v))


def test_a_missed_drop_is_healed_at_the_next_and_given_back_to_its_flow_once_drained(
    bed: Bed, shaped: Callable[[LinkParams], None]
) -> None:
    """The drop counter (on kfree_skb) can miss a drop that a softirq makes while it runs.  The link's count is
    raised to the qdisc's own at the next drop seen, so the queue's length holds; once the traffic has stopped,
    wait_drained gives each flow the drops it is short of.  The misses are made here by hand."""
    dp = bed.dp
    assert isinstance(dp, KernelBottleneck)
    shaped(LinkParams(rate_bps=10_000_000, queue_pkts=20))
    key = FlowKey(SRC, DST, SPORT, DPORT, 17)
    assert _overload(bed, 2000, 40e6).queue_drops > 10
    assert dp.wait_drained() and dp.missed_qdrops is None, f"gave back {dp.missed_qdrops} drops: none was missed"
    exact = dp.read()
    _take_drops(dp, 3, None)  # the link: healed at the next drop
    o = _overload(bed, 2000, 40e6)
    assert dp.read().link.q_drop_pkts == exact.link.q_drop_pkts + o.qdisc_drops, "the link's drops were not healed"
    exact = dp.read()
    _take_drops(dp, 3, key)  # the flow's, and the link's after the last drop: given back once all is still
    _take_drops(dp, 3, None)
    assert dp.read().backlog_pkts == 3
    assert dp.wait_drained() and dp.missed_qdrops == 3, f"gave back {dp.missed_qdrops}"
    after, link = dp.read(), dp.read().link
    assert after.flows[key] == exact.flows[key], (after.flows[key], exact.flows[key])
    # the link's bytes of the first miss too: the heal restores packets only (the qdisc counts no dropped bytes)
    assert link.enq_pkts == link.fwd_pkts + link.rnd_drop_pkts + link.q_drop_pkts, link
    assert link.enq_bytes == link.fwd_bytes + link.rnd_drop_bytes + link.q_drop_bytes, link


def test_departures_into_an_idle_link_are_counted_as_empties(bed: Bed) -> None:
    """Datagrams spaced 1 ms apart on the 1 Gbit/s link each leave the queue empty behind them (the fidelity
    check's "queue ran empty"): the count rises by about one per datagram, never by more."""
    before = bed.dp.read().empties
    assert before is not None, "the kernel target counts the times its queue ran empty"
    packets = 500
    received = bed.udp(packets, packets * (PAYLOAD + 42) * 8 / 0.5)  # 500 datagrams over 0.5 s
    empties = (bed.dp.read().empties or 0) - before
    assert received == packets
    assert 0.95 * packets <= empties <= packets, f"{empties} empties for {packets} spaced datagrams"


def test_a_packet_counted_in_before_the_run_and_never_out_is_settled_before_the_flows(bed: Bed) -> None:
    """A packet counted into the queue at the egress hook that the ingress hook never counts out (the instant
    between attaching the two) leaves the queue a packet long by its counters: no departure then finds it empty,
    and the fidelity check's standing backlog is a packet short.  The runner settles each link before the flows
    (runner.settle_links): the count is given back, and not as a drop of the run.  The packet is made by hand."""
    dp = bed.dp
    assert isinstance(dp, KernelBottleneck)
    assert dp.wait_drained()
    missed = dp.missed_qdrops
    spaced = 100 * (PAYLOAD + 42) * 8 / 0.1  # 100 datagrams over 0.1 s: each leaves the queue empty behind it
    for m, key in (_counters(dp, None), _counters(dp, FlowKey("10.0.1.9", DST, 5353, 5353, 17))):
        v = list(struct.unpack("=8Q", m.lookup(key) or bytes(64)))
        v[6], v[7] = v[6] + 342, v[7] + 1  # offered: enq bytes and packets
        m.update(key, struct.pack("=8Q", *v))
    assert dp.read().backlog_pkts == 1
    before = dp.read().empties or 0
    assert bed.udp(100, spaced) == 100
    assert (dp.read().empties or 0) == before, "a queue a packet long by its counters was seen empty"
    notes: list[str] = []
    assert runner.settle_links({"l1": dp}, notes) == {"l1": 1} and notes == []
    assert dp.read().backlog_pkts == 0 and dp.missed_qdrops == missed, dp.missed_qdrops
    assert runner.settle_links({"l1": dp}, notes) == {}, "settled twice"
    before = dp.read().empties or 0
    assert bed.udp(100, spaced) == 100
    assert (dp.read().empties or 0) - before >= 95, "the settled queue is not seen empty"


def test_runtime_rate_change(bed: Bed, shaped: Callable[[LinkParams], None]) -> None:
    """A schedule step changes the rate while running: 10 then 20 Mbit/s, each within 3 %."""
    shaped(LinkParams(rate_bps=10_000_000, queue_pkts=50))
    first = _overload(bed, 2000, 40e6)
    bed.dp.apply(LinkParams(rate_bps=20_000_000, queue_pkts=50))
    second = _overload(bed, 4000, 60e6)
    assert 0.97e7 <= first.rate_bps <= 1.02e7, f"{first.rate_bps / 1e6:.3f} Mbit/s before the change"
    assert 1.94e7 <= second.rate_bps <= 2.04e7, f"{second.rate_bps / 1e6:.3f} Mbit/s after the change to 20"


def test_red_average_decays_over_the_idle_time(bed: Bed, shaped: Callable[[LinkParams], None]) -> None:
    """RED's idle rule: the first arrival after the queue was idle for m full-size frame times finds the average
    at (1 - w_q)^m of what it was, 2^-(idle / half_ns), within 3 % (the program's quadratic for a fraction of a
    halving is within 1.1 %; a stray frame in the idle time splits it in two decays). 10 Mbit/s, w_q = 2^-9 (a
    halving per 0.43 s of idle), a 100-packet queue filled by UDP at 1.2 times the rate, then 0.6 s of idle,
    then one datagram."""
    rate, red = 10_000_000, Red(min_pkts=20, max_pkts=80, max_p=0.2, wlog=9)
    params = LinkParams(rate_bps=rate, queue_pkts=100, red=red)
    shaped(params)
    dp = bed.dp
    assert isinstance(dp, KernelBottleneck)
    bed.udp(2000, 12e6)
    assert dp.wait_drained(), "the queue did not drain"
    time.sleep(0.6)  # the idle time under test
    state = dp.red_state()
    assert state is not None
    avg0, idle_from = state
    bed.udp(1, 1e6)
    state = dp.red_state()
    assert state is not None
    avg1, delivered = state
    half_ns = red_config(red, rate, params.mtu + 14).half_ns
    frame_ns = (PAYLOAD + 42) * 8 * 1e9 / rate  # the datagram's own time on the link, after its arrival
    want = avg0 * 2 ** -((delivered - idle_from - frame_ns) / half_ns)
    print(f"average {avg0:.2f} packets, after {(delivered - idle_from) / 1e9:.3f} s idle {avg1:.3f}; want {want:.3f}")
    assert avg0 > 5, f"the average reached only {avg0:.2f} packets: the queue did not fill"
    assert 0.97 * want <= avg1 <= 1.03 * want, f"average {avg1:.3f} after the idle time, (1 - w_q)^m gives {want:.3f}"

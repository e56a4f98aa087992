"""cclab-delay, the delay line for kernels without netem, on a real Mininet dumbbell.

The dumbbell's kernel bottleneck, and after it the link's delay element forced
onto cclab-delay (also where the kernel has netem): base RTT against the spec, the RTT samples'
spread, order and no loss under jitter, a delay change while traffic flows,
and nothing left behind by teardown or `cclab clean`.  A check of times is
tried again (tests/timing.py, `on_time`) only where it failed while the
element itself released packets over 1 ms late: the host, not the element,
was slow then.

Run as a script, this file is the UDP probe the tests start in the hosts:

    test_delay.py send SRC DST PORT COUNT SIZE RATE_BPS  -> {"sent": N}
    test_delay.py recv ADDR PORT IDLE_S                  -> {"received": N, "reordered": K, "owd_ms": [...]}

Each datagram carries its sequence number and send time, and the receiver takes
its arrival time from the kernel (SO_TIMESTAMPNS), both on CLOCK_REALTIME (one
clock: the hosts share the machine): the one-way delays are the delay line's,
not also the time the receiving probe waited for a core before reading them.
"""

from __future__ import annotations

import json
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller import system
from controller.dataplane import Bottleneck, DataPlaneError, LinkParams, delayline
from controller.dataplane.delay import LinkDelay
from controller.dataplane.delay import pick_element as pick_delay_element
from controller.dataplane.targets import Placement, make_bottleneck
from hosts.rxtime import recv_stamped, stamp_on_receive
from hosts.traffic import IperfFlow

if __name__ != "__main__":  # run as the UDP probe, this file needs none of the test helpers (nor can reach them)
    from tests.timing import on_time

SRC, DST, PORT = "10.0.1.1", "10.0.2.1", 5401
PROBE = struct.Struct("=QQ")
DELAY_MS = 40.0
#: base RTT within this of 2 x the one-way delay (the issue's bound)
RTT_TOLERANCE_MS = 0.5


# --- without root ----------------------------------------------------------------


def test_unknown_delay_element_is_named_with_the_choices() -> None:
    with pytest.raises(DataPlaneError, match=r"'wormhole' is not one of auto, netem, cclab-delay"):
        pick_delay_element("wormhole")


@pytest.mark.skipif(not delayline.BINARY.exists(), reason="build/cclab-delay is not built (run `make build`)")
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--delay-ns", "-5", "a:b"], "--delay-ns -5: want a non-negative integer"),
        (["--jitter-ns", "1ms", "a:b"], "--jitter-ns 1ms: want a non-negative integer"),
        (["nocolon"], "nocolon: want CAPTURE:DEV (two device names)"),
        (["a:"], "a:: want CAPTURE:DEV (two device names)"),
    ],
)
def test_element_refuses_bad_arguments_in_one_line(args: list[str], says: str) -> None:
    proc = subprocess.run([str(delayline.BINARY), *args], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"cclab-delay: {says}"], proc.stderr


# --- on a dumbbell (root) --------------------------------------------------------


def _leftovers() -> list[str]:
    found = [f"device {d}" for d in os.listdir("/sys/class/net") if delayline.CAPTURE_DEV.match(d)]
    for d in Path("/proc").iterdir():
        try:
            argv0 = (d / "cmdline").read_bytes().split(b"\0")[0] if d.name.isdigit() else b""
        except OSError:
            continue
        if os.path.basename(argv0.decode(errors="replace")) == delayline.ELEMENT:
            found.append(f"process {d.name}")
    return found


class Bed:
    def __init__(self, net: Any, dp: Bottleneck, line: LinkDelay) -> None:
        self.net, self.dp, self.line = net, dp, line

    def late(self) -> int:
        """The delay line's releases so far that left over 1 ms after they were due (the host was busy)."""
        stats = self.line.stats_now()
        assert stats is not None, "cclab-delay is not running"
        return int(stats["late_us"]["over_1ms"])

    def ping_rtts_ms(self, count: int, interval_s: float) -> list[float]:
        proc = self.net.get("h1").popen(["ping", "-n", "-c", str(count), "-i", str(interval_s), DST], text=True)
        out, _ = proc.communicate(timeout=60)
        return [float(m) for m in re.findall(r"time=([\d.]+) ms", out)]

    def udp(self, count: int, size: int, rate_bps: float) -> dict[str, Any]:
        me = str(Path(__file__))
        rx = self.net.get("r1").popen([sys.executable, me, "recv", DST, str(PORT), "1.0"], text=True)
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        tx = self.net.get("h1").popen(
            [sys.executable, me, "send", SRC, DST, str(PORT), str(count), str(size), str(rate_bps)], text=True
        )
        assert json.loads(tx.communicate(timeout=120)[0]) == {"sent": count}
        got: dict[str, Any] = json.loads(rx.communicate(timeout=60)[0])
        return got


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    from mininet.log import setLogLevel
    from mininet.net import Mininet

    from controller.network.mininet import load_topology_module

    assert not _leftovers(), f"host not clean before the test: {_leftovers()}"
    setLogLevel("error")
    mod = load_topology_module()
    net = Mininet(mod.Dumbbell(pairs=1), switch=mod.CclabBridge, host=mod.CclabHost, controller=None)
    dp = make_bottleneck("kernel", Placement("pytest-delay", "s1-eth1", "s2-eth1"))
    # the link's delay element on the devices after it: s2 towards r1 (forward), s2 towards the link (reverse)
    line = LinkDelay(("s2-eth2", "s2-eth1"), system.PIN_ROOT / "pytest-delay-d", delayline.ELEMENT, seed=11)
    bed = Bed(net, dp, line)
    try:
        net.start()
        dp.setup(LinkParams(rate_bps=1_000_000_000, queue_pkts=1000), seed=11)
        line.setup(DELAY_MS, 0.0)
        bed.ping_rtts_ms(2, 0.1)  # ARP resolved before anything is measured
        yield bed
    finally:
        line.teardown()
        dp.teardown()
        net.stop()
    assert not _leftovers(), f"left behind by teardown: {_leftovers()}"


@pytest.mark.root
def test_base_rtt_within_half_a_millisecond_of_the_spec(bed: Bed) -> None:
    """The base RTT within RTT_TOLERANCE_MS of the spec; the median too, above what the same pings take through
    the element at no delay (the hosts' own stacks and the element's path: 0.1 ms on a quiet host, and CI saw a
    median of 80.6 ms for 80 on this VM-hosted machine kind, with the minimum at 80.3)."""
    assert bed.line.element == delayline.ELEMENT

    def attempt() -> None:
        bed.line.apply(0.0, 0.0)
        try:
            host = bed.ping_rtts_ms(50, 0.02)
        finally:
            bed.line.apply(DELAY_MS, 0.0)
        rtts = bed.ping_rtts_ms(100, 0.02)
        assert len(rtts) == 100 and len(host) == 50, f"{100 - len(rtts)} + {50 - len(host)} pings lost"
        _assert_rtt(2 * DELAY_MS, rtts, host)

    on_time(attempt, bed.late, "cclab-delay")


def _assert_rtt(want: float, rtts: list[float], host: list[float]) -> None:
    """The base RTT (the minimum) within RTT_TOLERANCE_MS above `want`, and the median at most that above `want`
    plus the median of what the host adds at no delay (`host`, pinged in the same run)."""
    base, p50, host_p50 = min(rtts), statistics.median(rtts), statistics.median(host)
    spread = (
        f"min {base:.3f}, p50 {p50:.3f}, max {max(rtts):.3f}, stdev {statistics.stdev(rtts):.3f} ms; "
        f"at no delay p50 {host_p50:.3f} ms"
    )
    assert want <= base <= want + RTT_TOLERANCE_MS, f"base RTT against {want} ms: {spread}"
    assert p50 <= want + host_p50 + RTT_TOLERANCE_MS, f"median RTT against {want} ms: {spread}"


@pytest.mark.root
def test_jitter_keeps_order_and_drops_nothing(bed: Bed) -> None:
    """100 Mbit/s of datagrams 0.08 ms apart, jitter 5 ms: every one arrives, in order, within the bounds.

    Kept in order, a datagram leaves when the slowest before it does, so an ideal line's median is about
    14 ms and none exceeds 15. Whatever the host adds to every datagram at this rate (reading them,
    the receiving stack; about 0.1 ms on a quiet host, 1 ms and more beside a busy core) is measured
    by the same stream without jitter, sent just before, and allowed on top of the bound."""
    delay_ms, jitter_ms, count = 10.0, 5.0, 20_000

    def attempt() -> None:
        bed.line.apply(delay_ms, 0.0)
        try:
            steady = bed.udp(count, 1000, 100e6)
            bed.line.apply(delay_ms, jitter_ms)
            got = bed.udp(count, 1000, 100e6)
        finally:
            bed.line.apply(DELAY_MS, 0.0)
        assert steady["received"] == count and steady["reordered"] == 0, steady
        assert got["received"] == count, f"{count - got['received']} of {count} datagrams lost"
        assert got["reordered"] == 0, f"{got['reordered']} datagrams arrived out of order"
        host_ms = max(0.0, steady["owd_ms"]["p50"] - delay_ms)
        owd = got["owd_ms"]
        assert delay_ms - jitter_ms <= owd["min"], owd
        assert owd["p50"] <= delay_ms + jitter_ms + RTT_TOLERANCE_MS + host_ms, (
            f"median {owd['p50']} ms above {delay_ms} + {jitter_ms} + {RTT_TOLERANCE_MS} ms and the host's "
            f"{host_ms:.3f} ms without jitter: {owd}"
        )

    on_time(attempt, bed.late, "cclab-delay")
    _assert_no_drops(bed)


@pytest.mark.root
def test_jitter_spreads_sparse_packets_uniformly(bed: Bed) -> None:
    """Datagrams 5 ms apart, jitter 2 ms (no packet waits for another): delays spread over [8, 12] ms."""
    delay_ms, jitter_ms, count = 10.0, 2.0, 600

    def attempt() -> None:
        bed.line.apply(delay_ms, jitter_ms)
        try:
            got = bed.udp(count, 1000, 1000 * 8 / 0.005)
        finally:
            bed.line.apply(DELAY_MS, 0.0)
        owd = got["owd_ms"]
        assert got["received"] == count and got["reordered"] == 0, got
        # uniform on [8, 12] ms has p10 = 8.4 and p90 = 11.6; the wire adds some 0.1 ms
        assert delay_ms - jitter_ms <= owd["min"] and owd["p10"] <= delay_ms - jitter_ms / 2, owd
        assert delay_ms + jitter_ms / 2 <= owd["p90"] <= delay_ms + jitter_ms + RTT_TOLERANCE_MS, owd

    on_time(attempt, bed.late, "cclab-delay")


def _assert_no_drops(bed: Bed) -> None:
    stats = bed.line.stats_now()
    assert stats is not None, "cclab-delay is not running"
    lines = stats["lines"]
    assert all(ln["socket_drops"] == 0 and ln["tx_errors"] == 0 and ln["truncated"] == 0 for ln in lines), lines


@pytest.mark.root
def test_delay_change_while_running(bed: Bed) -> None:
    """After a change to 5 ms one way the base RTT is 10 ms within RTT_TOLERANCE_MS, and the median is held there
    above what the host adds at no delay in the same run (CI once saw a median of 10.6 ms on this VM-hosted
    machine kind)."""

    def attempt() -> None:
        bed.line.apply(0.0, 0.0)
        try:
            host = bed.ping_rtts_ms(20, 0.02)
            bed.line.apply(5.0, 0.0)
            rtts = bed.ping_rtts_ms(20, 0.05)[5:]  # those sent after the old delay drained
        finally:
            bed.line.apply(DELAY_MS, 0.0)
        assert len(rtts) == 15 and len(host) == 20, f"{15 - len(rtts)} + {20 - len(host)} pings lost"
        _assert_rtt(10.0, rtts, host)  # 2 x 5 ms after the change

    on_time(attempt, bed.late, "cclab-delay")


@pytest.mark.root
def test_an_iperf3_server_ends_by_itself_after_its_client(bed: Bed, tmp_path: Path) -> None:
    """iperf3's server writes its report and then waits for its client's last message, which the delay line holds
    late_ms after the client has exited: a run's stop lets the server end by itself (exit 0) instead of
    interrupting it there, and its report stays one JSON document with the bytes it read (a server interrupted
    in that moment printed "interrupt - the server has terminated" after its report, once into the same file)."""
    late_ms = 250.0  # a window no host's scheduling closes (at 40 ms, one try in six fell inside it)
    assert late_ms / 1000 < IperfFlow.server_grace_s
    flow = IperfFlow("f1", 1, SRC, DST, 1, tmp_path, algo="reno")
    bed.line.apply(late_ms, 0.0)
    try:
        flow.start_server(bed.net.get("r1"))
        flow.wait_server()
        flow.start_client(bed.net.get("h1"))
        assert flow.client is not None
        flow.client.wait(timeout=30)
    finally:
        flow.stop()
        bed.line.apply(DELAY_MS, 0.0)
    assert flow.client.returncode == 0, flow.error()
    assert flow.server is not None and flow.server.returncode == 0
    report = json.loads((tmp_path / "f1.server.json").read_text())
    assert report["end"]["sum_received"]["bytes"] == flow.report()["received_bytes"] > 0


# --- the probe ---------------------------------------------------------------------


def _send(src: str, dst: str, port: int, count: int, size: int, rate_bps: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    pad = b"\0" * max(0, size - PROBE.size)
    gap_ns = int(size * 8 / rate_bps * 1e9)
    t0 = time.monotonic_ns()
    for i in range(count):
        due = t0 + i * gap_ns
        ahead_ns = due - time.monotonic_ns()
        if ahead_ns > 300_000:  # sleep through long gaps: a spinning probe would take a core from what it measures
            time.sleep((ahead_ns - 200_000) / 1e9)
        while time.monotonic_ns() < due:
            pass
        s.sendto(PROBE.pack(i, time.time_ns()) + pad, (dst, port))
    print(json.dumps({"sent": count}), flush=True)


def _recv(addr: str, port: int, idle_s: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.bind((addr, port))
    stamp_on_receive(s)
    print("ready", flush=True)
    s.settimeout(30.0)
    n = reordered = 0
    last = -1
    owd_ns: list[int] = []
    while True:
        try:
            data, now, _addr = recv_stamped(s)
        except TimeoutError:
            break
        seq, sent_ns = PROBE.unpack_from(data)
        n += 1
        reordered += seq < last
        last = max(last, seq)
        owd_ns.append(now - sent_ns)
        s.settimeout(idle_s)
    owd_ns.sort()

    def pct(p: int) -> float:
        return round(owd_ns[min(len(owd_ns) - 1, len(owd_ns) * p // 100)] / 1e6, 3) if owd_ns else 0.0

    owd = {"min": pct(0), "p10": pct(10), "p50": pct(50), "p90": pct(90), "max": pct(100)}
    print(json.dumps({"received": n, "reordered": reordered, "owd_ms": owd}), flush=True)


if __name__ == "__main__":
    cmd, *a = sys.argv[1:]
    if cmd == "send":
        _send(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), float(a[5]))
    else:
        _recv(a[0], int(a[1]), float(a[2]))

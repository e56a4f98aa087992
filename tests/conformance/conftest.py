"""The conformance bed: one sender, one emulated link, one receiver, programmed by each target's driver.

`target` is module-scoped and parametrized over the registry's targets that
cclab builds here (controller/dataplane/targets.py), so every test function of
the suite runs unchanged against each of them: the one-pair
dumbbell h1 -- s1 == bottleneck == s2 -- r1 (tests/conftest.py builds it), s1
a Linux bridge with the kernel target's tc + BPF on s1-eth1, or the BMv2
switch running bottleneck.p4 (or the program --p4-program names: a student's,
for labs/05-p4/). Frames are built with Scapy in the test,
written to a pcap file, sent from h1 by wire.py through a raw socket (paced
on wire bytes), and captured at r1 with the kernel's receive times.

Every test frame ends with a 10-byte tag (magic, batch, sequence number), so
the receiver's capture says which frames arrived, in which order and when.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import RawPcapReader

from controller.dataplane import COUNTER_FIELDS, Bottleneck, FlowCounters, FlowKey, LinkParams, Snapshot, fpgasim
from controller.dataplane.targets import in_mininet
from controller.network import fpga
from tests.conformance.wire import write_pcap
from tests.conftest import BMV2_MISSING, BMV2_SKIP_REASON, bmv2_dumbbell, kernel_dumbbell, p4_program
from tests.timing import on_time

WIRE = Path(__file__).with_name("wire.py")
SRC, DST = "10.0.1.1", "10.0.2.1"
#: The flows the controller declares (BMv2: flow_stats entries 1..n). Each differs from
#: another in one field of the 5-tuple only, so a key that is not exact shows up.
UDP_F = FlowKey(SRC, DST, 41001, 5301, 17)
TCP_F = FlowKey(SRC, DST, 41001, 5301, 6)
UDP_SWAPPED = FlowKey(SRC, DST, 5301, 41001, 17)
UDP_DPORT = FlowKey(SRC, DST, 41001, 5302, 17)
UDP_DST = FlowKey(SRC, "10.0.2.2", 41001, 5301, 17)
TCP_SPORT = FlowKey(SRC, DST, 41002, 5301, 6)
DECLARED = (UDP_F, TCP_F, UDP_SWAPPED, UDP_DPORT, UDP_DST, TCP_SPORT)
#: the link every test starts from: fast enough that nothing queues, no loss
BASE = LinkParams(rate_bps=100_000_000, queue_pkts=1000)
#: where a target's line is slower: fpga-sim's BASE runs at its line (80 Mbit/s), above every rate offered at BASE
BASES = {"fpga-sim": replace(BASE, rate_bps=fpga.LINE_BPS)}
TAG = struct.Struct("!4sHI")
MAGIC = b"CCcf"
#: Ethernet + IPv4 + UDP headers; a full-size frame is 1514 bytes (MTU 1500, no FCS)
FULL_FRAME = 1514
#: fpga-sim's lag limit in the bed, ms: the model catches up on a host's stall shorter than this, its frames
#: entering at the cycles of their arrival (a run's 20 ms forgets more, to keep the element's delay honest; here a
#: clause measures rates over a second or more, and the queue in frames)
CATCH_UP_MS = 250
T = TypeVar("T")
#: what a target needs beyond root to run here (skipped with the reason otherwise; under CI=true a failure)
NEEDS = {
    "bmv2": [pytest.mark.bmv2, pytest.mark.skipif(bool(BMV2_MISSING), reason=BMV2_SKIP_REASON)],
    "fpga-sim": [pytest.mark.fpga, pytest.mark.skipif(fpgasim.missing() is not None, reason=f"{fpgasim.missing()}")],
}
TARGETS = [pytest.param(name, marks=NEEDS.get(name, [])) for name in in_mininet()]


@dataclass
class Capture:
    """What one exchange sent and what the receiver got."""

    batch: int
    sent: list[bytes]
    received: list[tuple[float, bytes]]
    """(receive time, s since the epoch; frame) in arrival order."""
    t_start: float
    """When the sender began, s since the epoch."""

    def tagged(self) -> list[tuple[float, int, bytes]]:
        """(time, sequence number, frame) of this batch's frames that arrived, in arrival order."""
        out = []
        for t, frame in self.received:
            if len(frame) >= TAG.size:
                magic, batch, seq = TAG.unpack(frame[-TAG.size :])
                if magic == MAGIC and batch == self.batch:
                    out.append((t, seq, frame))
        return out

    def seqs(self) -> list[int]:
        return [seq for _t, seq, _f in self.tagged()]


@dataclass
class Target:
    """One data plane on the one-pair dumbbell, behind the calls every conformance test makes."""

    name: str
    net: Any
    dp: Bottleneck
    tmp: Path
    params: LinkParams = field(default_factory=lambda: BASE)
    h1_mac: str = ""
    r1_mac: str = ""
    _batch: int = field(default=0, init=False)

    @property
    def base(self) -> LinkParams:
        """The link every test starts from on this target (BASE, or BASES')."""
        return BASES.get(self.name, BASE)

    def __post_init__(self) -> None:
        self.params = self.base
        self.h1_mac = self.net.get("h1").MAC()
        self.r1_mac = self.net.get("r1").MAC()

    # --- frames -------------------------------------------------------------

    def frame(self, pkt: Packet, size: int, seq: int, batch: int) -> bytes:
        """h1 -> r1 Ethernet frame of exactly `size` bytes around `pkt`, ending in the tag."""
        head = Ether(src=self.h1_mac, dst=self.r1_mac) / pkt
        pad = size - len(head) - TAG.size
        assert pad >= 0, f"a {size}-byte frame cannot hold {pkt.summary()} and the tag"
        raw = bytes(head / Raw(b"\0" * pad + TAG.pack(MAGIC, batch, seq)))
        assert len(raw) == size
        return raw

    def next_batch(self) -> int:
        self._batch += 1
        return self._batch

    # --- programming --------------------------------------------------------

    def program(self, params: LinkParams) -> None:
        """Set every knob, the queue limit included (the kernel target sets that and the shaper only at set-up)."""
        if self.name == "kernel" and (params.queue_pkts, params.queue_bytes, params.shaper) != (
            self.params.queue_pkts,
            self.params.queue_bytes,
            self.params.shaper,
        ):
            self.dp.teardown()
            self.dp.setup(params, seed=7)
        else:
            self.dp.apply(params)
        self.params = params

    def apply(self, params: LinkParams) -> None:
        """Change rate / loss while traffic flows (a schedule step)."""
        self.dp.apply(params)
        self.params = params

    def read(self) -> Snapshot:
        return self.dp.read()

    # --- time ---------------------------------------------------------------

    def late_episodes(self) -> int:
        """How often so far the target's model fell more than 5 ms behind the wall clock (fpga-sim's harness counts
        it: the host did not give the model the CPU, so the element's frames left late); 0 for a target that runs
        in no model (kernel) or counts no such thing (BMv2)."""
        if isinstance(self.dp, fpgasim.FpgaSimBottleneck):
            return int(self.dp.harness_stats()["late_episodes"])
        return 0

    def on_time(self, attempt: Callable[[], T]) -> T:
        """attempt(), tried again where it failed while the target's model fell behind the wall clock
        (tests/timing.py, `on_time`)."""
        return on_time(attempt, self.late_episodes, f"the {self.name} model")

    def settle(self, timeout_s: float = 5.0) -> None:
        """Wait until the queue has drained (the target's own wait) and the link's counters stand still."""
        assert self.dp.wait_drained(timeout_s), f"the {self.name} queue did not drain"
        deadline = time.monotonic() + timeout_s
        last = self.dp.read()
        while True:
            time.sleep(0.02)  # polling interval
            snap = self.dp.read()
            if snap.link == last.link:
                return
            assert time.monotonic() < deadline, f"link counters still moving: backlog {snap.backlog_pkts} packets"
            last = snap

    # --- traffic ------------------------------------------------------------

    def exchange(
        self,
        frames: list[bytes],
        rate_bps: float,
        batch: int,
        during: Callable[[float], None] | None = None,
        lead_s: float = 0.0,
    ) -> Capture:
        """Send `frames` from h1 at `rate_bps` of wire bytes (0: back to back) and capture them at r1.

        `during(t_start)` runs while the sender sends (e.g. a schedule step); `lead_s`
        pauses after the first frame. Returns once the link has drained and the
        receiver has stopped.
        """
        name = f"batch{batch}"
        out_pcap, in_pcap = self.tmp / f"{name}.sent.pcap", self.tmp / f"{name}.recv.pcap"
        write_pcap(str(out_pcap), [(0, f) for f in frames])
        r1, h1 = self.net.get("r1"), self.net.get("h1")
        rx = r1.popen(
            [sys.executable, str(WIRE), "recv", "r1-eth0", str(in_pcap)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        tx = None
        try:
            assert rx.stdout is not None and rx.stdout.readline().strip() == "ready", "receiver did not start"
            tx = h1.popen(
                [sys.executable, str(WIRE), "send", "h1-eth0", str(out_pcap), str(rate_bps), str(lead_s)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert tx.stdout is not None
            t_start = json.loads(tx.stdout.readline())["start"]
            worker = None
            if during is not None:
                worker = threading.Thread(target=during, args=(t_start,))
                worker.start()
            done = json.loads(tx.communicate(timeout=120)[0])
            if worker is not None:
                worker.join()
            assert done["sent"] == len(frames), f"sender sent {done['sent']} of {len(frames)}"
            self.settle()
            got = json.loads(rx.communicate("stop\n", timeout=60)[0])
        finally:
            for proc in (tx, rx):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
        received = [(m.sec + m.usec / 1e9, bytes(d)) for d, m in RawPcapReader(str(in_pcap))]
        assert len(received) == got["received"]
        return Capture(batch, frames, received, t_start)


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The one-pair dumbbell on the target, the suite's flows declared, the BASE link."""
    name = request.param
    tmp = tmp_path_factory.mktemp(f"conformance-{name}")
    beds = {
        "kernel": lambda: kernel_dumbbell("pytest-conformance", BASE, static_arp=True),
        "bmv2": lambda: bmv2_dumbbell("pytest-conformance", tmp / "p4", DECLARED, BASE, p4_program(request.config)),
        "fpga-sim": lambda: kernel_dumbbell(
            "pytest-conformance", BASES["fpga-sim"], True, target="fpga-sim", flows=DECLARED, max_lag_ms=CATCH_UP_MS
        ),
    }
    if name not in beds:
        pytest.fail(f"target {name!r} is registered to run here but has no conformance bed: add one to `beds`")
    with beds[name]() as (net, dp):
        quiet_bridges(net)
        yield Target(name, net, dp, tmp)


def quiet_bridges(net: Any) -> None:
    """No IPv6 on the Linux bridges and their ports: their own chatter (MLD reports, router
    solicitations) would cross the link beside the test's frames. The hosts have none already."""
    for sw in net.switches:
        if sw.inNamespace:
            continue  # the BMv2 node: no addresses, IPv6 off in its namespace
        for dev in (sw.name, *(i for i in sw.intfNames() if i != "lo")):
            subprocess.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{dev}.disable_ipv6=1"], check=True)


@pytest.fixture
def bed(target: Target) -> Iterator[Target]:
    """The module's target at its BASE link for one test, restored to it afterwards."""
    target.program(target.base)
    yield target
    target.program(target.base)


def delta(after: FlowCounters, before: FlowCounters) -> FlowCounters:
    """Counter increments between two reads."""
    return FlowCounters(*(getattr(after, k) - getattr(before, k) for k in COUNTER_FIELDS))


def flow(snap: Snapshot, key: FlowKey) -> FlowCounters:
    return snap.flows.get(key, FlowCounters())

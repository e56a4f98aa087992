"""`cclab bench controller`: the CPU the monitor needs to poll many flows' counters."""

from __future__ import annotations

import ipaddress
import struct
import time
from typing import Any

from controller import system
from controller.dataplane import Bottleneck, FlowKey, LinkParams
from controller.dataplane.kernel import KernelBottleneck
from controller.dataplane.targets import Placement, make_bottleneck
from controller.measure.monitor import Monitor, MonitoredFlow, MonitoredLink


def controller_polling(
    flows: int = 1000, rate_hz: float = 10.0, seconds: float = 10.0, links: int = 1
) -> dict[str, Any]:
    """CPU share of one core the monitor uses to poll `flows` counters at `rate_hz` on `links` emulated links.

    Real kernel links on throwaway veth pairs, each flow map filled with
    `flows` entries, every flow crossing every link (the worst case: a
    parking lot of long flows); the monitor runs as in an experiment (batch
    reads, per-link and per-flow rates, Jain's index), no traffic generator
    on the CPU.
    """

    system.require_root()
    ids = [f"l{n + 1}" for n in range(links)]
    monitored = []
    for i in range(flows):
        src, dst = ipaddress.IPv4Address(0x0A000000 + i), ipaddress.IPv4Address(0x0A010000 + i)
        key = FlowKey(str(src), str(dst), 40000 + i % 20000, 5201, 6)
        monitored.append(MonitoredFlow(f"f{i + 1}", "cubic", key, "h1", tuple(ids)))
    dps: list[Bottleneck] = []
    devs: list[str] = []
    try:
        for n, lid in enumerate(ids):
            a, b = f"cclab-bench{2 * n}", f"cclab-bench{2 * n + 1}"
            system.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
            devs.append(a)
            dp = make_bottleneck("kernel", Placement(f"bench-controller-{lid}", a, b))
            dps.append(dp)
            dp.setup(LinkParams(rate_bps=1_000_000_000, queue_pkts=100), seed=1)
            assert isinstance(dp, KernelBottleneck)  # its flow map is filled below
            fmap = dp._maps["bn_flows"]
            for mf in monitored:
                k = mf.key
                packed = (ipaddress.IPv4Address(k.src).packed, ipaddress.IPv4Address(k.dst).packed)
                fmap.update(struct.pack("=4s4sHHB3x", *packed, k.sport, k.dport, 6), bytes(64))
        mon = Monitor([MonitoredLink(lid, dp, lambda: 1e9) for lid, dp in zip(ids, dps)], monitored, 1 / rate_hz)
        cpu0, t0 = time.process_time(), time.monotonic()
        mon.start(t0)
        time.sleep(seconds)
        mon.stop()
        cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
        polls = len(mon.series.link) // links
    finally:
        for dp in dps:
            dp.teardown()
        for a in devs:
            system.run(["ip", "link", "del", a], check=False)
    return {
        "bench": "controller_polling",
        "flows": flows,
        "links": links,
        "rate_hz": rate_hz,
        "polls": polls,
        "cpu_share_of_one_core": cpu / wall,
        "ms_per_poll": cpu / max(1, polls) * 1000,
    }

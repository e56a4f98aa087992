"""`cclab bench delay`: the delay element's accuracy under load (40 ms each way) and its ceiling."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller import system
from controller.dataplane import Bottleneck, LinkParams, sysctls
from controller.dataplane.delay import LinkDelay, pick_element
from controller.dataplane.targets import Placement, make_bottleneck
from controller.network import mininet as topology
from hosts import stack, traffic

#: the one-pair dumbbell's addresses (controller/network/graph.py)
DUMBBELL_H1, DUMBBELL_R1 = "10.0.1.1", "10.0.2.1"

#: rates tried for the delay element, Mbit/s, ascending
DELAY_RATES_MBPS = (250, 500, 1000, 1500, 2000, 2500, 3000)
DELAY_BENCH_MS = 40.0
DELAY_PROBE_PORT = 5402


#: the element carries a rate when the probe's median one-way delay is within this of the spec
DELAY_ERROR_MAX_MS = 0.5


def _delay_ok(p: dict[str, Any]) -> bool:
    """No drop in the element, every probe in order, the median one-way delay within DELAY_ERROR_MAX_MS."""
    owd = p["one_way_ms"]["p50"]
    return bool(
        p["element_drops"] == 0
        and p["probe_reordered"] == 0
        and p["probe_received"] == p["probe_sent"]
        and abs(owd - DELAY_BENCH_MS) <= DELAY_ERROR_MAX_MS
    )


def delay_point(
    net: Any, dp: Bottleneck, line: LinkDelay, rate_mbps: float, seconds: float, probe: Path
) -> dict[str, Any]:
    """One saturating cubic flow h1 -> r1 at rate_mbps through the delay; a one-way probe r1 -> h1 beside it.

    The probe (1000 datagrams/s) crosses the reverse delay line but not the
    bottleneck's queue, so its one-way delay is the delay line's own error
    while the same process carries the flow's data and ACKs.
    """

    h1, r1 = net.get("h1"), net.get("r1")
    dp.apply(LinkParams(rate_bps=int(rate_mbps * 1e6), queue_pkts=1000))
    before = (line.stats_now() or {}).get("lines", [])
    srv = r1.popen(["iperf3", "-s", "-1", "-B", DUMBBELL_R1, "-p", "5311"], stdout=subprocess.DEVNULL)
    rx = h1.popen([sys.executable, str(probe), "recv", DUMBBELL_H1, str(DELAY_PROBE_PORT), "1.0"], text=True)
    try:
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 5
        while not traffic.listening(srv.pid, 5311) and time.monotonic() < deadline:
            time.sleep(0.01)
        cl = h1.popen(
            ["iperf3", "-c", DUMBBELL_R1, "-p", "5311", "-t", f"{seconds:g}", "-C", "cubic", "-J",
             "-O", "2"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        n = int(seconds * 1000)
        tx = r1.popen(
            [sys.executable, str(probe), "send", DUMBBELL_R1, DUMBBELL_H1,
             str(DELAY_PROBE_PORT), str(n), "200", str(200 * 8 * 1000)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        out, _ = cl.communicate(timeout=seconds + 60)
        tx.wait(timeout=60)
        owd = json.loads(rx.communicate(timeout=60)[0])
    finally:
        for p in (srv, rx):
            if p.poll() is None:
                p.kill()
                p.wait()
    end = json.loads(out)["end"]
    achieved = float(end["sum_received"]["bits_per_second"])
    after = line.stats_now() or {}
    drops = sum(a["socket_drops"] + a["tx_errors"] for a in after.get("lines", [])) - sum(
        b["socket_drops"] + b["tx_errors"] for b in before
    )
    return {
        "rate_bps": int(rate_mbps * 1e6),
        "achieved_bps": achieved,
        "error": abs(achieved - rate_mbps * 1e6) / (rate_mbps * 1e6),
        "probe_received": owd["received"],
        "probe_sent": n,
        "probe_reordered": owd["reordered"],
        "one_way_ms": owd["owd_ms"],
        "element_drops": drops,
        "element_late_us": after.get("late_us"),
    }


def delay(
    seconds: float = 8.0,
    rates_mbps: tuple[float, ...] = DELAY_RATES_MBPS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The delay element's accuracy under load and its ceiling.

    The ceiling: the highest bottleneck rate at which one saturating flow
    through 40 ms each way leaves the element dropping nothing and the
    reverse probe's median one-way delay within DELAY_ERROR_MAX_MS of 40 ms.
    The flow's own rate is reported beside it (cubic over an 80 ms RTT may
    take longer than a point lasts to fill the link).
    """
    from mininet.log import setLogLevel
    from mininet.net import Mininet

    system.require_root()
    say = progress or (lambda _m: None)
    element = pick_element()  # before anything is built: none here is one line saying why
    setLogLevel("error")
    mod = topology.load_topology_module()
    tuned = sysctls.NetworkSysctls(htb_links=True)
    topo = mod.Dumbbell(pairs=1)
    net = tuned.build(lambda: Mininet(topo, switch=mod.CclabBridge, host=mod.CclabHost, controller=None))
    dp = make_bottleneck("kernel", Placement("bench-delay", "s1-eth1", "s2-eth1"))
    # the delay element on the devices after the link: s2 towards r1 (forward), s2 towards the link (reverse)
    line = LinkDelay(("s2-eth2", "s2-eth1"), system.PIN_ROOT / "bench-delay-d", element, seed=1)
    probe = system.REPO / "tests" / "test_delay.py"
    points: list[dict[str, Any]] = []
    try:
        net.start()
        bufs = 64 << 20  # 80 ms x 3 Gbit/s is 30 MB
        for h in net.hosts:
            for name, value in (
                ("net.ipv4.tcp_rmem", f"4096 131072 {bufs}"),
                ("net.ipv4.tcp_wmem", f"4096 16384 {bufs}"),
                ("net.ipv4.tcp_congestion_control", stack.DEFAULT_ALGO),  # cubic unpaced (hosts/stack.py)
            ):
                mod._run(h, ["sysctl", "-q", "-w", f"{name}={value}"])
        dp.setup(LinkParams(rate_bps=int(rates_mbps[0] * 1e6), queue_pkts=1000), seed=1)
        line.setup(DELAY_BENCH_MS, 0.0)
        misses = 0
        for r in rates_mbps:
            say(f"{line.element}: {r:g} Mbit/s")
            p = delay_point(net, dp, line, r, seconds, probe)
            points.append(p)
            ok = _delay_ok(p)
            misses = 0 if ok else misses + 1
            if misses == 2:
                break
    finally:
        line.teardown()
        dp.teardown()
        net.stop()
        tuned.restore()
    good = [p for p in points if _delay_ok(p)]
    return {
        "bench": "delay",
        "delay_element": element,
        "one_way_delay_ms": DELAY_BENCH_MS,
        "max_accurate_rate_bps": max(p["rate_bps"] for p in good) if good else None,
        "at_max": max(good, key=lambda p: p["rate_bps"]) if good else None,
        "one_way_error_max_ms": DELAY_ERROR_MAX_MS,
        "seconds": seconds,
        "points": points,
    }

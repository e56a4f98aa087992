"""Benchmarks that print figures (targets are met here, not in timed tests).

`cclab bench cc`: each cclab algorithm's loopback throughput beside built-in
reno, interleaved in one run.

`cclab bench dataplane`: the highest bottleneck rate a target (kernel, bmv2,
or both in one run) emulates with at most 2 % rate error, beside the
unshaped ceiling of the same path measured in the same run.  Each point is a
real experiment (the runner, the dumbbell, saturating iperf3 flows); the
rate is the in-network link rate from the data plane's own counters, after a
warm-up.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import cc, spec, system
from controller.experiment import build, runner, topology
from hosts import traffic

log = logging.getLogger(__name__)

RATE_ERROR_MAX = 0.02
#: rates tried, Mbit/s, ascending
RATES_MBPS = (500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000, 10000)
#: rates tried on BMv2 (a software switch: packets per second are its limit), Mbit/s
BMV2_RATES_MBPS = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 150, 200, 300, 500, 1000)
#: "unshaped": a rate no veth path here reaches, so the shaper never holds back
CEILING_MBPS = 100_000
TARGETS = ("kernel", "bmv2")
#: the one-pair dumbbell's addresses (controller/network/graph.py)
DUMBBELL_H1, DUMBBELL_R1 = "10.0.1.1", "10.0.2.1"


@dataclass
class Point:
    rate_bps: int
    achieved_bps: float | None
    cpu_busy: float | None = None
    """Share of all CPUs busy during the run: near 1, the senders may be what falls short."""

    @property
    def error(self) -> float | None:
        if self.achieved_bps is None:
            return None
        return abs(self.achieved_bps - self.rate_bps) / self.rate_bps

    def as_dict(self) -> dict[str, Any]:
        return {
            "rate_bps": self.rate_bps,
            "achieved_bps": self.achieved_bps,
            "error": self.error,
            "cpu_busy": self.cpu_busy,
        }


def _spec(rate_mbps: float, duration_s: float, flows: int, shaper: str, target: str = "kernel") -> spec.Spec:
    return spec.parse(
        {
            "name": f"bench-{target}-{shaper}-{int(rate_mbps)}",
            "duration_s": duration_s,
            "dataplane": target,
            "topology": {"kind": "dumbbell", "pairs": flows},
            "bottleneck": {"rate_mbps": rate_mbps, "queue_pkts": 1000, "shaper": shaper},
            "flows": [{"algo": "cubic", "src": f"h{i}", "dst": f"r{i}"} for i in range(1, flows + 1)],
        }
    )


def measure(rate_mbps: float, duration_s: float, flows: int, shaper: str, root: Path, target: str = "kernel") -> Point:
    opts = runner.RunOptions(results_root=root, plots=False)
    out = runner.run(_spec(rate_mbps, duration_s, flows, shaper, target), opts)
    achieved = out.summary["bottleneck"]["achieved_bps"]
    cpu = out.summary["fidelity"]["checks"].get("cpu_busy_fraction", {}).get("value")
    return Point(int(rate_mbps * 1e6), float(achieved) if achieved is not None else None, cpu)


def dataplane(
    duration_s: float = 6.0,
    flows: int = 4,
    shaper: str = "htb",
    rates_mbps: tuple[float, ...] | None = None,
    progress: Callable[[str], None] | None = None,
    target: str = "kernel",
) -> dict[str, Any]:
    """One target's highest accurate rate; `target` = "all" runs each target and returns both."""
    if target == "all":
        return {
            "bench": "dataplane",
            "targets": [dataplane(duration_s, flows, shaper, rates_mbps, progress, t) for t in TARGETS],
        }
    if rates_mbps is None:
        rates_mbps = BMV2_RATES_MBPS if target == "bmv2" else RATES_MBPS
    say = progress or (lambda _m: None)
    with tempfile.TemporaryDirectory(prefix="cclab-bench-") as tmp:
        root = Path(tmp)
        say(f"{target}: ceiling (unshaped)")
        ceiling = measure(CEILING_MBPS, duration_s, flows, shaper, root, target).achieved_bps
        points: list[Point] = []
        misses = 0
        for r in rates_mbps:
            if ceiling is not None and r * 1e6 > ceiling * 1.05:
                break  # the path itself cannot carry it
            say(f"{target}: {r:g} Mbit/s")
            p = measure(r, duration_s, flows, shaper, root, target)
            points.append(p)
            misses = misses + 1 if p.error is None or p.error > RATE_ERROR_MAX else 0
            if misses == 2:
                break
    good = [p.rate_bps for p in points if p.error is not None and p.error <= RATE_ERROR_MAX]
    return {
        "bench": "dataplane",
        "target": target,
        "shaper": shaper if target == "kernel" else "bmv2 egress queue (packets/s)",
        "max_accurate_rate_bps": max(good) if good else None,
        "ceiling_bps": ceiling,
        "rate_error_max": RATE_ERROR_MAX,
        "flows": flows,
        "duration_s": duration_s,
        "points": [p.as_dict() for p in points],
    }


BENCH_NS = "cclab-bench-cc"
BENCH_PORT = 5299


def _netns(*args: str) -> list[str]:
    return ["ip", "netns", "exec", BENCH_NS, *args]


def _iperf_loopback(algo: str, seconds: float) -> tuple[float, int]:
    """(receiver bit/s, sender retransmits) of one loopback run."""
    # Sender and receiver pinned to different CPUs: left to the scheduler they share
    # one core in some runs and not in others (measured: 41-60 Gbit/s for one algorithm).
    pin = ["-A", "0,1"] if (os.cpu_count() or 1) >= 2 else []
    proc = system.run(
        _netns("iperf3", "-c", "127.0.0.1", "-p", str(BENCH_PORT), "-t", f"{seconds:g}", "-C", algo, "-J", *pin),
        timeout=seconds + 30,
    )
    end = json.loads(proc.stdout)["end"]
    return float(end["sum_received"]["bits_per_second"]), int(end["sum_sent"].get("retransmits", 0))


def cc_loopback(
    algos: tuple[str, ...] = spec.CCLAB_ALGOS,
    seconds: float = 3.0,
    repeats: int = 5,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Loopback iperf3 throughput of each algorithm beside built-in reno, interleaved, medians.

    Loopback has a 64 KiB MTU and (almost) no loss, so the sender's per-ACK
    work limits it; the few losses it does have (tens per run) let each
    algorithm's own decrease show too, so runs spread: each run's throughput
    and retransmits are reported, not only the medians.
    """
    say = progress or (lambda _m: None)
    system.require_root()
    loaded = cc.load(algos)
    server = None
    try:
        system.run(["ip", "netns", "add", BENCH_NS])
        system.run(_netns("ip", "link", "set", "lo", "up"))
        server = subprocess.Popen(
            _netns("iperf3", "-s", "-B", "127.0.0.1", "-p", str(BENCH_PORT)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 5
        while not traffic.listening(server.pid, BENCH_PORT):
            if time.monotonic() > deadline or server.poll() is not None:
                raise system.SystemError_("iperf3 server for the loopback benchmark did not start")
            time.sleep(0.01)
        runs: dict[str, list[float]] = {a: [] for a in ("reno", *algos)}
        retrans: dict[str, list[int]] = {a: [] for a in ("reno", *algos)}
        for i in range(repeats):
            for algo in ("reno", *algos):
                say(f"round {i + 1}/{repeats}: {algo}")
                bps, rtx = _iperf_loopback(algo, seconds)
                runs[algo].append(bps)
                retrans[algo].append(rtx)
    finally:
        if server is not None:
            server.kill()
            server.wait()
        system.run(["ip", "netns", "del", BENCH_NS], check=False)
        cc.unload(loaded)
    reno = statistics.median(runs["reno"])
    return {
        "bench": "cc_loopback",
        "seconds": seconds,
        "repeats": repeats,
        "reno_bps": reno,
        "reno_runs_bps": runs["reno"],
        "reno_retransmits": retrans["reno"],
        "algos": {
            a: {
                "median_bps": statistics.median(v),
                "ratio_to_reno": statistics.median(v) / reno,
                "runs_bps": v,
                "retransmits": retrans[a],
            }
            for a, v in runs.items()
            if a != "reno"
        },
    }


def setup_teardown(topology: str = "dumbbell", size: int = 16, repeats: int = 3) -> dict[str, Any]:
    """Seconds to build a network, program every emulated link, and take both down again: the runner's own
    steps.  `size`: pairs of a dumbbell, or cross pairs per bottleneck of a 3-bottleneck parking lot."""
    import tempfile

    from controller import spec as spec_mod

    system.require_root()
    shape = (
        {"kind": "dumbbell", "pairs": size} if topology == "dumbbell" else {"kind": topology, "hops": 3, "cross": size}
    )
    raw = {
        "name": "bench-setup",
        "duration_s": 1,
        "topology": shape,
        "bottleneck": {"rate_mbps": 100, "queue_pkts": 100},
        "flows": [{"algo": "reno", "src": "h1", "dst": "r1"}],
    }
    s = spec_mod.parse(raw)
    up: list[float] = []
    down: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            ex = build.Experiment(s, None, [], Path(tmp) / f"bench-setup-{i}")
            t0 = time.monotonic()
            try:
                net = ex.build_network()
                ex.setup_dataplane(net)
                t1 = time.monotonic()
            finally:
                errors = ex.teardown()
            t2 = time.monotonic()
            if errors:
                raise system.SystemError_(f"teardown: {'; '.join(errors)}")
            up.append(t1 - t0)
            down.append(t2 - t1)
    total = [u + d for u, d in zip(up, down)]
    return {
        "bench": "setup_teardown",
        "topology": topology,
        "hosts": len(s.graph.hosts),
        "emulated_links": len(s.graph.emulated()),
        "setup_s": statistics.median(up),
        "teardown_s": statistics.median(down),
        "total_s": statistics.median(total),
        "runs_total_s": total,
    }


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
    import ipaddress
    import struct

    from controller.dataplane import FlowKey
    from controller.dataplane.kernel import KernelBottleneck, LinkParams
    from controller.measure.monitor import Monitor, MonitoredFlow, MonitoredLink

    system.require_root()
    ids = [f"l{n + 1}" for n in range(links)]
    monitored = []
    for i in range(flows):
        src, dst = ipaddress.IPv4Address(0x0A000000 + i), ipaddress.IPv4Address(0x0A010000 + i)
        key = FlowKey(str(src), str(dst), 40000 + i % 20000, 5201, 6)
        monitored.append(MonitoredFlow(f"f{i + 1}", "cubic", key, "h1", tuple(ids)))
    dps: list[KernelBottleneck] = []
    devs: list[str] = []
    try:
        for n, lid in enumerate(ids):
            a, b = f"cclab-bench{2 * n}", f"cclab-bench{2 * n + 1}"
            system.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
            devs.append(a)
            dp = KernelBottleneck(f"bench-controller-{lid}", a, b)
            dps.append(dp)
            dp.setup(LinkParams(rate_bps=1_000_000_000, queue_pkts=100), seed=1, use_delay=False)
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


def delay_point(net: Any, dp: Any, rate_mbps: float, seconds: float, probe: Path) -> dict[str, Any]:
    """One saturating cubic flow h1 -> r1 at rate_mbps through the delay; a one-way probe r1 -> h1 beside it.

    The probe (1000 datagrams/s) crosses the reverse delay line but not the
    bottleneck's queue, so its one-way delay is the delay line's own error
    while the same process carries the flow's data and ACKs.
    """
    from controller.dataplane.kernel import LinkParams

    h1, r1 = net.get("h1"), net.get("r1")
    dp.apply(LinkParams(rate_bps=int(rate_mbps * 1e6), queue_pkts=1000, delay_ms=DELAY_BENCH_MS))
    line = dp._delay_line
    before = line.stats()["lines"] if line is not None else []
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
    after = line.stats() if line is not None else {}
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

    from controller.dataplane.kernel import KernelBottleneck, LinkParams

    system.require_root()
    say = progress or (lambda _m: None)
    setLogLevel("error")
    mod = topology.load_topology_module()
    net = Mininet(mod.Dumbbell(pairs=1), switch=mod.CclabBridge, host=mod.CclabHost, controller=None)
    dp = KernelBottleneck("bench-delay", "s1-eth1", "s2-eth1", fwd_delay_devs=("s2-eth2",), rev_delay_devs=("s2-eth1",))
    probe = system.REPO / "tests" / "test_delay.py"
    points: list[dict[str, Any]] = []
    try:
        net.start()
        bufs = 64 << 20  # 80 ms x 3 Gbit/s is 30 MB
        for h in net.hosts:
            for name, value in (
                ("net.ipv4.tcp_rmem", f"4096 131072 {bufs}"),
                ("net.ipv4.tcp_wmem", f"4096 16384 {bufs}"),
            ):
                mod._run(h, ["sysctl", "-q", "-w", f"{name}={value}"])
        dp.setup(LinkParams(rate_bps=int(rates_mbps[0] * 1e6), queue_pkts=1000, delay_ms=DELAY_BENCH_MS), 1, True)
        misses = 0
        for r in rates_mbps:
            say(f"{dp.delay_element}: {r:g} Mbit/s")
            p = delay_point(net, dp, r, seconds, probe)
            points.append(p)
            ok = _delay_ok(p)
            misses = 0 if ok else misses + 1
            if misses == 2:
                break
        element = dp.delay_element
    finally:
        dp.teardown()
        net.stop()
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

"""`cclab bench cc`: each cclab algorithm's loopback throughput beside built-in reno, interleaved in one run."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

from controller import cc, spec, system
from hosts import stack, traffic

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
        # the algorithm under test unpaced, as in a run (hosts/stack.py)
        system.run(_netns("sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={stack.DEFAULT_ALGO}"))
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

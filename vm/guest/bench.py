"""Inside the lab VM: TCP throughput through the emulated bottleneck (`make vm-bench`).

Each point is a real experiment through the runner (dumbbell, HTB + netem,
saturating cubic flows); its rate is the in-network link rate from the data
plane's counters.  The ceiling is the same path with the shaper set beyond
anything it can carry.  Prints one JSON line last.

    python3 vm/guest/bench.py [--duration S] [--flows N] RATE_MBPS:DELAY_MS ...
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from controller import spec
from controller.bench import CEILING_MBPS
from controller.experiment import runner


def measure(rate_mbps: float, delay_ms: float, duration_s: float, flows: int, root: Path) -> dict[str, Any]:
    s = spec.parse(
        {
            "name": f"vm-bench-{int(rate_mbps)}-{int(delay_ms)}ms",
            "duration_s": duration_s,
            "topology": {"kind": "dumbbell", "pairs": flows},
            "bottleneck": {"rate_mbps": rate_mbps, "queue_pkts": 1000, "delay_ms": delay_ms},
            "flows": [{"algo": "cubic", "src": f"h{i}", "dst": f"r{i}"} for i in range(1, flows + 1)],
        }
    )
    out = runner.run(s, runner.RunOptions(results_root=root, plots=False)).summary
    rtt = out["fidelity"]["checks"].get("base_rtt_ms", {}).get("value")
    goodputs = [f["iperf_goodput_bps"] for f in out["flows"] if f["iperf_goodput_bps"] is not None]
    return {
        "rate_mbps": rate_mbps,
        "delay_ms": delay_ms,
        "achieved_bps": out["bottleneck"]["achieved_bps"],
        "goodput_bps": sum(goodputs) if goodputs else None,
        "base_rtt_ms": rtt,
        "delay_applied": out["bottleneck"]["delay_applied"],
        "cpu_busy_fraction": out["fidelity"]["checks"].get("cpu_busy_fraction", {}).get("value"),
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--flows", type=int, default=2)
    p.add_argument("points", nargs="+", metavar="RATE_MBPS:DELAY_MS")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="cclab-vm-bench-") as tmp:
        root = Path(tmp)
        ceiling = measure(CEILING_MBPS, 0, args.duration, args.flows, root)["achieved_bps"]
        print(f"ceiling: {ceiling}", file=sys.stderr, flush=True)
        points = []
        for pt in args.points:
            rate, delay = (float(x) for x in pt.split(":"))
            points.append(measure(rate, delay, args.duration, args.flows, root))
            print(f"point: {points[-1]}", file=sys.stderr, flush=True)
    print(json.dumps({"ceiling_bps": ceiling, "flows": args.flows, "duration_s": args.duration, "points": points}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`cclab bench setup`: seconds to build a network with its emulated links and to take it down."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from controller import spec, system
from controller.experiment import build


def setup_teardown(topology: str = "dumbbell", size: int = 16, repeats: int = 3) -> dict[str, Any]:
    """Seconds to build a network, program every emulated link, and take both down again: the runner's own
    steps.  `size`: pairs of a dumbbell, or cross pairs per bottleneck of a 3-bottleneck parking lot."""

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
    s = spec.parse(raw)
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

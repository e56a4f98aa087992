"""`cclab bench sweep`: how many runs side by side this machine holds (`cclab sweep --jobs N`).

For N = 1, 2, 3, the same runs of a spec go through the sweep's isolated
executor N at a time (at N = 1 too, so only N differs), and the bench prints
runs per hour (runs / wall time) and the fidelity pass rate (summary.json's
fidelity check, the judge of whether a run measured what its spec asked).
Two specs: the demo (four flows at 100 Mbit/s, 10 ms) and the BTBE paper's
path at its own scale (Figs. 5 and 6, Table I): one btbe flow at 200 Mbit/s,
80 ms each way through cclab-delay, a 400-packet queue. Fig. 4 goes on to
500 Mbit/s, where fewer runs may fit side by side.

The machine must be quiet while it measures: other work takes CPU from the
runs and fails fidelity checks that would pass, so a busy machine's figures
say nothing of its capacity.
"""

from __future__ import annotations

import copy
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller import spec, system
from controller.experiment import executors, sweep

#: the BTBE paper's path at its own rate and buffer (Figs. 5 and 6, Table I)
BTBE_HEAVY: dict[str, Any] = {
    "name": "bench_sweep_btbe",
    "dataplane": "kernel",
    "delay_element": "cclab-delay",
    "seed": 2009053,
    "topology": {"kind": "dumbbell", "pairs": 1},
    "bottleneck": {"rate_mbps": 200, "queue_pkts": 400, "delay_ms": 80},
    "flows": [{"algo": "btbe", "src": "h1", "dst": "r1"}],
}
JOBS = (1, 2, 3)


def _specs(duration_s: float) -> dict[str, dict[str, Any]]:
    demo = dict(spec.read_raw(system.REPO / "experiments" / "demo.toml"))
    heavy = copy.deepcopy(BTBE_HEAVY)
    for raw in (demo, heavy):
        raw["duration_s"] = duration_s
    return {"demo": demo, "btbe 200 Mbit/s 80 ms": heavy}


def _measure(spec_file: Path, out: Path, jobs: int, runs: int) -> dict[str, Any]:
    tasks = [sweep.Task(f"r{i}", spec_file, out / f"r{i}", plots=False) for i in range(runs)]
    codes: dict[str, int] = {}
    t0 = time.monotonic()
    executors.run_side_by_side(tasks, lambda _key: None, lambda res: codes.__setitem__(res.key, res.returncode), jobs)
    wall = time.monotonic() - t0
    passed = complete = 0
    for t in tasks:
        for run_dir in sorted(t.runs_dir.iterdir()) if t.runs_dir.is_dir() else []:
            if sweep.is_complete(run_dir):
                complete += 1
                passed += bool(json.loads((run_dir / "summary.json").read_text())["fidelity"]["ok"])
    return {
        "jobs": jobs,
        "runs": runs,
        "complete": complete,
        "fidelity_ok": passed,
        "pass_rate": passed / runs,
        "wall_s": wall,
        "runs_per_hour": runs / wall * 3600,
    }


def side_by_side(
    duration_s: float = 20.0, runs: int = 6, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Runs per hour and fidelity pass rate at N = 1, 2, 3 for each spec; one dict per spec and N."""
    system.require_root()
    import tomli_w

    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="cclab-bench-sweep-") as tmp:
        for name, raw in _specs(duration_s).items():
            spec_file = Path(tmp) / f"{raw['name']}.toml"
            spec_file.write_text(tomli_w.dumps(raw))
            executors.shareable(spec_file)
            for jobs in JOBS:
                if progress:
                    progress(f"{name}: {runs} runs of {duration_s:g} s, {jobs} at a time")
                results.setdefault(name, []).append(_measure(spec_file, Path(tmp) / f"{name}-{jobs}", jobs, runs))
    return {"duration_s": duration_s, "runs": runs, "specs": results}

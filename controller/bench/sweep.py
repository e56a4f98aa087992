"""`cclab bench sweep`: how many runs side by side this machine holds (`cclab sweep --jobs N`).

For each N (1, 2, 3 unless told), the same runs of a spec go through the sweep's
isolated executor N at a time (at N = 1 too, so only N differs), and the bench
prints runs per hour (runs / wall time), the fidelity pass rate (each run's
fidelity check as a report judges it: whether the run measured what its spec
asked) and each run that failed: the checks it failed, or why it did not
complete (a run that did not complete counts as failed), with where its
directory is kept (results/bench-sweep/<UTC time>/). By default two specs:
the demo (four flows at 100 Mbit/s, 10 ms) and the BTBE paper's path at its own
scale (Figs. 5 and 6, Table I): one btbe flow at 200 Mbit/s, 80 ms each way
through cclab-delay, a 400-packet queue. Fig. 4 goes on to 500 Mbit/s, where
fewer runs may fit side by side. ``--spec`` measures a spec of one's own
instead, or a sweep's runs in turn: every grid point's first repetition, then
every point's second, and so on (run i is grid point i modulo the grid's size,
so the runs cover the grid alike at every N), each with its repetition's seed,
so that two runs of one point side by side draw different random losses. A run
cut to the bench's length keeps the link changes of its first `duration_s` (a
schedule's later steps are left out), and its finite transfers send for the
whole run instead (they would overrun it); the bench says so. A campaign's
sweep runs as many at a time as this bench shows its points hold (``jobs`` in
the campaign file).

The machine must be quiet while it measures: other work takes CPU from the
runs and fails fidelity checks that would pass, so a busy machine's figures
say nothing of its capacity.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from controller import spec, system
from controller.experiment import executors, sweep
from controller.results import pool, rundir
from controller.spec import sweep as sweep_spec

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
#: where the directories of the runs that failed stay, one directory per bench (its UTC start time)
KEPT = rundir.RESULTS / "bench-sweep"


def default_specs() -> dict[str, list[dict[str, Any]]]:
    """The demo and the BTBE paper's path: name -> the one spec its runs all use."""
    demo = dict(spec.read_raw(system.REPO / "experiments" / "demo.toml"))
    return {"demo": [demo], "btbe 200 Mbit/s 80 ms": [copy.deepcopy(BTBE_HEAVY)]}


def specs_of(path: Path) -> tuple[str, list[dict[str, Any]]]:
    """A spec file's name and the specs its runs cycle through: the spec itself, or a sweep's runs repetition by
    repetition (every grid point's first, then every point's second, ...). Raises SpecError or SweepError (one
    line) for a file that is neither."""
    raw = spec.read_raw(path)
    if "sweep" not in raw:
        spec.load(path)  # validated before any run
        return str(raw.get("name", path.stem)), [dict(raw)]
    sw = sweep_spec.load(path)
    return sw.name, [dict(pt.raw) for pt in sorted(sw.points, key=lambda pt: (pt.rep, pt.index))]


STEPS_LEFT_OUT = "schedule steps past the run's end left out"
TRANSFERS_BACKLOGGED = "finite transfers send for the whole run instead"


def cut_to(raw: dict[str, Any], duration_s: float) -> tuple[dict[str, Any], dict[str, int]]:
    """`raw` (a validated spec's) with runs `duration_s` long, and how many of its parts the cut changed (by
    STEPS_LEFT_OUT and TRANSFERS_BACKLOGGED). The schedule steps of its bottleneck and links past the end are left
    out (they would never apply); a finite transfer (``bytes``), which would overrun a short run and fail its
    fidelity check whatever N, sends for the run instead, the same load on the same links while it lasts."""
    raw = {**copy.deepcopy(raw), "duration_s": duration_s}
    changed = {STEPS_LEFT_OUT: 0, TRANSFERS_BACKLOGGED: 0}
    for t in [raw.get("bottleneck") or {}, *raw.get("links", {}).values()]:
        if t.get("schedule"):
            keep = [st for st in t["schedule"] if st["at_s"] <= duration_s]
            changed[STEPS_LEFT_OUT] += len(t["schedule"]) - len(keep)
            t["schedule"] = keep
    for f in raw.get("flows", []):
        if f.pop("bytes", None) is not None:
            changed[TRANSFERS_BACKLOGGED] += 1
    return raw, changed


def _measure(spec_files: Sequence[Path], out: Path, jobs: int, runs: int, keep: Path) -> dict[str, Any]:
    """`runs` runs of `spec_files` (in turn) `jobs` at a time under `out`; the directory of each run that failed
    (did not complete, or failed its fidelity check) moves to `keep`/r<i>, and its line names it there."""
    tasks = [sweep.Task(f"r{i}", spec_files[i % len(spec_files)], out / f"r{i}", plots=False) for i in range(runs)]
    ended: list[sweep.TaskResult] = []
    t0 = time.monotonic()
    executors.run_side_by_side(tasks, lambda _key: None, ended.append, jobs)
    wall = time.monotonic() - t0
    passed = complete = 0
    failed = {r.key: f"did not complete (exit {r.returncode}: {r.error})" for r in ended if r.returncode}
    for t in tasks:
        for run_dir in sorted(t.runs_dir.iterdir()) if t.runs_dir.is_dir() else []:
            if sweep.is_complete(run_dir):
                complete += 1
                summ = json.loads((run_dir / "summary.json").read_text())
                fid = pool.fidelity(run_dir, summ)
                if fid["ok"]:
                    passed += 1
                else:
                    failed[t.key] = f"{pool.FIDELITY}, {pool.failed_checks({'fidelity': fid})}"
    lines = []
    for t in tasks:
        if t.key not in failed:
            continue
        why = failed[t.key]
        if t.runs_dir.is_dir():  # the bench's own directory goes when it ends: what failed stays to be read
            keep.mkdir(parents=True, exist_ok=True)
            shutil.move(t.runs_dir, keep / t.key)
            named = str(t.runs_dir) in why
            why = why.replace(str(t.runs_dir), str(keep / t.key)) if named else f"{why} (kept in {keep / t.key})"
        lines.append(f"{t.key}: {why}")
    return {
        "jobs": jobs,
        "runs": runs,
        "complete": complete,
        "fidelity_ok": passed,
        "pass_rate": passed / runs,
        "failed": lines,
        "wall_s": wall,
        "runs_per_hour": runs / wall * 3600,
    }


def side_by_side(
    duration_s: float = 20.0,
    runs: int = 6,
    progress: Callable[[str], None] | None = None,
    specs: dict[str, list[dict[str, Any]]] | None = None,
    jobs: Sequence[int] = JOBS,
    keep: Path | None = None,
) -> dict[str, Any]:
    """Runs per hour and fidelity pass rate at each N of `jobs` for each of `specs` (name -> the specs its runs
    cycle through; the demo and the BTBE path by default), every run `duration_s` long; one dict per spec and N.
    The directory of each run that failed moves to `keep`/s<spec>-n<N>/r<i> (default KEPT/<UTC time>/...), made
    only if one failed; the others go with the bench's temporary directory."""
    system.require_root()
    import tomli_w

    results: dict[str, list[dict[str, Any]]] = {}
    keep = keep or KEPT / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="cclab-bench-sweep-") as tmp:
        benched: list[tuple[str, list[Path]]] = []
        for s, (name, raws) in enumerate((specs or default_specs()).items()):
            files = []
            changed: Counter[str] = Counter()
            for i, raw in enumerate(raws[:runs]):  # a run cycles through them: those past `runs` are never run
                raw, cut = cut_to(raw, duration_s)
                changed.update(cut)
                f = Path(tmp) / f"s{s}-{i}.toml"
                f.write_text(tomli_w.dumps(raw))
                files.append(f)
            try:  # every spec, at the bench's run length, before any run: a later one's error loses no figures
                executors.shareable_together(executors.loaded(files))
            except spec.SpecError as exc:
                what = str(exc).removeprefix("spec error: ")
                raise spec.SpecError(f"spec error: {name} with runs {duration_s:g} s long: {what}") from None
            for what, n in changed.items():
                if n and progress:
                    progress(f"{name} cut to {duration_s:g} s: {n} {what}")
            benched.append((name, files))
        for s, (name, files) in enumerate(benched):
            for n in jobs:
                if progress:
                    progress(f"{name}: {runs} runs of {duration_s:g} s, {n} at a time")
                out = Path(tmp) / f"s{s}-n{n}"
                results.setdefault(name, []).append(_measure(files, out, n, runs, keep / out.name))
    return {"duration_s": duration_s, "runs": runs, "jobs": list(jobs), "specs": results}

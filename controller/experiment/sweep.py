"""Running a sweep: its directory, resumable, and the runs handed to an executor.

The grid, the repetitions and their seeds are controller.spec.sweep's.

The sweep directory holds ``sweep.json`` (grid, seeds, point -> run directory),
``points/<key>.toml`` (each point's spec as run) and ``runs/<key>/<run dir>``.
State lives in the run directories themselves (a run is complete when its
summary.json says so and its INCOMPLETE marker is gone), so a sweep that was
killed resumes by running what has no complete run; an incomplete run
directory is kept as it is, and the point gets a new one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller import spec
from controller.results import rundir
from controller.spec.sweep import MANIFEST, Point, Sweep, SweepError

log = logging.getLogger(__name__)

SWEEPS = rundir.RESULTS / "sweeps"


# --- the sweep directory --------------------------------------------------------------


def is_complete(run_dir: Path) -> bool:
    """A run is complete when its summary.json says so and its INCOMPLETE marker is gone."""
    if (run_dir / rundir.INCOMPLETE).exists():
        return False
    try:
        return bool(json.loads((run_dir / "summary.json").read_text()).get("complete"))
    except (OSError, ValueError):
        return False


def attempts(sweep_dir: Path, key: str) -> list[Path]:
    """Run directories of one point, oldest first (their names carry the UTC start time)."""
    d = sweep_dir / "runs" / key
    return sorted((p for p in d.iterdir() if p.is_dir()), key=lambda p: p.name) if d.is_dir() else []


def complete_run(sweep_dir: Path, key: str) -> Path | None:
    done = [p for p in attempts(sweep_dir, key) if is_complete(p)]
    return done[0] if done else None


def _point_entry(sw: Sweep, pt: Point, sweep_dir: Path) -> dict[str, Any]:
    done = complete_run(sweep_dir, pt.key)
    return {
        "key": pt.key,
        "index": pt.index,
        "rep": pt.rep,
        "values": dict(pt.values),
        "seed": pt.seed,
        "spec_file": f"points/{pt.key}.toml",
        "run_dir": None if done is None else str(done.relative_to(sweep_dir)),
        "attempts": [str(p.relative_to(sweep_dir)) for p in attempts(sweep_dir, pt.key)],
        "status": "complete" if done else ("incomplete" if attempts(sweep_dir, pt.key) else "pending"),
    }


def write_manifest(sw: Sweep, sweep_dir: Path) -> dict[str, Any]:
    """sweep.json, rebuilt from the run directories (so it is right after any kill)."""
    data = {
        "name": sw.name,
        "spec_path": str(sw.path) if sw.path else None,
        "base_spec": sw.base,
        "grid": [{"path": p, "values": list(v)} for p, v in sw.grid],
        "repetitions": sw.repetitions,
        "base_seed": sw.base_seed,
        "seeds": list(sw.seeds),
        "seed_derivation": "numpy.random.SeedSequence(base_seed).spawn(repetitions); seed r at every point",
        "git_revision": rundir.git_revision(),
        "points": [_point_entry(sw, pt, sweep_dir) for pt in sw.points],
    }
    rundir.write_json(sweep_dir / MANIFEST, data)
    return data


def prepare(sw: Sweep, sweep_dir: Path) -> None:
    """Create the sweep directory, or check that an existing one holds this very sweep (to resume it) or part of
    it: every point it holds is one of this sweep's, run for run (more repetitions extend a sweep, since repetition
    r's seed does not depend on how many; so does a grid value added where no held point's index moves)."""
    points_dir = sweep_dir / "points"
    if (sweep_dir / MANIFEST).exists():
        mine = {pt.key: pt for pt in sw.points}
        held = sorted(points_dir.glob("*.toml")) if points_dir.is_dir() else []
        if not held:
            raise SweepError(f"{sweep_dir} has a {MANIFEST} but no points; give a new directory with --dir")
        for f in held:
            pt = mine.get(f.stem)
            if pt is None or spec.read_raw(f) != pt.raw:
                raise SweepError(
                    f"{sweep_dir} holds another sweep (point {f.stem} differs from this spec's); "
                    "give a new directory with --dir"
                )
        if len(held) == len(sw.points):
            return
    elif sweep_dir.exists() and any(sweep_dir.iterdir()):
        raise SweepError(f"{sweep_dir} exists and is not a sweep directory; give a new directory with --dir")
    # imported here: the lab VM's guest runs `cclab run` with Debian's Python, which has no tomli_w
    import tomli_w

    points_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / "runs").mkdir(exist_ok=True)
    for pt in sw.points:
        (points_dir / f"{pt.key}.toml").write_bytes(tomli_w.dumps(pt.raw).encode())
    write_manifest(sw, sweep_dir)


def default_dir(sw: Sweep) -> Path:
    return SWEEPS / sw.name


# --- running ------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One run handed to an executor."""

    key: str
    """The point's key (p003-r1)."""
    spec_file: Path
    """The point's spec, points/<key>.toml."""
    runs_dir: Path
    """Where its run directory goes: runs/<key>/."""
    plots: bool
    """Draw each run's plots/*.png (costs seconds per run)."""


@dataclass(frozen=True)
class TaskResult:
    """What an executor reports back for one run."""

    key: str
    """The point's key."""
    returncode: int
    """`cclab run`'s exit code: 0 complete, 130 interrupted, 2 an error (its one line in ``error``)."""
    error: str
    """The last line `cclab run` wrote on stderr, if it failed."""


@dataclass
class Progress:
    """Events of a running sweep, for the CLI to show."""

    total: int
    """Runs in the sweep."""
    skipped: int = 0
    """Runs already complete before this invocation."""
    done: int = 0
    """Runs finished by this invocation (complete or not)."""
    failed: list[str] = field(default_factory=list)
    """Keys whose run did not complete."""


Executor = Callable[[list[Task], Callable[[str], None], Callable[[TaskResult], None]], None]
"""Runs tasks; calls the first callback when one starts, the second when one ends."""


def pending(sw: Sweep, sweep_dir: Path, plots: bool = False) -> list[Task]:
    """The runs with no complete run directory yet: every point's first repetition, in grid order, before
    any point's second, so a sweep stopped part way (a campaign of many sessions) holds its whole grid at
    n or n + 1 runs instead of some points at full n and the rest at none."""
    return [
        Task(pt.key, sweep_dir / "points" / f"{pt.key}.toml", sweep_dir / "runs" / pt.key, plots)
        for pt in sorted(sw.points, key=lambda pt: (pt.rep, pt.index))
        if complete_run(sweep_dir, pt.key) is None
    ]


def run(
    sw: Sweep,
    sweep_dir: Path,
    executor: Executor,
    *,
    plots: bool = False,
    on_start: Callable[[str, Progress], None] | None = None,
    on_end: Callable[[TaskResult, Progress], None] | None = None,
) -> Progress:
    """Run every point x repetition that has no complete run; return what happened."""
    prepare(sw, sweep_dir)
    todo = pending(sw, sweep_dir, plots)
    prog = Progress(total=len(sw.points), skipped=len(sw.points) - len(todo))
    log.info("sweep %s: %d runs, %d already complete", sw.name, prog.total, prog.skipped)

    def started(key: str) -> None:
        if on_start:
            on_start(key, prog)

    def ended(res: TaskResult) -> None:
        prog.done += 1
        write_manifest(sw, sweep_dir)
        if complete_run(sweep_dir, res.key) is None:
            prog.failed.append(res.key)
            if not attempts(sweep_dir, res.key):  # refused before it created anything: so will every other run
                raise SweepError(f"{res.key}: {res.error or f'cclab run exited {res.returncode}'}")
        if on_end:
            on_end(res, prog)

    try:
        executor(todo, started, ended)
    finally:
        write_manifest(sw, sweep_dir)
    return prog

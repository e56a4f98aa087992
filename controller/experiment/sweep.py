"""Sweeps: a parameter grid over any spec field, with repetitions, each run its own experiment.

A spec with a ``[sweep]`` table is a sweep.  Every key of the table but
``repetitions`` is a dotted path into the spec's TOML document (``"bottleneck.per"``,
``"flows[0].algo"``, ``"topology.pairs"``) with the list of values it takes; the
grid is the product of those lists, in the table's order.  Each point is the
base document with its overrides applied, validated by ``spec.parse`` like any
spec, all of them before anything runs.

Repetition ``r`` of every point runs with the same derived seed (common random
numbers: points differ by the swept values only), drawn from the base spec's
``seed`` by numpy's SeedSequence and recorded in the sweep manifest.

The sweep directory holds ``sweep.json`` (grid, seeds, point -> run directory),
``points/<key>.toml`` (each point's spec as run) and ``runs/<key>/<run dir>``.
State lives in the run directories themselves (a run is complete when its
summary.json says so and its INCOMPLETE marker is gone), so a sweep that was
killed resumes by running what has no complete run; an incomplete run
directory is kept as it is, and the point gets a new one.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from controller import spec
from controller.results import rundir
from controller.spec import SpecError

log = logging.getLogger(__name__)

#: keys of [sweep] that are settings, not paths
RESERVED = ("repetitions",)
#: fields a grid may not sweep: the seed comes from repetitions, the name from the point
UNSWEEPABLE = ("seed", "name", "sweep")
MAX_REPETITIONS = 1000
MAX_RUNS = 100_000
MANIFEST = "sweep.json"
SWEEPS = rundir.RESULTS / "sweeps"

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")


class SweepError(ValueError):
    """A sweep that cannot run or resume; the message is one line."""


@dataclass(frozen=True)
class Point:
    """One run of a sweep: a grid point at one repetition."""

    index: int
    """Position of the grid point (row-major over the [sweep] paths in file order)."""
    rep: int
    """Repetition number, from 0."""
    values: tuple[tuple[str, Any], ...]
    """The swept paths and this point's value of each."""
    seed: int
    """The seed this run uses (the spec's ``seed``)."""
    raw: dict[str, Any] = field(compare=False)
    """The point's TOML document, as written to points/<key>.toml."""

    @property
    def key(self) -> str:
        return f"p{self.index:03d}-r{self.rep}"

    def describe(self) -> str:
        return ", ".join(f"{p}={v!r}" for p, v in self.values)


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: every point's spec has passed spec.parse."""

    name: str
    """The base spec's name; points are named <name>-<key>."""
    path: Path | None
    """File the sweep came from."""
    base: dict[str, Any]
    """The spec's TOML document without [sweep]."""
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    """Swept paths and their values, in the order of the grid."""
    repetitions: int
    """Runs per grid point."""
    base_seed: int
    """The base spec's seed, from which the repetitions' seeds are derived."""
    seeds: tuple[int, ...]
    """Seed of repetition r, the same at every grid point."""
    points: tuple[Point, ...]
    """Every run: grid points x repetitions, point-major."""

    @property
    def n_grid(self) -> int:
        return len(self.points) // self.repetitions


def _fail(name: str, value: object, allowed: str) -> SpecError:
    return SpecError(f"spec error: {name} = {value!r}: {allowed}")


def parse_path(path: str) -> list[str | int]:
    """``"flows[0].algo"`` -> ``["flows", 0, "algo"]``, or SpecError."""
    parts: list[str | int] = []
    for seg in path.split("."):
        m = _SEGMENT.fullmatch(seg)
        if m is None:
            raise _fail(f'sweep."{path}"', seg, 'not a field path; write e.g. "bottleneck.per" or "flows[0].algo"')
        parts.append(m[1])
        parts += [int(i) for i in re.findall(r"\[(\d+)\]", m[2])]
    return parts


def set_path(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set the field at ``path`` in a TOML document in place; missing tables are created, list items are not."""
    parts = parse_path(path)
    node: Any = doc
    where = ""
    for part, nxt in zip(parts, parts[1:] + [None]):
        here = f"{where}[{part}]" if isinstance(part, int) else (f"{where}.{part}" if where else part)
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                n = len(node) if isinstance(node, list) else 0
                raise _fail(f'sweep."{path}"', value, f"{where} has {n} entr{'y' if n == 1 else 'ies'}, so no {here}")
        elif not isinstance(node, dict):
            raise _fail(f'sweep."{path}"', value, f"{where} is not a table")
        if nxt is None:
            node[part] = copy.deepcopy(value)
            return
        if isinstance(part, str) and part not in node:
            if isinstance(nxt, int):
                raise _fail(f'sweep."{path}"', value, f"the base spec has no {here} to index")
            node[part] = {}
        node = node[part]
        where = here


def _flatten(table: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """[sweep] entries as (path, values): nested tables (``[sweep.bottleneck]``) join their keys with dots."""
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _flatten(value, path)
        else:
            yield path, value


def derive_seeds(base_seed: int, n: int) -> tuple[int, ...]:
    """n independent 63-bit seeds from one (numpy SeedSequence: reproducible, stable across numpy versions)."""
    children = np.random.SeedSequence(base_seed).spawn(n)
    return tuple(int(c.generate_state(1, np.uint64)[0]) >> 1 for c in children)


def _grid(table: dict[str, Any]) -> tuple[tuple[tuple[str, tuple[Any, ...]], ...], int]:
    reps = table.get("repetitions", 1)
    if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= MAX_REPETITIONS:
        raise _fail("sweep.repetitions", reps, f"must be a whole number from 1 to {MAX_REPETITIONS}")
    grid: list[tuple[str, tuple[Any, ...]]] = []
    for path, values in _flatten({k: v for k, v in table.items() if k not in RESERVED}):
        name = f'sweep."{path}"'
        if not isinstance(values, list) or not values:
            raise _fail(name, values, "must be a non-empty array of the values to sweep")
        seen: list[Any] = []
        for v in values:
            if v in seen:
                raise _fail(name, values, f"value {v!r} appears twice")
            seen.append(v)
        if parse_path(path)[0] in UNSWEEPABLE:
            why = "the seed comes from repetitions" if path == "seed" else "the sweep names its points itself"
            raise _fail(name, values, f"cannot be swept: {why}")
        if path in (p for p, _ in grid):
            raise _fail(name, values, "this field is swept twice ([sweep] and a [sweep.*] table)")
        grid.append((path, tuple(values)))
    if not grid:
        raise _fail("sweep", table, 'sweeps nothing; add e.g. "bottleneck.per" = [0, 1e-3]')
    return tuple(grid), reps


def from_raw(raw: dict[str, Any], path: Path | None = None) -> Sweep:
    """Validate a sweep document: the grid, then every point's spec through spec.parse, or raise SpecError."""
    table = raw.get("sweep")
    if not isinstance(table, dict):
        raise _fail("sweep", table, "must be a table ([sweep])")
    base = {k: v for k, v in raw.items() if k != "sweep"}
    grid, reps = _grid(table)
    base_spec = spec.parse(copy.deepcopy(base), path)
    seeds = derive_seeds(base_spec.seed, reps)
    combos = list(itertools.product(*(values for _, values in grid)))
    if len(combos) * reps > MAX_RUNS:
        raise _fail("sweep", f"{len(combos)} points x {reps}", f"at most {MAX_RUNS} runs in one sweep")
    points = []
    for index, combo in enumerate(combos):
        values = tuple((p, v) for (p, _), v in zip(grid, combo))
        for rep, seed in enumerate(seeds):
            doc = copy.deepcopy(base)
            for p, v in values:
                set_path(doc, p, v)
            pt = Point(index, rep, values, seed, doc)
            doc["name"] = f"{base_spec.name}-{pt.key}"
            doc["seed"] = seed
            try:
                spec.parse(copy.deepcopy(doc), path)
            except SpecError as exc:
                raise SpecError(f"{exc} (at sweep point {pt.key}: {pt.describe()})") from None
            points.append(pt)
    return Sweep(base_spec.name, path, base, grid, reps, base_spec.seed, seeds, tuple(points))


def load(path: Path) -> Sweep:
    """Read and validate a sweep spec file, or raise SpecError."""
    return from_raw(spec.read_raw(path), path)


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
    """The runs with no complete run directory yet, in grid order."""
    return [
        Task(pt.key, sweep_dir / "points" / f"{pt.key}.toml", sweep_dir / "runs" / pt.key, plots)
        for pt in sw.points
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

"""A sweep's grammar: the ``[sweep]`` table of a spec, parsed and validated into its points.

A spec with a ``[sweep]`` table is a sweep.  Every key of the table but
``repetitions`` is a dotted path into the spec's TOML document (``"bottleneck.per"``,
``"flows[0].algo"``, ``"topology.pairs"``) with the list of values it takes; the
grid is the product of those lists, in the table's order.  Each point is the
base document with its overrides applied, validated by ``spec.parse`` like any
spec, all of them before anything runs.

Repetition ``r`` of every point runs with the same derived seed (common random
numbers: points differ by the swept values only), drawn from the base spec's
``seed`` by numpy's SeedSequence and recorded in the sweep manifest.

Running a sweep (its directory, its executors) is controller.experiment.sweep's.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from controller.spec.fields import FIELDS
from controller.spec.model import SpecError
from controller.spec.model import fail as _fail
from controller.spec.parse import anchored, parse, read_raw, whole

#: keys of [sweep] that are settings, not paths
RESERVED = ("repetitions",)
#: fields a grid may not sweep: the seed comes from repetitions, the name from the point
UNSWEEPABLE = ("seed", "name", "sweep")
MAX_RUNS = 100_000
MANIFEST = "sweep.json"

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
    reps = whole(table, "repetitions", "sweep", FIELDS["sweep.repetitions"])
    assert reps is not None
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
    base_spec = parse(copy.deepcopy(base), path)
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
            # written to points/<key>.toml: the files it names must not move with it
            anchored(doc, path)
            pt = Point(index, rep, values, seed, doc)
            doc["name"] = f"{base_spec.name}-{pt.key}"
            doc["seed"] = seed
            try:
                parse(copy.deepcopy(doc), path)
            except SpecError as exc:
                raise SpecError(f"{exc} (at sweep point {pt.key}: {pt.describe()})") from None
            points.append(pt)
    return Sweep(base_spec.name, path, base, grid, reps, base_spec.seed, seeds, tuple(points))


def load(path: Path) -> Sweep:
    """Read and validate a sweep spec file, or raise SpecError."""
    return from_raw(read_raw(path), path)

"""Arrows run one way: the controller's packages import each other along the stages only.

`experiment` orchestrates and uses spec, network, dataplane, measure and results; none of those imports
`experiment`, `fabric`, the CLI or the benchmarks back; `spec` imports only `network` (its graph types) and
`system`; and no two packages import each other, directly or round a longer cycle.  Every import counts,
also one inside a function: it is the same arrow, only later.

A package is a folder under controller/ (controller/spec/ is "spec") or a module at its top
(controller/cli.py is "cli"); mininet/ and hosts/ are a package each.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

#: the folders read, and the package names their imports resolve under
ROOTS = ("controller", "mininet", "hosts")
#: package -> the only packages it may import (besides itself)
ONLY: dict[str, set[str]] = {
    "system": set(),
    "network": {"system"},
    "spec": {"network", "system"},
}
#: package -> packages it must never import: the stages below the orchestrator do not reach back up
NEVER: dict[str, set[str]] = {
    **{low: {"experiment", "fabric", "cli", "bench"} for low in ("spec", "network", "dataplane", "measure", "results")},
    **{p: {"cli", "bench"} for p in ("experiment", "fabric", "cc", "capabilities", "clean", "vm", "mininet", "hosts")},
}


@dataclass(frozen=True)
class Arrow:
    """One import of another package: where it is written and what it reaches."""

    src: str
    dst: str
    file: Path
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.src} -> {self.dst}"


def _package(rel: Path) -> str:
    """controller/spec/parse.py -> spec; controller/cli.py -> cli; mininet/topologies.py -> mininet."""
    parts = rel.with_suffix("").parts
    if parts[0] != "controller":
        return parts[0]
    return parts[1] if len(parts) > 2 or parts[1] != "__init__" else "controller"


def _targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The packages of ROOTS one import statement reaches (any depth in the file, function-local too)."""
    if isinstance(node, ast.Import):
        dotted = [a.name for a in node.names]
    elif node.level or node.module is None:
        raise AssertionError(f"relative import at line {node.lineno}: write it absolute")
    elif node.module == "controller":  # from controller import cc, system
        dotted = [f"controller.{a.name}" for a in node.names]
    else:
        dotted = [node.module]
    out = []
    for name in dotted:
        parts = name.split(".")
        if parts[0] == "controller" and len(parts) > 1:
            out.append(parts[1])
        elif parts[0] in ("mininet", "hosts") and len(parts) > 1 and (REPO / parts[0] / f"{parts[1]}.py").exists():
            out.append(parts[0])  # not `mininet.net`, `mininet.node`, ...: Mininet's own package
    return out


def arrows(root: Path) -> list[Arrow]:
    """Every import from one package to another under `root`, with its file and line."""
    out = []
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root)
            if ".venv" in rel.parts or "guest_tests" in rel.parts:
                continue
            src = _package(rel)
            for node in ast.walk(ast.parse(path.read_text(), str(rel))):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    out += [Arrow(src, dst, rel, node.lineno) for dst in _targets(node) if dst != src]
    return out


def backward(found: list[Arrow]) -> list[str]:
    """The arrows the rules forbid, each with its file and line."""
    bad = []
    for a in found:
        if a.src in ONLY and a.dst not in ONLY[a.src]:
            bad.append(f"{a}: {a.src} imports only {', '.join(sorted(ONLY[a.src])) or 'nothing of cclab'}")
        elif a.dst in NEVER.get(a.src, set()):
            bad.append(f"{a}: {a.src} must not import {a.dst} (arrows run one way)")
    return bad


def cycles(found: list[Arrow]) -> list[str]:
    """Each cycle between packages (a strongly connected set of two or more), with the arrows that close it."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a in found:
        graph[a.src].add(a.dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    sccs: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    for v in sorted(set(graph)):
        if v not in index:
            visit(v)
    return [
        f"cycle {' <-> '.join(sorted(c))}: " + "; ".join(str(a) for a in found if a.src in c and a.dst in c)
        for c in sccs
    ]


def test_no_backward_arrow_and_no_cycle_between_packages() -> None:
    found = arrows(REPO)
    problems = backward(found) + cycles(found)
    assert not problems, "\n".join(problems)


def test_the_rules_name_packages_that_exist_and_the_scan_sees_the_orchestrator() -> None:
    """A renamed package must not leave a rule about nothing; the scan must see imports at all."""
    found = arrows(REPO)
    packages = {a.src for a in found} | {a.dst for a in found}
    named = set(ONLY) | set(NEVER) | {d for s in (*ONLY.values(), *NEVER.values()) for d in s}
    assert not named - packages, f"rules name packages that are not there: {sorted(named - packages)}"
    uses = {a.dst for a in found if a.src == "experiment"}
    assert {"spec", "network", "dataplane", "measure", "results"} <= uses, uses


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        f = tmp_path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("files", "needle"),
    [
        ({"controller/results/report.py": "from controller.experiment.sweep import MANIFEST\n"}, "report.py:1"),
        ({"controller/spec/parse.py": "import math\n\ndef f():\n    from controller.dataplane import delay\n"},
         "controller/spec/parse.py:4: spec -> dataplane"),
        ({"controller/spec/schema.py": "from controller import measure\n"}, "spec imports only"),
        ({"controller/cc.py": "from controller import capabilities\n",
          "controller/capabilities.py": "from controller import cc\n"}, "cycle capabilities <-> cc"),
    ],
    ids=["backward", "function-local", "spec-only", "cycle"],
)  # fmt: skip
def test_the_check_finds_a_backward_import_or_a_cycle(tmp_path: Path, files: dict[str, str], needle: str) -> None:
    """The scan over a small tree with one bad arrow names it, with its file and line."""
    found = arrows(_tree(tmp_path, files))
    problems = backward(found) + cycles(found)
    assert any(needle in p for p in problems), problems

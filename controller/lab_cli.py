"""`cclab lab list | start N [DIR] | check N [RUN_DIR...]`: the course labs on the terminal (controller.lab does the
work, this module prints)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from controller import lab

out = Console()


def add_parser(sub: Any) -> None:
    """The `lab` subcommand, on the CLI's subparsers."""
    p = sub.add_parser("lab", help="course labs: list, start one in a working folder, check a student's runs")
    lsub = p.add_subparsers(dest="lab_cmd", required=True, metavar="ACTION")
    lsub.add_parser("list", help="the labs, by number")
    s = lsub.add_parser("start", help="copy a lab's handout and starter files into a working folder")
    s.add_argument("number", type=int, metavar="N")
    s.add_argument("dir", nargs="?", metavar="DIR", help="working folder (default labN in the current folder)")
    c = lsub.add_parser(
        "check",
        help="check a lab's runs: pass or fail per check, exit 1 on a failure",
        description="Check lab N. With no RUN_DIR, the working folder's runs/ (the current folder, or --dir) is "
        "read, after its starter files are checked for TODOs left; a lab with a P4 program runs the data-plane "
        "contract's clauses on BMv2 against the working folder's program. Options come before N: "
        "cclab lab check --json 1 RUN_DIR...",
    )
    c.add_argument("number", type=int, metavar="N")
    c.add_argument("runs", nargs="*", metavar="RUN_DIR", help="run directories, or folders holding them")
    c.add_argument("--dir", metavar="DIR", help="the working folder (default: the current folder)")
    c.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    c.add_argument(
        "--only",
        action="append",
        metavar="ID",
        help="check only this check id (repeat for more): a lab with a P4 program then runs only their clauses",
    )
    p.set_defaults(func=_cmd_lab)


def _cmd_lab(args: argparse.Namespace) -> int:
    if args.lab_cmd == "list":
        t = Table("lab", "title", "folder")
        for x in lab.all_labs():
            t.add_row(str(x.number), x.title, str(x.dir.relative_to(lab.REPO)))
        out.print(t)
        return 0
    chosen = lab.find(args.number)
    if args.lab_cmd == "start":
        work = Path(args.dir or f"lab{chosen.number}")
        lab.start(chosen, work)
        out.print(f"lab {chosen.number}, {chosen.title}: started in {work}/")
        out.print(f"  read {work}/README.md, then fill in the TODOs of: {', '.join(chosen.starter)}")
        out.print(f"  cclab lab check {chosen.number} (in {work}/) says what is left")
        return 0
    if args.only:
        chosen = lab.only(chosen, args.only)
    return _check(chosen, args)


def _check(chosen: lab.Lab, args: argparse.Namespace) -> int:
    work = Path(args.dir or ".")
    started = lab.lab_of(work) == chosen.number
    left = lab.todos(chosen, work) if started else []
    verdict: dict[str, Any] = {"lab": chosen.number, "todos": left, "checks": []}
    if left:
        verdict["passed"] = False
        verdict["message"] = "the starter files still have TODOs: fill them in (README.md says how), then run"
        if args.json:
            print(json.dumps(verdict))
        else:
            out.print(f"lab {chosen.number}: {len(left)} TODO(s) left; fill them in (README.md, Steps), then run:")
            for line in left:
                out.print(f"  {line}", markup=False, highlight=False)
        return 1
    dirs = [Path(r) for r in args.runs] or [work / lab.RUNS]
    runs = lab.find_runs(chosen, [d for d in dirs if d.exists()])
    clauses = None
    if chosen.program is not None:  # the contract's clauses, on BMv2, against the working folder's program
        program = work / chosen.program
        verdict["program"] = str(program)
        if not args.json:
            out.print(
                f"running {', '.join(chosen.clauses)} of the data-plane contract on BMv2 against {program} "
                "(the conformance suite, docs/conformance.md; about a minute)",
                highlight=False,
            )
        clauses = lab.run_clauses(chosen.clauses, program)
    results = lab.evaluate(chosen, runs, clauses)
    verdict["runs"] = {name: str(path) for name, path in runs.items()}
    verdict["unfaithful_runs"] = lab.unfaithful(runs)
    verdict["checks"] = [r.__dict__ for r in results]
    verdict["passed"] = all(r.passed for r in results)
    if args.json:
        print(json.dumps(verdict))
        return 0 if verdict["passed"] else 1
    missing = [name for name in chosen.runs if name not in runs]
    if missing:
        out.print(f"no complete run of {', '.join(missing)} in {', '.join(map(str, dirs))}", highlight=False)
    t = Table("check", "question", "", "value", "expected", title=f"lab {chosen.number}: {chosen.title}")
    for r in results:
        value = "-" if r.value is None else f"{r.value:.4g}"
        t.add_row(r.id, str(r.question), "pass" if r.passed else "[red]FAIL[/red]", value, f"{r.min:g} .. {r.max:g}")
    out.print(t)
    for r in results:
        if not r.passed:
            out.print(f"{r.id} (question {r.question}): {r.message}", markup=False, highlight=False)
    for name, notes in verdict["unfaithful_runs"].items():
        out.print(
            f"{name} ({runs[name]}) failed its fidelity check: {notes}; the emulator did not hold the spec there, "
            "so its figures may mislead: run it again",
            markup=False,
            highlight=False,
        )
    out.print(f"{sum(r.passed for r in results)} of {len(results)} checks pass")
    return 0 if verdict["passed"] else 1

"""A BMv2 program of one's own: a spec's p4_program, `cclab p4 build`, and what the bmv2 driver needs of a program.

The spec's refusals need nothing; compiling needs p4c-bm2-ss (marked bmv2, skipped with the reason where it is
missing; no root: nothing runs). The program run in a real network is tests/test_labs.py's (lab 5).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller import spec
from controller.dataplane import bmv2
from controller.experiment import preflight
from controller.spec import SpecError, tomllib

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "labs" / "05-p4"
needs_p4c = pytest.mark.skipif(shutil.which(bmv2.P4C) is None, reason=f"{bmv2.P4C} not on PATH (install p4c)")
SPEC = """
name = "own"
duration_s = 5
dataplane = "{dataplane}"
{extra}
[bottleneck]
rate_mbps = 10
[[flows]]
algo = "reno"
src = "h1"
dst = "r1"
"""


@pytest.mark.parametrize(
    ("dataplane", "extra", "needle"),
    [
        ("kernel", 'p4_program = "solution/bottleneck.p4"', 'needs dataplane = "bmv2"'),
        ("bmv2", 'p4_program = "solution/analyze.py"', ".p4 source"),
        ("bmv2", "p4_program = 4", ".p4 source"),
        ("bmv2", 'p4_program = "no_such.p4"', "no such file"),
    ],
)
def test_spec_refuses_a_bad_program_in_one_line(dataplane: str, extra: str, needle: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec.parse(tomllib.loads(SPEC.format(dataplane=dataplane, extra=extra)), LAB / "spec.toml")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("spec error: p4_program = ") and needle in msg, msg


def test_spec_takes_a_program_relative_to_the_spec() -> None:
    s = spec.load(LAB / "solution" / "lossy.toml")
    assert s.p4_program == LAB / "solution" / "bottleneck.p4"
    assert spec.load(REPO / "experiments" / "demo.toml").p4_program is None


@pytest.mark.bmv2
@needs_p4c
def test_the_programs_of_lab_5(tmp_path: Path) -> None:
    """The solution has all the driver needs but RED's table; the starter compiles, and what it lacks is named: the
    key of flow_stats (its counters are declared, used or not)."""
    solution = bmv2.compile_program(LAB / "solution" / "bottleneck.p4", tmp_path / "solution")
    assert bmv2.program_problems(solution.p4info) == []
    red = bmv2.program_problems(solution.p4info, red=True)
    assert red == ["no table red_params (the controller writes its entries)"]
    starter = bmv2.compile_program(LAB / "bottleneck.p4", tmp_path / "starter")
    problems = bmv2.program_problems(starter.p4info)
    assert len(problems) == 1 and problems[0].startswith("table flow_stats matches on nothing"), problems
    again = bmv2.program_files(solution.json, tmp_path / "unused")
    assert (again.json, again.p4info) == (solution.json, solution.p4info)
    with pytest.raises(bmv2.Bmv2Error, match="a P4 source"):
        bmv2.program_files(LAB / "README.md", tmp_path)


@pytest.mark.bmv2
@needs_p4c
def test_a_program_without_a_counter_is_refused_before_a_run(tmp_path: Path) -> None:
    """A spec whose program lacks a counter the driver reads is refused by the runner's p4_program step, in one line
    naming the counter, before anything is built."""
    text = (LAB / "solution" / "bottleneck.p4").read_text().replace("random_drops", "lost")
    (tmp_path / "renamed.p4").write_text(text)
    extra = 'p4_program = "renamed.p4"'
    s = spec.parse(tomllib.loads(SPEC.format(dataplane="bmv2", extra=extra)), tmp_path / "spec.toml")
    with pytest.raises(preflight.RunError) as exc:
        preflight.p4_program(s, tmp_path / "out")
    msg = str(exc.value)
    assert "\n" not in msg and "no counter random_drops" in msg, msg


@pytest.mark.bmv2
@needs_p4c
def test_cclab_p4_build_prints_the_compilers_output(tmp_path: Path) -> None:
    """A program that does not compile: the compiler's lines on stdout, one line on stderr, exit 2, no traceback;
    one that does: built, with the files a spec runs."""
    broken = tmp_path / "broken.p4"
    broken.write_text((LAB / "solution" / "bottleneck.p4").read_text().replace("pass();", "pass()"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cli = [sys.executable, "-m", "controller.cli", "p4", "build"]
    proc = subprocess.run([*cli, str(broken)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "broken.p4 does not compile" in proc.stderr, proc.stderr
    assert "error" in proc.stdout, proc.stdout
    good = tmp_path / "bottleneck.p4"
    shutil.copyfile(LAB / "solution" / "bottleneck.p4", good)
    proc = subprocess.run([*cli, str(good)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = tmp_path / "build"
    assert (built / "bottleneck.json").exists() and (built / "bottleneck.p4info.txtpb").exists(), proc.stdout

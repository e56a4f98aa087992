"""The course labs (labs/NN-name/): every check.toml is sound and tied to its handout; a lab's starter files fail
the checker with the TODOs they leave, not a traceback; the handout's command blocks run as written and, with
the solution's files in place of the student's, pass every check; the lab's deliberately wrong variant fails the
check meant to catch it."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import lab

REPO = Path(__file__).resolve().parents[1]
CCLAB = [sys.executable, "-m", "controller.cli"]
LABS = lab.all_labs()
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)

pytestmark = pytest.mark.lab


def cclab(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([*CCLAB, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def blocks(handout: Path) -> list[str]:
    """The ```sh blocks of a handout, in order."""
    return BLOCK.findall(handout.read_text())


@pytest.mark.parametrize("x", LABS, ids=lambda x: x.dir.name)
def test_lab_is_complete(x: lab.Lab) -> None:
    """A handout, starters with TODOs, a solution of each without, a wrong variant; every check names a question
    the handout asks and says where its range comes from."""
    readme = (x.dir / "README.md").read_text()
    questions = readme.split("## Questions", 1)[1]
    for c in x.checks:
        assert f"`{c.id}`" in questions, f"{c.id}: the handout's questions do not name this check"
        assert re.search(rf"^{c.question}\. ", questions, re.M), f"{c.id}: the handout has no question {c.question}"
        assert c.basis and c.why, f"{c.id}: no basis or no reason for its range"
    for name in x.starter:
        assert lab.TODO.search((x.dir / name).read_text()), f"starter {name} has no TODO"
        assert not lab.TODO.search((x.dir / "solution" / name).read_text()), f"solution/{name} has a TODO left"
    assert list((x.dir / "wrong").iterdir()), "no deliberately wrong variant"
    assert blocks(x.dir / "README.md"), "the handout has no ```sh block"


@pytest.mark.parametrize("x", LABS, ids=lambda x: x.dir.name)
def test_starter_fails_with_its_todos(x: lab.Lab, tmp_path: Path) -> None:
    """Checking a lab just started lists the TODOs left (file and line) and exits 1, in words and in JSON."""
    proc = cclab("lab", "start", str(x.number), "work", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "README.md" in proc.stdout
    work = tmp_path / "work"
    proc = cclab("lab", "check", str(x.number), cwd=work)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "TODO" in proc.stdout and f"{x.starter[0]}:" in proc.stdout, proc.stdout
    proc = cclab("lab", "check", str(x.number), "--json", "--dir", "work", cwd=tmp_path)
    verdict = json.loads(proc.stdout)
    assert proc.returncode == 1 and not verdict["passed"] and verdict["todos"], verdict
    again = cclab("lab", "start", str(x.number), "work", cwd=tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr and "Traceback" not in again.stderr, again.stderr


def test_unknown_lab_is_one_line(tmp_path: Path) -> None:
    proc = cclab("lab", "check", "99", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("cclab: lab 99: no such lab"), proc.stderr


def test_no_runs_fails_every_check(tmp_path: Path) -> None:
    """A finished working folder without runs fails each check, saying which run is missing."""
    x = LABS[0]
    assert cclab("lab", "start", str(x.number), "work", cwd=tmp_path).returncode == 0
    for name in x.starter:
        shutil.copyfile(x.dir / "solution" / name, tmp_path / "work" / name)
    proc = cclab("lab", "check", str(x.number), "--json", cwd=tmp_path / "work")
    verdict = json.loads(proc.stdout)
    assert proc.returncode == 1 and len(verdict["checks"]) == len(x.checks), verdict
    assert all(not c["passed"] and "no complete run named" in c["message"] for c in verdict["checks"]), verdict


# --- the metrics, on a run's files written here ------------------------------------------------------------------


def _run_files(run: Path, flows: list[dict[str, object]], cwnd: list[dict[str, object]]) -> Path:
    run.mkdir()
    for name, rows in (("flows.csv", flows), ("cwnd.csv", cwnd)):
        with (run / name).open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return run


def _samples(flow: str, windows: list[tuple[int, int]]) -> list[dict[str, object]]:
    return [
        {"t_s": i / 10, "flow": flow, "cwnd_pkts": w, "ssthresh_pkts": ss, "srtt_us": 40_000, "mss": 1448}
        for i, (w, ss) in enumerate(windows)
    ]


def test_cut_factor_is_the_new_ssthresh_over_the_window_before(tmp_path: Path) -> None:
    """Reno's halving reads 0.5, a window kept on a loss 1; a flow that never set its ssthresh has none."""
    inf = 2147483647
    halves = [(10, inf), (20, inf), (30, inf), (16, 15), (20, 15), (24, 15), (12, 12), (14, 12)]
    keeps = [(10, inf), (30, inf), (30, 30), (31, 30), (32, 30), (32, 32)]
    flows = [{"id": f, "throughput_bps": 1e6, "packets": 1000, "random_drops": 0, "queue_drops": 0} for f in "abc"]
    cwnd = _samples("a", halves) + _samples("b", keeps) + _samples("c", [(10, inf), (20, inf)])
    run = _run_files(tmp_path / "run", flows, cwnd)
    assert lab.cut_factor(run, "a") == 0.5
    assert lab.cut_factor(run, "b") == 1.0
    with pytest.raises(lab.LabError, match="'c' never set its ssthresh"):
        lab.cut_factor(run, "c")


def test_mathis_model_from_the_flows_own_mss_rtt_and_loss_rate(tmp_path: Path) -> None:
    """p = drops over packets sent, RTT the median srtt, MSS from cwnd.csv: (MSS / RTT) sqrt(3 / 2p), in Mbit/s."""
    flows = [
        {"id": "f1", "throughput_bps": 3e6, "packets": 9900, "random_drops": 99, "queue_drops": 1},
        {"id": "f2", "throughput_bps": 3e6, "packets": 9900, "random_drops": 0, "queue_drops": 0},
    ]
    run = _run_files(tmp_path / "run", flows, _samples("f1", [(10, 5)] * 3) + _samples("f2", [(10, 5)] * 3))
    expect = 1448 * 8 / 0.040 * math.sqrt(3 / (2 * 0.01)) / 1e6  # 3.547 Mbit/s
    assert lab.loss_rate(run, "f1") == pytest.approx(0.01)
    assert lab.mathis_mbps(run, "f1") == pytest.approx(expect)
    assert lab.over_mathis(run, "f1") == pytest.approx(3.0 / expect)
    with pytest.raises(lab.LabError, match="lost no packet"):
        lab.mathis_mbps(run, "f2")
    with pytest.raises(lab.LabError, match="no mathis_by_hand.txt"):
        lab.mathis_by_hand_error(run, "f1")
    (run / "mathis_by_hand.txt").write_text(f"{expect * 8}\n")  # bits counted as bytes: eight times too much
    assert lab.mathis_by_hand_error(run, "f1") == pytest.approx(7.0)


# --- real runs: the handout as written, then the wrong variant --------------------------------------------------


@pytest.fixture(scope="module", params=LABS, ids=lambda x: x.dir.name)
def handout_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[lab.Lab, Path]]:
    """The handout's ```sh blocks, run in order in one shell in a fresh folder, with the solution's files copied
    over the starters right after the first block (the student's edits): the working folder it leaves."""
    from tests.conftest import missing_capability

    reason = missing_capability()
    if reason:
        pytest.skip(reason)
    x: lab.Lab = request.param
    tmp = tmp_path_factory.mktemp(x.dir.name)
    first, *rest = blocks(x.dir / "README.md")
    edits = "".join(f"cp {x.dir / 'solution' / name} {name}\n" for name in x.starter)
    script = f"set -euo pipefail\n{first}\n{edits}" + "\n".join(rest)
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(["bash", "-c", script], cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"a handout block failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    work = tmp / f"lab{x.number}"  # the handouts start lab N in labN
    assert lab.lab_of(work) == x.number, f"the handout's first block does not start the lab in {work.name}/"
    yield x, work


@pytest.mark.root
@pytest.mark.slow
def test_handout_runs_and_solution_passes(handout_run: tuple[lab.Lab, Path]) -> None:
    """Every command of the handout runs; the last is the checker, and the solution passes each check."""
    x, work = handout_run
    proc = cclab("lab", "check", str(x.number), "--json", cwd=work)
    verdict = json.loads(proc.stdout)
    failed = {c["id"]: (c["value"], c["message"]) for c in verdict["checks"] if not c["passed"]}
    assert proc.returncode == 0 and not failed, f"the solution fails: {failed}"


#: lab number -> the check its wrong variant must fail
WRONG_CAUGHT_BY = {1: "rtt-q5", 2: "jain-mixed", 3: "westwood-gain", 4: "backs-off"}


@pytest.mark.root
@pytest.mark.slow
def test_wrong_variant_is_caught(handout_run: tuple[lab.Lab, Path], tmp_path: Path) -> None:
    """The wrong variant's runs, beside the solution's runs of the other specs, fail the check meant for it."""
    x, work = handout_run
    wrong = sorted((x.dir / "wrong").glob("*.toml"))
    for spec in wrong:
        proc = cclab("run", str(spec), "--no-live", "--no-plots", "--results", str(tmp_path), cwd=REPO)
        assert proc.returncode == 0, proc.stderr
    solution_runs = lab.find_runs(x, [work / lab.RUNS])
    wrong_runs = lab.find_runs(x, [tmp_path])
    runs = [str(p) for name, p in solution_runs.items() if name not in wrong_runs]
    proc = cclab("lab", "check", "--json", str(x.number), *runs, str(tmp_path), cwd=REPO)
    assert proc.stdout, proc.stderr
    verdict = json.loads(proc.stdout)
    failed = [c["id"] for c in verdict["checks"] if not c["passed"]]
    assert proc.returncode == 1 and WRONG_CAUGHT_BY[x.number] in failed, verdict

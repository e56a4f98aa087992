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
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller import lab
from tests.conftest import BMV2_MISSING, BMV2_SKIP_REASON
from tests.timing import TRIED_AGAIN

REPO = Path(__file__).resolve().parents[1]
CCLAB = [sys.executable, "-m", "controller.cli"]
LABS = lab.all_labs()
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)
#: a lab whose student writes a P4 program runs its clauses on BMv2: its real runs are in the bmv2 tier too
NEEDS_BMV2 = [pytest.mark.bmv2, pytest.mark.skipif(bool(BMV2_MISSING), reason=BMV2_SKIP_REASON)]
RUNNING = [pytest.param(x, id=x.dir.name, marks=NEEDS_BMV2 if x.program else []) for x in LABS]

pytestmark = pytest.mark.lab


def cclab(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([*CCLAB, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


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
    proc = cclab("lab", "check", "--only", "no-such-check", "1", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("cclab: lab 1: no check 'no-such-check'"), proc.stderr


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


def test_a_run_that_failed_its_fidelity_check_is_named(tmp_path: Path) -> None:
    """A run the emulator did not hold to its spec is graded as it is, and named with its fidelity notes and the
    advice to run it again: in the verdict's unfaithful_runs and on screen."""
    x = LABS[0]
    assert cclab("lab", "start", str(x.number), "work", cwd=tmp_path).returncode == 0
    for name in x.starter:
        shutil.copyfile(x.dir / "solution" / name, tmp_path / "work" / name)
    note = "backlogged_rate_over_rate = 0.9 outside [0.98, 1.02]"
    for i, name in enumerate(x.runs):
        run = tmp_path / "work" / "runs" / f"{name}-1"
        run.mkdir(parents=True)
        fidelity = {"ok": i != 0, "notes": [] if i else [note]}
        (run / "summary.json").write_text(json.dumps({"name": name, "complete": True, "fidelity": fidelity}))
    verdict = json.loads(cclab("lab", "check", str(x.number), "--json", cwd=tmp_path / "work").stdout)
    assert verdict["unfaithful_runs"] == {x.runs[0]: note}, verdict
    said = cclab("lab", "check", str(x.number), cwd=tmp_path / "work").stdout
    assert f"{x.runs[0]} (" in said and "failed its fidelity check" in said and "run it again" in said, said


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


def test_clause_verdicts_from_the_suites_report() -> None:
    """A JUnit report of the conformance suite, per clause: a clause passes only if each of its tests passed (a
    parametrized clause fails with either unit); a failure gives its first line, a fixture's error its exception,
    a skip its reason; tests of no clause are not read."""
    report = """<testsuites><testsuite>
      <testcase name="test_c_cnt_1_counters_keyed_by_exact_5tuple[bmv2]"/>
      <testcase name="test_c_loss_1_random_loss_in_binomial_interval[bmv2]">
        <failure message="AssertionError: forwarded 5000 + random drops 251 != 5000&#10;assert 5251 == 5000">x</failure>
      </testcase>
      <testcase name="test_c_queue_3_red_drop_probability_follows_the_average[bmv2-pkts]"/>
      <testcase name="test_c_queue_3_red_drop_probability_follows_the_average[bmv2-bytes]">
        <error message='failed on setup with "controller.dataplane.bmv2.CompileError: mine.p4 does not compile"'/>
      </testcase>
      <testcase name="test_c_run_2_loss_change[bmv2]"><skipped message="needs root (network namespaces)"/></testcase>
      <testcase name="test_the_parsers_see_the_suite"/>
    </testsuite></testsuites>"""
    got = lab._clause_verdicts(ET.fromstring(report))
    assert got == {
        "C-CNT-1": (True, ""),
        "C-LOSS-1": (False, "AssertionError: forwarded 5000 + random drops 251 != 5000"),
        "C-QUEUE-3": (False, "controller.dataplane.bmv2.CompileError: mine.p4 does not compile"),
        "C-RUN-2": (False, "skipped: needs root (network namespaces)"),
    }, got
    five = lab.find(5)
    results = {r.id: r for r in lab.evaluate(five, {}, got)}
    assert results["exact-5-tuple"].passed and results["exact-5-tuple"].value == 1.0
    assert "C-LOSS-1 fails: AssertionError: forwarded 5000" in results["random-loss"].message
    assert "C-CNT-2 was not run" in results["undeclared-apart"].message


def test_mptcp_and_loss_metrics_read_the_runs_files(tmp_path: Path) -> None:
    """A connection's throughput is its subflows' in summary.json (a single flow's its own row); coupled is the
    summary's verdict; the random loss rate is random drops over the packets that left the queue; the counted
    wire bytes over the payload iperf3's receiver read."""
    flows = [
        {"id": "f1.1", "flow": "f1", "throughput_bps": 3e6, "packets": 990, "random_drops": 10, "queue_drops": 5,
         "iperf_goodput_bps": "", "bytes": 1},
        {"id": "f1.2", "flow": "f1", "throughput_bps": 2e6, "packets": 500, "random_drops": 0, "queue_drops": 0,
         "iperf_goodput_bps": "", "bytes": 1},
        {"id": "f2", "flow": "f2", "throughput_bps": 4.2e6, "packets": 800, "random_drops": 0, "queue_drops": 0,
         "iperf_goodput_bps": 4e6, "bytes": 1_045_600},
    ]  # fmt: skip
    run = _run_files(tmp_path / "run", flows, _samples("f2", [(10, 5)]))
    mptcp = [{"id": "f1", "throughput_bps": 5e6, "coupling": {"coupled": False}}]
    (run / "summary.json").write_text(json.dumps({"mptcp": mptcp}))
    assert lab.connection_mbps(run, "f1") == 5.0 and lab.connection_mbps(run, "f2") == 4.2
    assert lab.coupled(run, "f1") == 0.0
    with pytest.raises(lab.LabError, match="not an MPTCP connection"):
        lab.coupled(run, "f2")
    assert lab.random_loss_rate(run, "f1.1") == pytest.approx(0.01)
    (run / "iperf").mkdir()
    (run / "iperf" / "f2.server.json").write_text(json.dumps({"end": {"sum_received": {"bytes": 1_000_000}}}))
    assert lab.wire_over_payload(run, "f2") == pytest.approx(1.0456)
    with pytest.raises(lab.LabError, match="no receiver's byte count for flow 'f1.1'"):
        lab.wire_over_payload(run, "f1.1")


# --- real runs: the handout as written, then the wrong variant --------------------------------------------------


@pytest.fixture(scope="module", params=RUNNING)
def handout_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[lab.Lab, Path, str]]:
    """The handout's ```sh blocks, run in order in one shell in a fresh folder, with the solution's files copied
    over the starters right after the first block (the student's edits): the working folder it leaves, and what the
    blocks printed.  Where the checker failed and named a run that failed its fidelity check (the emulator did not
    hold the spec: it tells the student to run it again), the handout is done once more in a fresh folder, as a
    student would, and the try is printed at the end of the session; a failure with every run faithful is final."""
    from tests.conftest import missing_capability

    reason = missing_capability()
    if reason:
        pytest.skip(reason)
    x: lab.Lab = request.param
    first, *rest = blocks(x.dir / "README.md")
    edits = "".join(f"cp {x.dir / 'solution' / name} {name}\n" for name in x.starter)
    script = f"set -euo pipefail\n{first}\n{edits}" + "\n".join(rest)
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    for attempt in range(1, HANDOUT_TRIES + 1):
        tmp = tmp_path_factory.mktemp(x.dir.name)
        proc = subprocess.run(["bash", "-c", script], cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
        work = tmp / f"lab{x.number}"  # the handouts start lab N in labN
        failed = f"a handout block failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        unfaithful = _unfaithful_runs(x, work) if proc.returncode != 0 else {}
        if proc.returncode == 0 or not unfaithful or attempt == HANDOUT_TRIES:
            break
        TRIED_AGAIN.append(
            f"{os.environ.get('PYTEST_CURRENT_TEST', '?').rsplit(' ', 1)[0]}: lab {x.number}'s handout, try {attempt} "
            f"of {HANDOUT_TRIES} failed its check with runs that failed their fidelity check: {unfaithful}"
        )
    assert proc.returncode == 0, failed
    assert lab.lab_of(work) == x.number, f"the handout's first block does not start the lab in {work.name}/"
    yield x, work, proc.stdout


#: how many times a lab's handout is done where its check failed beside a run that failed its fidelity check
HANDOUT_TRIES = 2


def _unfaithful_runs(x: lab.Lab, work: Path) -> dict[str, Any]:
    """The runs the checker names as having failed their fidelity check, in a handout's working folder (none where
    the folder or the checker's verdict is missing)."""
    if not work.is_dir():
        return {}
    proc = cclab("lab", "check", "--json", str(x.number), cwd=work)
    try:
        return dict(json.loads(proc.stdout).get("unfaithful_runs") or {})
    except ValueError:
        return {}


@pytest.mark.root
@pytest.mark.slow
def test_handout_runs_and_solution_passes(handout_run: tuple[lab.Lab, Path, str]) -> None:
    """Every command of the handout runs; the last is the checker, and the solution passes each check (as the
    checker said, exiting 0, in the handout's own run: a check that failed would have failed the fixture, with the
    checker's table and each failure's reason in its message)."""
    x, _work, said = handout_run
    assert blocks(x.dir / "README.md")[-1].strip() == f"cclab lab check {x.number}", "the last block is not the check"
    n = len(x.checks)
    assert f"{n} of {n} checks pass" in said, f"the checker did not pass every check:\n{said[-3000:]}"


#: lab number -> the check its wrong variant must fail (lab 6's cubic subflows: `coupled`, exact; its no-harm ratio
#: fell inside the solution's range in 2 of 6 runs)
WRONG_CAUGHT_BY = {1: "rtt-q5", 2: "jain-mixed", 3: "westwood-gain", 4: "backs-off", 5: "random-loss", 6: "coupled"}


@pytest.mark.root
@pytest.mark.slow
def test_wrong_variant_is_caught(handout_run: tuple[lab.Lab, Path, str], tmp_path: Path) -> None:
    """The wrong variant's runs, beside the solution's runs of the other specs, fail the check meant for it; a lab's
    wrong program (a P4 program the clauses run against) takes the student's place in a working folder."""
    x, work, _said = handout_run
    results, folder = tmp_path / "runs", tmp_path / "work"
    folder.mkdir()
    for name in x.starter:
        wrong = x.dir / "wrong" / name
        shutil.copyfile(wrong if wrong.exists() else x.dir / "solution" / name, folder / name)
    for spec in sorted((x.dir / "wrong").glob("*.toml")):
        proc = cclab("run", str(spec), "--no-live", "--no-plots", "--results", str(results), cwd=REPO)
        assert proc.returncode == 0, proc.stderr
    solution_runs = lab.find_runs(x, [work / lab.RUNS])
    wrong_runs = lab.find_runs(x, [results]) if results.exists() else {}
    runs = [str(p) for name, p in solution_runs.items() if name not in wrong_runs]
    runs += [str(results)] if wrong_runs else []
    caught_by = WRONG_CAUGHT_BY[x.number]
    proc = cclab("lab", "check", "--json", "--only", caught_by, "--dir", str(folder), str(x.number), *runs, cwd=REPO)
    assert proc.stdout, proc.stderr
    verdict = json.loads(proc.stdout)
    failed = [c["id"] for c in verdict["checks"] if not c["passed"]]
    assert proc.returncode == 1 and failed == [caught_by], verdict

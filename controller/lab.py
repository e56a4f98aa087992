"""The course labs under labs/NN-name/: list them, copy a lab's starter files into a working folder, and check
a student's runs against the lab's check.toml.

A lab's check.toml names the runs it reads (by the spec's `name`), the starter files a student fills in, and one
[[check]] per question of the handout: a metric of one run (a registered function over the run's summary.json,
flows.csv or cwnd.csv, see METRICS), optionally divided by the same metric of another run, held to [min, max].
Each check states the reason for its range (`why`) and where the range comes from (`basis`: the solution's runs).

A lab whose student writes a data-plane program (check.toml's `program`, a starter file) also has checks of
metric "clause": a clause of the data-plane contract (docs/dataplane-contract.md), run by the conformance suite
(tests/conformance/) on BMv2 against the student's program; 1 when the clause's test passes, else 0.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import tomllib

from controller.system import REPO

LABS = REPO / "labs"
#: The file `start` writes into a working folder: which lab it holds (so `check` with no runs knows where to look).
MARKER = ".cclab-lab"
#: Where the handouts tell a student to keep runs: `cclab run SPEC --results runs`.
RUNS = "runs"
TODO = re.compile(r"\bTODO\b")
#: the conformance suite a "clause" check runs (its tests are named test_c_<area>_<n>_...: the clause's id)
CONFORMANCE = REPO / "tests" / "conformance" / "test_contract.py"
CLAUSE = re.compile(r"^C-[A-Z]+-\d+$")
CLAUSE_TEST = re.compile(r"^test_(c_[a-z]+_\d+)_")
#: how long the conformance suite may take for a lab's clauses (BMv2 started, the program compiled)
CLAUSES_TIMEOUT_S = 900


class LabError(Exception):
    """A lab that does not exist, a working folder that cannot be made, a check.toml that is malformed."""


@dataclass(frozen=True)
class Check:
    """One check of a lab: a question of the handout, answered by a metric of one run."""

    id: str
    """Unique within the lab; what `cclab lab check` prints and a grader reads."""
    question: int
    """The handout's question this check grades."""
    metric: str
    """A key of METRICS, or "clause" (a clause of the data-plane contract against the lab's program)."""
    min: float
    """Lowest value that passes."""
    max: float
    """Highest value that passes."""
    why: str
    """Why a correct run lands in [min, max] and a wrong one does not."""
    basis: str
    """The solution's runs the range comes from: n, values, margin."""
    run: str | None = None
    """The spec name of the run the metric reads (e.g. bufferbloat-q100); none for a clause."""
    clause: str | None = None
    """metric = "clause": the clause's id (e.g. C-LOSS-1), run by the conformance suite on BMv2."""
    flow: str | None = None
    """The flow id the metric is about, for per-flow metrics."""
    ratio_to: str | None = None
    """Another run's spec name: the value is metric(run) / metric(ratio_to)."""
    ratio_flow: str | None = None
    """Another flow: the value is metric(run, flow) / metric(ratio_to or run, ratio_flow)."""


@dataclass(frozen=True)
class Lab:
    """A lab folder and its check.toml."""

    number: int
    """The lab's number (the NN of labs/NN-name)."""
    dir: Path
    """labs/NN-name."""
    title: str
    """One line, from check.toml."""
    starter: tuple[str, ...]
    """The files `start` copies; a TODO left in one of them is reported before any run is read."""
    runs: tuple[str, ...]
    """The spec names of the runs the checks read."""
    checks: tuple[Check, ...]
    """The checks, in handout order."""
    program: str | None = None
    """The starter file that is a P4 program the "clause" checks run against (BMv2), if the lab has one."""

    @property
    def clauses(self) -> tuple[str, ...]:
        """The contract's clauses its checks run, in order."""
        return tuple(dict.fromkeys(c.clause for c in self.checks if c.clause is not None))


@dataclass(frozen=True)
class Result:
    """One check's outcome."""

    id: str
    question: int
    passed: bool
    value: float | None
    min: float
    max: float
    message: str
    """Empty when it passed; else what is wrong and what to look at."""


# --- the metrics a check can read ---------------------------------------------------------------------------


def _rows(run: Path, name: str) -> list[dict[str, str]]:
    path = run / name
    if not path.exists():
        raise LabError(f"{run}: no {name} (is it a cclab run directory?)")
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _flow_row(run: Path, flow: str | None) -> dict[str, str]:
    rows = _rows(run, "flows.csv")
    for row in rows:
        if row["id"] == flow:
            return row
    raise LabError(f"{run}: no flow {flow!r} in flows.csv (flows: {', '.join(r['id'] for r in rows)})")


def _summary(run: Path) -> dict[str, Any]:
    path = run / "summary.json"
    if not path.exists():
        raise LabError(f"{run}: no summary.json (is it a cclab run directory?)")
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise LabError(f"{path}: not JSON ({exc}); a run killed while writing it? run the spec again") from None
    return data


def _read_number(path: Path, made_by: str) -> float:
    if not path.exists():
        raise LabError(f"{path.parent}: no {path.name} ({made_by} writes it: run it on your runs)")
    try:
        return float(path.read_text())
    except ValueError:
        raise LabError(f"{path}: {path.read_text().strip()!r} is not a number") from None


def srtt_median_ms(run: Path, flow: str | None) -> float:
    """The flow's median smoothed RTT (cwnd.csv, the sender's tcp_info), in ms."""
    samples = [int(r["srtt_us"]) / 1000 for r in _rows(run, "cwnd.csv") if r["flow"] == flow and int(r["srtt_us"])]
    if not samples:
        raise LabError(f"{run}: flow {flow!r} has no RTT samples in cwnd.csv")
    return statistics.median(samples)


def completion_s(run: Path, flow: str | None) -> float:
    """A finite transfer's completion time (flows.csv), in s."""
    value = _flow_row(run, flow)["completion_s"]
    if not value:
        raise LabError(f"{run}: flow {flow!r} has no completion time: is it a finite transfer (bytes = ...)?")
    return float(value)


def throughput_mbps(run: Path, flow: str | None) -> float:
    """The flow's in-network throughput (flows.csv), in Mbit/s."""
    return float(_flow_row(run, flow)["throughput_bps"]) / 1e6


def utilization(run: Path, flow: str | None) -> float:
    """The bottleneck's achieved rate over its rate (summary.json)."""
    return float(_summary(run)["bottleneck"]["utilization"])


def jain(run: Path, flow: str | None) -> float:
    """Jain's index over the run's flows, as cclab computes it (summary.json)."""
    value = _summary(run)["jain"]
    if value is None:
        raise LabError(f"{run}: summary.json has no Jain's index")
    return float(value)


def completion_min_s(run: Path, flow: str | None) -> float:
    """The shortest completion time of the run's finite transfers (flows.csv), in s: the fetch that lost no
    packet of its handshake, where one that did waits out a timeout of a second whatever the queue."""
    times = [float(r["completion_s"]) for r in _rows(run, "flows.csv") if r["completion_s"]]
    if not times:
        raise LabError(f"{run}: no finite transfer completed (flows with bytes = ... have a completion_s)")
    return min(times)


def jain_by_hand_error(run: Path, flow: str | None) -> float:
    """How far the Jain's index a student's script wrote into the run's folder (jain_by_hand.txt) is from cclab's."""
    return abs(_read_number(run / "jain_by_hand.txt", "the lab's analyze.py") - jain(run, None))


def loss_rate(run: Path, flow: str | None) -> float:
    """The share of the flow's packets lost in the network (flows.csv: random and queue drops over all it sent)."""
    row = _flow_row(run, flow)
    lost = int(row["random_drops"]) + int(row["queue_drops"])
    sent = int(row["packets"]) + lost
    if not sent:
        raise LabError(f"{run}: flow {flow!r} sent nothing")
    return lost / sent


def mathis_mbps(run: Path, flow: str | None) -> float:
    """Reno's throughput by the Mathis model for the flow, (MSS / RTT) * sqrt(3 / (2p)), in Mbit/s: its MSS and
    median smoothed RTT (cwnd.csv) and its loss rate p (flows.csv). Mathis, Semke, Mahdavi and Ott, "The
    Macroscopic Behavior of the TCP Congestion Avoidance Algorithm", ACM CCR 1997."""
    p = loss_rate(run, flow)
    if p == 0:
        raise LabError(f"{run}: flow {flow!r} lost no packet: the Mathis model needs a loss rate above 0")
    mss = statistics.median(int(r["mss"]) for r in _rows(run, "cwnd.csv") if r["flow"] == flow and int(r["srtt_us"]))
    return mss * 8 / (srtt_median_ms(run, flow) / 1e3) * math.sqrt(3 / (2 * p)) / 1e6


def over_mathis(run: Path, flow: str | None) -> float:
    """The flow's throughput over what the Mathis model gives it (1: the model holds)."""
    return throughput_mbps(run, flow) / mathis_mbps(run, flow)


def mathis_by_hand_error(run: Path, flow: str | None) -> float:
    """How far, relatively, the Mathis model's throughput a student's script wrote into the run's folder
    (mathis_by_hand.txt, Mbit/s) is from the one computed here from the same inputs."""
    mine = _read_number(run / "mathis_by_hand.txt", "the lab's analyze.py")
    return abs(mine / mathis_mbps(run, flow) - 1)


def random_loss_rate(run: Path, flow: str | None) -> float:
    """The share of the flow's packets that left the queue and were then lost on the link at random (flows.csv:
    random drops over forwarded packets and random drops): the link's loss probability as the flow saw it."""
    row = _flow_row(run, flow)
    left = int(row["packets"]) + int(row["random_drops"])
    if not left:
        raise LabError(f"{run}: no packet of flow {flow!r} left the queue")
    return int(row["random_drops"]) / left


def wire_over_payload(run: Path, flow: str | None) -> float:
    """The wire bytes the link forwarded for the flow (flows.csv) over the payload bytes its receiver read
    (iperf3's report, iperf/<flow>.server.json): a full TCP segment's frame over its data, 1514 / 1448 with
    timestamps, and a little more for the frames without data (handshake, FIN)."""
    report = run / "iperf" / f"{flow}.server.json"
    try:
        read = int(json.loads(report.read_text())["end"]["sum_received"]["bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        raise LabError(f"{run}: no receiver's byte count for flow {flow!r} ({report})") from None
    if not read:
        raise LabError(f"{run}: flow {flow!r}'s receiver read nothing")
    return int(_flow_row(run, flow)["bytes"]) / read


def _connection(run: Path, flow: str | None) -> dict[str, Any] | None:
    """The flow's entry under summary.json's "mptcp" (its subflows added up), None for a single-path flow."""
    return next((c for c in _summary(run).get("mptcp", []) if c["id"] == flow), None)


def connection_mbps(run: Path, flow: str | None) -> float:
    """A connection's throughput, in Mbit/s: an MPTCP connection's subflows added up (summary.json), a single-path
    flow's own (flows.csv)."""
    conn = _connection(run, flow)
    return float(conn["throughput_bps"]) / 1e6 if conn is not None else throughput_mbps(run, flow)


def coupled(run: Path, flow: str | None) -> float:
    """1 when the MPTCP connection's subflows were coupled, as its algorithm's own state shows (summary.json's
    mptcp[].coupling.coupled), else 0."""
    conn = _connection(run, flow)
    if conn is None:
        raise LabError(f'{run}: flow {flow!r} is not an MPTCP connection (kind = "mptcp")')
    return 1.0 if conn["coupling"]["coupled"] else 0.0


def cut_factor(run: Path, flow: str | None) -> float:
    """How far the flow cuts its window on a loss: the median, over the samples where its ssthresh changed,
    of the new ssthresh over the window of the sample before (cwnd.csv, one sample per interval_s; Reno: 0.5;
    an algorithm that never backs off: 1 or more)."""
    samples = [r for r in _rows(run, "cwnd.csv") if r["flow"] == flow]
    cuts = [
        int(now["ssthresh_pkts"]) / int(before["cwnd_pkts"])
        for before, now in zip(samples, samples[1:])
        if now["ssthresh_pkts"] != before["ssthresh_pkts"] and int(before["cwnd_pkts"]) > 0
    ]
    if not cuts:
        raise LabError(f"{run}: flow {flow!r} never set its ssthresh (cwnd.csv): it saw no loss")
    return statistics.median(cuts)


METRICS: dict[str, Callable[[Path, str | None], float]] = {
    "srtt_median_ms": srtt_median_ms,
    "completion_s": completion_s,
    "completion_min_s": completion_min_s,
    "throughput_mbps": throughput_mbps,
    "utilization": utilization,
    "jain": jain,
    "jain_by_hand_error": jain_by_hand_error,
    "loss_rate": loss_rate,
    "mathis_mbps": mathis_mbps,
    "over_mathis": over_mathis,
    "mathis_by_hand_error": mathis_by_hand_error,
    "cut_factor": cut_factor,
    "random_loss_rate": random_loss_rate,
    "wire_over_payload": wire_over_payload,
    "connection_mbps": connection_mbps,
    "coupled": coupled,
}
PER_FLOW = (
    "srtt_median_ms",
    "completion_s",
    "throughput_mbps",
    "loss_rate",
    "mathis_mbps",
    "over_mathis",
    "mathis_by_hand_error",
    "cut_factor",
    "random_loss_rate",
    "wire_over_payload",
    "connection_mbps",
    "coupled",
)


# --- labs ------------------------------------------------------------------------------------------------------


def _check(path: Path, raw: dict[str, Any], runs: tuple[str, ...]) -> Check:
    where = f"{path}: check {raw.get('id', '?')!r}"
    try:
        c = Check(**raw)
    except TypeError as exc:
        raise LabError(f"{where}: {exc}") from None
    if c.metric == "clause":
        if c.clause is None or not CLAUSE.match(c.clause):
            raise LabError(f"{where}: clause = {c.clause!r}: a clause check names a clause id such as C-LOSS-1")
        if (c.run, c.flow, c.ratio_to, c.ratio_flow) != (None, None, None, None):
            raise LabError(f"{where}: a clause check reads no run: no run, flow, ratio_to or ratio_flow")
        if not (c.min == c.max == 1):
            raise LabError(f"{where}: a clause passes (1) or fails (0): min = max = 1")
        return c
    if c.metric not in METRICS:
        raise LabError(f"{where}: metric = {c.metric!r}: must be one of {', '.join(METRICS)}, or clause")
    if c.run is None or c.clause is not None:
        raise LabError(f"{where}: a metric check names its run (and no clause)")
    if (c.flow is None) == (c.metric in PER_FLOW):
        raise LabError(f"{where}: flow: {c.metric} {'needs' if c.flow is None else 'takes no'} flow")
    for r in (c.run, c.ratio_to):
        if r is not None and r not in runs:
            raise LabError(f"{where}: run {r!r} is not one of the lab's runs ({', '.join(runs)})")
    if not c.min <= c.max:
        raise LabError(f"{where}: min = {c.min} is above max = {c.max}")
    return c


def load(path: Path) -> Lab:
    """The lab in folder `path` (labs/NN-name), its check.toml validated."""
    toml = path / "check.toml"
    try:
        raw = tomllib.loads(toml.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LabError(f"{toml}: {exc}") from None
    runs = tuple(raw["runs"])
    checks = tuple(_check(toml, c, runs) for c in raw["check"])
    ids = [c.id for c in checks]
    if len(set(ids)) != len(ids):
        raise LabError(f"{toml}: check ids repeat: {ids}")
    program = raw.get("program")
    if (program is None) != all(c.clause is None for c in checks) or (program and program not in raw["starter"]):
        raise LabError(f"{toml}: clause checks need program = one of the starter files, and it needs them")
    number = int(path.name.split("-", 1)[0])
    return Lab(number, path, raw["title"], tuple(raw["starter"]), runs, checks, program)


def only(lab: Lab, ids: list[str]) -> Lab:
    """The lab with only the checks `ids` (a LabError names the ids there are)."""
    unknown = [i for i in ids if i not in {c.id for c in lab.checks}]
    if unknown:
        raise LabError(f"lab {lab.number}: no check {unknown[0]!r} (its checks: {', '.join(c.id for c in lab.checks)})")
    return replace(lab, checks=tuple(c for c in lab.checks if c.id in ids))


def all_labs() -> list[Lab]:
    """Every lab under labs/, by number."""
    return [load(p) for p in sorted(LABS.glob("[0-9][0-9]-*")) if (p / "check.toml").exists()]


def find(number: int) -> Lab:
    """Lab `number`, or a LabError listing those there are."""
    labs = all_labs()
    for lab in labs:
        if lab.number == number:
            return lab
    raise LabError(f"lab {number}: no such lab (there are: {', '.join(str(x.number) for x in labs)})")


def start(lab: Lab, work: Path) -> list[Path]:
    """Copy the lab's starter files and its handout into `work` (made; must not hold them already)."""
    clash = [work / name for name in lab.starter if (work / name).exists()]
    if clash:
        raise LabError(f"{clash[0]} exists: choose another folder (cclab lab start {lab.number} DIR)")
    work.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in (*lab.starter, "README.md"):
        dst = work / name
        shutil.copyfile(lab.dir / name, dst)
        copied.append(dst)
    (work / MARKER).write_text(f"{lab.number}\n")
    return copied


def todos(lab: Lab, work: Path) -> list[str]:
    """The TODOs left in a working folder's starter files, one line each: file:line: text."""
    left = []
    for name in lab.starter:
        path = work / name
        if not path.exists():
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if TODO.search(line):
                left.append(f"{path}:{i}: {line.strip()}")
    return left


def lab_of(work: Path) -> int | None:
    """The lab number a working folder was started for, or None when it is not one."""
    marker = work / MARKER
    return int(marker.read_text()) if marker.exists() else None


def find_runs(lab: Lab, run_dirs: list[Path]) -> dict[str, Path]:
    """The newest complete run of each of the lab's specs among `run_dirs` (run directories or folders of them)."""
    found: dict[str, tuple[str, Path]] = {}
    candidates: list[Path] = []
    for d in run_dirs:
        candidates += [d] if (d / "summary.json").exists() else sorted(p.parent for p in d.glob("*/summary.json"))
    for run in candidates:
        summ = _summary(run)
        name = summ.get("name")
        if name in lab.runs and summ.get("complete") and (name not in found or found[name][0] < run.name):
            found[name] = (run.name, run)
    return {name: run for name, (_, run) in found.items()}


def unfaithful(runs: dict[str, Path]) -> dict[str, str]:
    """The runs among `runs` (spec name -> run directory) whose fidelity self-check failed: spec name -> its notes
    (the emulator did not hold the spec there, so what the checks read of it may mislead)."""
    out = {}
    for name, run in runs.items():
        fid = _summary(run).get("fidelity") or {}
        if fid.get("ok") is False:
            out[name] = "; ".join(fid.get("notes") or []) or "no note"
    return out


def evaluate(lab: Lab, runs: dict[str, Path], clauses: dict[str, tuple[bool, str]] | None = None) -> list[Result]:
    """Every check of the lab against `runs` (spec name -> run directory) and the conformance suite's verdicts
    (clause id -> passed, why not; run_clauses); a run or a clause missing fails its checks."""
    results = []
    for c in lab.checks:
        try:
            value = _clause(c, clauses or {}) if c.clause is not None else _value(c, runs)
        except LabError as exc:
            results.append(Result(c.id, c.question, False, None, c.min, c.max, str(exc)))
            continue
        except (KeyError, ValueError, TypeError) as exc:  # a run's file without what a cclab run writes there
            msg = f"{runs.get(c.run or '')}: {c.metric} unreadable from its files ({exc!r}): is it a cclab run?"
            results.append(Result(c.id, c.question, False, None, c.min, c.max, msg))
            continue
        ok = c.min <= value <= c.max
        msg = "" if ok else f"{value:.4g} is outside [{c.min:g}, {c.max:g}]: {c.why}"
        results.append(Result(c.id, c.question, ok, value, c.min, c.max, msg))
    return results


def _clause(c: Check, clauses: dict[str, tuple[bool, str]]) -> float:
    assert c.clause is not None
    if c.clause not in clauses:
        raise LabError(f"{c.clause} was not run (the conformance suite against the lab's program)")
    passed, why = clauses[c.clause]
    if not passed:
        raise LabError(f"{c.clause} fails: {why}")
    return 1.0


def _value(c: Check, runs: dict[str, Path]) -> float:
    for name in (c.run, c.ratio_to):
        if name is not None and name not in runs:
            raise LabError(f"no complete run named {name!r} (run the spec whose name = {name!r})")
    assert c.run is not None
    value = METRICS[c.metric](runs[c.run], c.flow)
    if c.ratio_to is not None or c.ratio_flow is not None:
        other, flow = c.ratio_to or c.run, c.ratio_flow or c.flow
        base = METRICS[c.metric](runs[other], flow)
        if base <= 0:
            raise LabError(f"{c.metric} of {other} {flow or ''} is {base}: cannot divide by it")
        value /= base
    return value


# --- clauses of the data-plane contract, against a student's program -------------------------------------------


def run_clauses(clauses: tuple[str, ...], program: Path) -> dict[str, tuple[bool, str]]:
    """Run the conformance suite's tests of `clauses` on BMv2 against `program` (a .p4 source; root, p4c and
    simple_switch_grpc needed): clause id -> (passed, why not: the test's first line of failure, or its skip
    reason). A clause whose tests did not run at all is left out, and `evaluate` fails it."""
    if not program.is_file():
        return {c: (False, f"no program {program} to test") for c in clauses}
    keys = " or ".join(c.lower().replace("-", "_") + "_" for c in clauses)
    with tempfile.TemporaryDirectory(prefix="cclab-lab-") as tmp:
        report = Path(tmp) / "junit.xml"
        args = [sys.executable, "-m", "pytest", str(CONFORMANCE), "-q", "-p", "no:cacheprovider", "-o", "addopts="]
        args += ["--rootdir", str(REPO), f"--p4-program={program.resolve()}", "-k", f"bmv2 and ({keys})"]
        try:
            proc = subprocess.run(
                [*args, f"--junitxml={report}"], cwd=REPO, capture_output=True, text=True, timeout=CLAUSES_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return {c: (False, f"the conformance suite took over {CLAUSES_TIMEOUT_S} s") for c in clauses}
        verdicts = _clause_verdicts(ET.parse(report).getroot()) if report.exists() else {}
        if not verdicts:  # no test ran at all (a collection error, or the suite's guard refused this host): say why
            said = (proc.stdout + proc.stderr).strip().splitlines()
            why = said[-1] if said else f"pytest exited {proc.returncode}"
            why = re.sub(r"^!?\s*_pytest\.outcomes\.Exit:\s*", "", why).rstrip(" !")
            return {c: (False, f"the conformance suite did not run: {why}") for c in clauses}
        return verdicts


def _clause_verdicts(root: ET.Element) -> dict[str, tuple[bool, str]]:
    """A JUnit XML report's test cases, by clause id: passed only if every test of the clause passed."""
    out: dict[str, tuple[bool, str]] = {}
    for case in root.iter("testcase"):
        m = CLAUSE_TEST.match(case.get("name", ""))
        if m is None:
            continue
        clause = m.group(1).upper().replace("_", "-")
        bad = next((e for e in case if e.tag in ("failure", "error", "skipped")), None)
        verdict = (True, "")
        if bad is not None:
            text = (bad.get("message") or bad.text or bad.tag).strip()
            first = text.splitlines()[0] if text else bad.tag
            first = re.sub(r"^failed on setup with \"?", "", first).removesuffix('"')
            verdict = (False, f"skipped: {first}" if bad.tag == "skipped" else first)
        if out.get(clause, (True, ""))[0]:
            out[clause] = verdict
    return out

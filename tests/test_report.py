"""`cclab report`: statistics against known values, tables from a sweep directory's files, regenerable."""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from controller.experiment import sweep
from controller.results import pool, report, rundir
from controller.spec import sweep as sweep_spec
from tests.conftest import CCLAB, REPO

# Student's t quantiles t(0.975, df) from statistical tables, to check the library call against
T975 = {1: 12.7062, 2: 4.3027, 4: 2.7764, 9: 2.2622}


@pytest.mark.parametrize("values", [[1.0, 2.0, 3.0], [10.0, 12.0], [5.0, 5.5, 6.1, 4.9, 5.2], list(range(10))])
def test_mean_ci_is_students_t(values: list[float]) -> None:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = T975[n - 1] * sd / math.sqrt(n)
    st = report.mean_ci([float(v) for v in values])
    assert st.n == n and st.mean == pytest.approx(mean) and st.std == pytest.approx(sd)
    assert st.ci_low == pytest.approx(mean - half, rel=1e-4) and st.ci_high == pytest.approx(mean + half, rel=1e-4)


def test_mean_ci_edge_cases() -> None:
    assert report.mean_ci([]) == report.Stat(0, None, None, None, None)
    assert report.mean_ci([4.0]) == report.Stat(1, 4.0, None, None, None)
    assert report.mean_ci([4.0, 4.0, 4.0]) == report.Stat(3, 4.0, 0.0, 4.0, 4.0)


def _summary(per: float, algos: list[str], tputs_mbps: list[float], util: float) -> dict[str, Any]:
    return {
        "complete": True,
        "name": "x",
        "flows": [
            {"id": f"f{i + 1}", "algo": a, "throughput_bps": t * 1e6} for i, (a, t) in enumerate(zip(algos, tputs_mbps))
        ],
        "bottleneck": {"utilization": util, "achieved_bps": util * 10e6, "measured_loss": per},
        "jain": 1.0 if len(tputs_mbps) == 1 else 0.9,
        "fidelity": {"ok": True},
    }


COMMIT, SOURCE = "a357f37", "5" * 64


def _write_run(run_dir: Path, summ: dict[str, Any], commit: str = COMMIT, source: str = SOURCE) -> None:
    """A run's summary.json and the manifest.json fields pooling reads (commit, source hash, duration)."""
    rundir.write_json(run_dir / "summary.json", summ)
    rundir.write_json(
        run_dir / "manifest.json", {"git_revision": commit, "source_hash": source, "spec": {"duration_s": 2}}
    )


def _sweep_dir(tmp_path: Path) -> tuple[Path, dict[tuple[int, int], float]]:
    """A sweep over bottleneck.per (2 points) x 3 repetitions of two flows (reno, tcpwplus), from the files a
    sweep writes; one run of point 1 incomplete (it must not count)."""
    raw = {
        "name": "rep",
        "duration_s": 2,
        "topology": {"pairs": 2},
        "bottleneck": {"rate_mbps": 10},
        "flows": [{"algo": "reno", "src": "h1", "dst": "r1"}, {"algo": "tcpwplus", "src": "h2", "dst": "r2"}],
        "sweep": {"repetitions": 3, "bottleneck.per": [0, 1e-3]},
    }
    sw = sweep_spec.from_raw(raw)
    d = tmp_path / "sw"
    sweep.prepare(sw, d)
    reno = {}
    for pt in sw.points:
        run_dir = d / "runs" / pt.key / f"rep-{pt.key}-20260101T000000Z"
        run_dir.mkdir(parents=True)
        per = dict(pt.values)["bottleneck.per"]
        r = 4.0 + pt.rep - 2 * pt.index
        reno[(pt.index, pt.rep)] = r
        summ = _summary(per, ["reno", "tcpwplus"], [r, 5.0 + 0.5 * pt.rep], 0.9 + 0.01 * pt.rep)
        if pt.key == "p001-r2":
            summ["complete"] = False
            (run_dir / "INCOMPLETE").write_text("")
        _write_run(run_dir, summ)
        rundir.write_csv(
            run_dir / "cwnd.csv",
            [{"t_s": 0.1 * i, "flow": "f1", "algo": "reno", "cwnd_pkts": 10 + i} for i in range(20)],
        )
        rundir.write_csv(
            run_dir / "ccstate.csv", [{"t_s": 0.1 * i, "flow": "f2", "bwe_bps": 5e6 + i} for i in range(20)]
        )
    sweep.write_manifest(sw, d)
    return d, reno


def _table(d: Path) -> list[dict[str, str]]:
    with (d / "report" / "table.csv").open() as f:
        return list(csv.DictReader(f))


def test_report_tables_have_n_mean_and_ci_per_point_and_algorithm(tmp_path: Path) -> None:
    d, reno = _sweep_dir(tmp_path)
    written = report.write([d])
    rows = _table(d)
    got = {(r["point"], r["metric"], r["algo"]): r for r in rows}
    r0 = got[("0", "flow_throughput_mbps", "reno")]
    assert (r0["bottleneck.per"], r0["n"], r0["repetitions"]) == ("0", "3", "3")
    assert float(r0["mean"]) == pytest.approx(5.0)  # 4, 5, 6
    assert float(r0["ci95_high"]) - 5.0 == pytest.approx(T975[2] * 1.0 / math.sqrt(3), rel=1e-4)
    r1 = got[("1", "flow_throughput_mbps", "reno")]
    assert (r1["bottleneck.per"], r1["n"]) == ("0.001", "2")  # the incomplete run is left out
    assert float(r1["mean"]) == pytest.approx((reno[(1, 0)] + reno[(1, 1)]) / 2)
    assert float(r1["ci95_high"]) - float(r1["mean"]) == pytest.approx(
        T975[1] * math.sqrt(0.5) / math.sqrt(2), rel=1e-4
    )
    assert got[("0", "flow_throughput_mbps", "tcpwplus")]["mean"] == "5.5"
    util = got[("0", "utilization", "all")]
    assert float(util["mean"]) == pytest.approx(0.91) and util["n"] == "3"
    with (d / "report" / "runs.csv").open() as f:
        runs = list(csv.DictReader(f))
    assert len(runs) == 5 and {r["seed"] for r in runs} == {
        str(s) for s in json.loads((d / "sweep.json").read_text())["seeds"]
    }
    names = {p.name for p in written}
    assert {"table.csv", "runs.csv", "throughput-vs-bottleneck_per.png", "utilization-vs-bottleneck_per.png"} <= names
    assert {"jain-vs-bottleneck_per.png", "traces-p000.png", "traces-p001.png"} <= names
    for p in written:
        assert p.stat().st_size > 0


def test_report_is_regenerated_from_the_runs(tmp_path: Path) -> None:
    d, _ = _sweep_dir(tmp_path)
    report.write([d])
    first = (d / "report" / "table.csv").read_text()
    (d / "report" / "table.csv").unlink()
    proc = subprocess.run([*CCLAB, "report", str(d)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (d / "report" / "table.csv").read_text() == first


def test_report_of_no_sweep_fails_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([*CCLAB, "report", str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == f"cclab: {tmp_path} is not a sweep directory (no sweep.json); run `cclab sweep` first\n"


def test_jain_against_flow_count_when_a_swept_array_sets_the_flows(tmp_path: Path) -> None:
    one = [{"algo": "reno", "src": "h1", "dst": "r1"}]
    four = [{"algo": "reno", "src": "h1", "dst": "r1", "count": 4}]
    raw = {
        "name": "jf",
        "duration_s": 2,
        "topology": {"pairs": 1},
        "bottleneck": {"rate_mbps": 10},
        "flows": one,
        "sweep": {"repetitions": 2, "flows": [one, four]},
    }
    sw = sweep_spec.from_raw(raw)
    d = tmp_path / "sw"
    sweep.prepare(sw, d)
    for pt in sw.points:
        run_dir = d / "runs" / pt.key / f"jf-{pt.key}-20260101T000000Z"
        run_dir.mkdir(parents=True)
        n = 1 if pt.index == 0 else 4
        _write_run(run_dir, _summary(0.0, ["reno"] * n, [10.0 / n] * n, 0.99))
    sweep.write_manifest(sw, d)
    names = {p.name for p in report.write([d])}
    assert "jain-vs-n_flows.png" in names, names
    rows = [r for r in _table(d) if r["metric"] == "jain"]
    assert [(r["n_flows"], r["n"], r["mean"]) for r in rows] == [("1", "2", "1"), ("4", "2", "0.9")]
    assert [json.loads(r["flows"]) for r in rows] == [one, four]  # the swept array, as JSON in its column


def test_ratios_are_paired_by_repetition_and_the_paper_is_beside_them(tmp_path: Path) -> None:
    spec_file = tmp_path / "lw.toml"
    spec_file.write_text("")  # only its path matters: the paper file sits beside it
    (tmp_path / f"lw{report.PAPER_SUFFIX}").write_text(
        "metric,algo,bottleneck.per,paper,paper_ref\n"
        "flow_throughput_ratio,logwestwood/reno,0.001,2.6,Fig. 7\n"
        "flow_throughput_mbps,reno,,1.5,Fig. 6\n"
    )
    raw = {
        "name": "lw",
        "duration_s": 2,
        "topology": {"pairs": 1},
        "bottleneck": {"rate_mbps": 10},
        "flows": [{"algo": "reno", "src": "h1", "dst": "r1"}],
        "sweep": {"repetitions": 3, "bottleneck.per": [0, 1e-3], "flows[0].algo": ["reno", "logwestwood"]},
    }
    sw = sweep_spec.from_raw(raw, spec_file)
    d = tmp_path / "sw"
    sweep.prepare(sw, d)
    tput = {}
    for pt in sw.points:
        values = dict(pt.values)
        run_dir = d / "runs" / pt.key / f"lw-{pt.key}-20260101T000000Z"
        run_dir.mkdir(parents=True)
        # logwestwood gets 2x, 3x, 4x reno's throughput in repetitions 0, 1, 2 at PER 1e-3
        t = 1.0 + pt.rep if values["flows[0].algo"] == "reno" else (1.0 + pt.rep) * (2 + pt.rep)
        tput[pt.key] = t
        _write_run(run_dir, _summary(values["bottleneck.per"], [values["flows[0].algo"]], [t], 0.5))
    sweep.write_manifest(sw, d)
    names = {p.name for p in report.write([d])}
    assert {"ratios.csv", "ratio-vs-bottleneck_per.png"} <= names, names
    with (d / "report" / "ratios.csv").open() as f:
        rows = {(r["bottleneck.per"], r["algo"]): r for r in csv.DictReader(f)}
    r = rows[("0.001", "logwestwood/reno")]
    assert (r["n"], float(r["mean"])) == ("3", pytest.approx(3.0))
    assert float(r["ci95_high"]) - 3.0 == pytest.approx(T975[2] * 1.0 / math.sqrt(3), rel=1e-4)
    assert (r["paper"], r["paper_ref"]) == ("2.6", "Fig. 7")
    assert rows[("0", "logwestwood/reno")]["paper"] == ""
    table = {(r["bottleneck.per"], r["metric"], r["algo"]): r for r in _table(d)}
    assert table[("0", "flow_throughput_mbps", "reno")]["paper"] == "1.5"  # an empty cell matches every value
    assert table[("0.001", "flow_throughput_mbps", "reno")]["paper"] == "1.5"
    assert table[("0", "flow_throughput_mbps", "logwestwood")]["paper"] == ""


def test_rtt_ratio_is_short_over_long_base_rtt() -> None:
    flows = [
        {"id": "f1", "algo": "reno", "kind": "tcp", "base_rtt_ms": 80.0, "throughput_bps": 6e6},
        {"id": "f2", "algo": "reno", "kind": "tcp", "base_rtt_ms": 240.0, "throughput_bps": 2e6},
        {"id": "f3", "algo": "-", "kind": "udp_onoff", "base_rtt_ms": 500.0, "throughput_bps": 1e6},
    ]
    assert report.rtt_short_over_long({"flows": flows}) == pytest.approx(3.0)
    assert report.rtt_short_over_long({"flows": flows[:1]}) is None


def test_cwnd_recoveries_time_each_reduction_back_to_its_window() -> None:
    unset = str(0x7FFFFFFF)
    # slow start to 100 and its exit (not timed), back to 100, a loss there recovered (to 99 >= 100 - 1) in 0.2 s,
    # then a loss at 99 that the run ends before it recovers from
    trace = [(0.0, 10, unset), (0.1, 100, unset), (0.2, 60, "60"), (0.3, 80, "60"), (0.4, 100, "60")]
    trace += [(0.5, 70, "70"), (0.6, 90, "70"), (0.7, 99, "70"), (0.8, 50, "50"), (0.9, 70, "50")]
    rows = [
        {"t_s": str(t), "flow": "f1", "algo": "tcpwplus", "cwnd_pkts": str(w), "ssthresh_pkts": th}
        for t, w, th in trace
    ]
    rows.insert(0, {"t_s": "0.0", "flow": "f1", "algo": "bbr", "cwnd_pkts": "5", "ssthresh_pkts": "5"})
    times, unrecovered = report.cwnd_recoveries(rows, {"f1": "tcpwplus"})
    assert times == [pytest.approx(0.2)] and unrecovered == 1


def test_per_path_splits_an_mptcp_connection_by_the_links_its_subflows_cross() -> None:
    """Each subflow by its path, beside the mean of the single-path TCP flows on each path; UDP left out;
    nothing for a run without an mptcp connection."""
    flows = [
        {"id": "f1.1", "path": ["l1"], "throughput_bps": 1e6},
        {"id": "f1.2", "path": ["l2"], "throughput_bps": 3e6},
        {"id": "f2", "path": ["l1"], "throughput_bps": 2e6},
        {"id": "f3", "path": ["l1"], "throughput_bps": 4e6},
        {"id": "f4", "path": ["l2"], "throughput_bps": 9e6, "kind": "udp_onoff"},
    ]
    s = {"flows": flows, "mptcp": [{"id": "f1", "subflows": ["f1.1", "f1.2"], "throughput_bps": 4e6}]}
    assert report.per_path(s) == {
        ("subflow_throughput_mbps", "l1"): 1.0,
        ("subflow_throughput_mbps", "l2"): 3.0,
        ("path_flow_throughput_mbps", "l1"): 3.0,
        ("connection_throughput_mbps", "f1"): 4.0,
    }
    assert report.per_path({"flows": flows}) == {}


def test_per_path_sets_a_one_path_connection_beside_that_paths_single_path_flows() -> None:
    """Two subflows over one path: each keyed by its id, and the connection over the single-path flows' mean."""
    flows = [
        {"id": "f1.1", "path": ["l1"], "throughput_bps": 2e6},
        {"id": "f1.2", "path": ["l1"], "throughput_bps": 3e6},
        {"id": "f2", "path": ["l1"], "throughput_bps": 4e6},
    ]
    s = {"flows": flows, "mptcp": [{"id": "f1", "subflows": ["f1.1", "f1.2"], "throughput_bps": 5e6}]}
    assert report.per_path(s) == {
        ("subflow_throughput_mbps", "l1:f1.1"): 2.0,
        ("subflow_throughput_mbps", "l1:f1.2"): 3.0,
        ("path_flow_throughput_mbps", "l1"): 4.0,
        ("connection_throughput_mbps", "f1"): 5.0,
        ("connection_over_path_flow", "f1"): 1.25,
    }


# --- pooling, verdicts, reference archives -------------------------------------------------------

CLAIMS = """
[[claims]]
id = "tcpwplus-faster"
source = "LogWestwood+ paper, §III, Fig. 7"
paper = "above"
metric = "flow_throughput_mbps"
algo = "tcpwplus"
at = { "bottleneck.per" = 0 }
compare = "order"
than = { algo = "reno" }
margin = 0.0
margin_why = "the order"
n = 10
n_why = "the order, size unknown"
warmup_s = 0
"""


def _runs_csv(out: Path) -> dict[str, dict[str, str]]:
    with (out / "runs.csv").open() as f:
        return {r["run_dir"]: r for r in csv.DictReader(f)}


def _spoil(d: Path, key: str, **manifest: Any) -> str:
    """Rewrite one run's manifest.json fields; return its run_dir relative to the sweep."""
    [run_dir] = sweep.attempts(d, key)
    m = json.loads((run_dir / "manifest.json").read_text())
    rundir.write_json(run_dir / "manifest.json", {**m, **manifest})
    return str(run_dir.relative_to(d))


def test_runs_csv_carries_each_runs_commit_and_source_hash(tmp_path: Path) -> None:
    d, _ = _sweep_dir(tmp_path)
    report.write([d])
    runs = _runs_csv(d / "report")
    assert len(runs) == 5
    assert {(r["commit"], r["source_hash"], r["pooled"], r["left_out"]) for r in runs.values()} == {
        (COMMIT, SOURCE, "True", "")
    }


def test_pooling_leaves_out_a_dirty_and_a_different_hash_run_and_names_them(tmp_path: Path) -> None:
    d, reno = _sweep_dir(tmp_path)
    dirty = _spoil(d, "p000-r0", git_revision=COMMIT + "-dirty")
    other = _spoil(d, "p000-r1", source_hash="6" * 64)
    report.write([d])
    runs = _runs_csv(d / "report")
    assert (
        runs[dirty]["pooled"] == "False"
        and runs[dirty]["left_out"] == f"ran from a dirty or unknown tree (git describe: {COMMIT}-dirty)"
    )
    assert runs[other]["left_out"] == f"source hash {'6' * 12} differs from the pool's {'5' * 12}"
    r0 = {(r["point"], r["metric"], r["algo"]): r for r in _table(d)}[("0", "flow_throughput_mbps", "reno")]
    assert (r0["n"], float(r0["mean"])) == ("1", reno[(0, 2)])  # only p000-r2 is pooled at point 0
    # the pool's hash is the one most clean runs have; asking for the other pools that one alone
    report.write([d], tmp_path / "other", source_hash="6" * 64)
    pooled = [k for k, r in _runs_csv(tmp_path / "other").items() if r["pooled"] == "True"]
    assert pooled == [other]


def test_a_run_that_failed_its_fidelity_check_is_left_out_counted_and_named(tmp_path: Path) -> None:
    d, _ = _sweep_dir(tmp_path)
    [run_dir] = sweep.attempts(d, "p000-r1")
    summ = json.loads((run_dir / "summary.json").read_text())
    summ["fidelity"] = {"ok": False, "notes": [], "checks": {"bottleneck_rate": {"ok": False}, "cpu": {"ok": True}}}
    rundir.write_json(run_dir / "summary.json", summ)
    spec_file = tmp_path / "rep.toml"
    (tmp_path / "rep.claims.toml").write_text(CLAIMS)
    m = json.loads((d / "sweep.json").read_text())
    rundir.write_json(d / "sweep.json", {**m, "spec_path": str(spec_file)})
    report.write([d])
    runs = _runs_csv(d / "report")
    key = str(run_dir.relative_to(d))
    assert runs[key]["left_out"] == "failed its fidelity check (bottleneck_rate)"
    rows = {(r["point"], r["metric"], r["algo"]): r for r in _table(d)}
    assert (rows[("0", "utilization", "all")]["fidelity_ok_runs"], rows[("0", "utilization", "all")]["n"]) == ("2", "2")
    assert rows[("0", "utilization", "all")]["fidelity_failed_runs"] == "1"
    with (d / "report" / "verdicts.csv").open() as f:
        [v] = list(csv.DictReader(f))
    # 2 of 3 runs at point 0 passed; n = 2 < 10, so the order (tcpwplus 5.0, 5.5, 6.0 over reno 4, 5, 6) cannot hold
    assert (v["claim"], v["fidelity_passed"], v["n"], v["n_required"]) == ("tcpwplus-faster", "2/3", "2", "10")
    assert (v["verdict"], v["run_length_s"]) == ("inconclusive", "2")
    md = (d / "report" / "verdicts.md").read_text()
    assert f"- {run_dir}: failed its fidelity check (bottleneck_rate)" in md and "**inconclusive**" in md


def test_a_run_in_the_lab_vm_takes_the_hosts_commit_and_source_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guest has no git; `cclab run --vm` hands it the shared tree's, which the manifest then records."""
    env = rundir.tree_env("kernel")
    assert env == {rundir.TREE_ENV[0]: rundir.git_revision(), rundir.TREE_ENV[1]: rundir.source_hash("kernel")}
    monkeypatch.setenv(rundir.TREE_ENV[0], "f00ba12")
    monkeypatch.setenv(rundir.TREE_ENV[1], "9" * 64)
    assert (rundir.git_revision(), rundir.source_hash("kernel")) == ("f00ba12", "9" * 64)


def test_verdicts_only_from_claims_committed_before_the_runs(tmp_path: Path) -> None:
    """The claims file's last commit must precede every pooled run's commit: changed after the runs, or not
    committed, it judges nothing (verdicts.md says why); committed first, it judges. A run made at a commit
    git lacks is judged by its start time against the claims commit's time."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        argv = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    claims = repo / "rep.claims.toml"
    claims.write_text(CLAIMS)
    git("add", "rep.claims.toml")
    git("commit", "-q", "-m", "claims first")
    first = git("rev-parse", "--short", "HEAD")
    d, _ = _sweep_dir(tmp_path)
    for key in ("p000-r0", "p000-r1", "p000-r2", "p001-r0", "p001-r1"):
        _spoil(d, key, git_revision=first)
    m = json.loads((d / "sweep.json").read_text())
    rundir.write_json(d / "sweep.json", {**m, "spec_path": str(repo / "rep.toml")})
    report.write([d])
    md = (d / "report" / "verdicts.md").read_text()
    assert (d / "report" / "verdicts.csv").exists() and "before every pooled run" in md, md

    claims.write_text(CLAIMS.replace("margin = 0.0", "margin = 0.5"))
    report.write([d])
    md = (d / "report" / "verdicts.md").read_text()
    assert not (d / "report" / "verdicts.csv").exists()
    assert md.startswith("No verdicts: rep.claims.toml has changes not committed"), md
    git("commit", "-q", "-am", "claims changed after the runs")
    report.write([d])
    md = (d / "report" / "verdicts.md").read_text()
    assert "which 5 of the 5 pooled runs do not come after" in md and not (d / "report" / "verdicts.csv").exists()

    # made at a commit this clone never received: ordered by time, and the line says how many were
    when = dt.datetime.fromisoformat(git("log", "-1", "--format=%cI"))
    lost = "0123abc"
    for key, started in (("p000-r0", when + dt.timedelta(minutes=5)), ("p000-r1", when - dt.timedelta(minutes=5))):
        _spoil(d, key, git_revision=lost, started_utc=started.isoformat())
    for key in ("p000-r2", "p001-r0", "p001-r1"):
        _spoil(d, key, git_revision=git("rev-parse", "--short", "HEAD"))
    report.write([d])
    md = (d / "report" / "verdicts.md").read_text()
    assert not (d / "report" / "verdicts.csv").exists()
    assert "which 1 of the 5 pooled runs do not come after" in md and f"{lost}, which git lacks, started" in md, md
    _spoil(d, "p000-r1", started_utc=(when + dt.timedelta(seconds=1)).isoformat())
    report.write([d])
    md = (d / "report" / "verdicts.md").read_text()
    assert (d / "report" / "verdicts.csv").exists(), md
    assert f"before every pooled run; 2 of them, made at commits git lacks ({lost}), by their start time" in md, md


def test_two_sweep_directories_pool_and_a_repeated_seed_counts_once(tmp_path: Path) -> None:
    d1, _ = _sweep_dir(tmp_path / "a")
    d2, _ = _sweep_dir(tmp_path / "b")  # the same spec and seeds: the same loss draws, not new repetitions
    report.write([d1, d2], tmp_path / "out")
    runs = list(csv.DictReader((tmp_path / "out" / "runs.csv").open()))
    assert len(runs) == 10 and sum(r["pooled"] == "True" for r in runs) == 5
    assert {r["left_out"].split(" as ")[0] for r in runs if r["pooled"] == "False"} == {"same seed"}
    assert all(r["sweep"] == str(d2) for r in runs if r["pooled"] == "False")


def test_a_sweep_of_only_dirty_runs_has_nothing_to_pool(tmp_path: Path) -> None:
    d, _ = _sweep_dir(tmp_path)
    for key in ("p000-r0", "p000-r1", "p000-r2", "p001-r0", "p001-r1", "p001-r2"):
        _spoil(d, key, git_revision="unknown")
    proc = subprocess.run([*CCLAB, "report", str(d)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2
    assert (
        proc.stderr.startswith(f"cclab: {d} has no complete run to pool yet; left out: ")
        and "unknown tree" in proc.stderr
    )


def test_a_reference_archive_regenerates_the_report(tmp_path: Path) -> None:
    d, _ = _sweep_dir(tmp_path)
    archive = tmp_path / "ref" / "rep.tar.xz"
    proc = subprocess.run([*CCLAB, "report", str(d), "--pack", str(archive)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(
        [*CCLAB, "report", "--from-reference", str(archive)], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    again = tmp_path / "ref" / "rep"
    assert (again / "table.csv").read_text() == (d / "report" / "table.csv").read_text()
    ours, theirs = _runs_csv(d / "report"), _runs_csv(again)
    assert {k: {c: v for c, v in r.items() if c != "sweep"} for k, r in ours.items()} == {
        k: {c: v for c, v in r.items() if c != "sweep"} for k, r in theirs.items()
    }
    # named by the archive, not by the directory it was unpacked into and removed
    assert {r["sweep"] for r in theirs.values()} == {f"{archive}/d0"}


def test_an_archive_in_parts_regenerates_the_same_report(tmp_path: Path) -> None:
    """A campaign's archive grows by parts, each holding the runs made since the last (`pack` with `only`):
    reported together they give the report of the whole directory."""
    d, _ = _sweep_dir(tmp_path)
    done = [pt["run_dir"] for pt in json.loads((d / "sweep.json").read_text())["points"] if pt["run_dir"]]
    parts = [tmp_path / "ref" / "rep.tar.xz", tmp_path / "ref" / "rep.2.tar.xz"]
    pool.pack([d], parts[0], only=done[:2])
    pool.pack([d], parts[1], only=done[2:])
    argv = [*CCLAB, "report", "--from-reference", str(parts[0]), "--from-reference", str(parts[1])]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report.write([d], d / "report", plots=False)
    assert (tmp_path / "ref" / "rep" / "table.csv").read_text() == (d / "report" / "table.csv").read_text()
    assert {r["sweep"] for r in _runs_csv(tmp_path / "ref" / "rep").values()} == {f"{a}/d0" for a in parts}


def test_source_hash_covers_the_tracked_data_plane_and_algorithm_sources(tmp_path: Path) -> None:
    """A run's hash covers the shared sources and its own target's, tracked, as in the working tree; another
    target's sources are not part of it (an FPGA change leaves a kernel campaign's runs poolable), nor is the
    documentation beside them (a README's edit neither)."""
    repo = tmp_path / "repo"
    names = (
        "p4/ebpf/a.bpf.c",
        "p4/v1model/b.p4",
        "fpga/rtl/e.v",
        "hosts/cc/core/x.h",
        "controller/dataplane/k.py",
        "controller/dataplane/kernel.py",
        "controller/dataplane/fpgasim.py",
        "docs/readme.md",
        "p4/ebpf/README.md",
    )
    for name in names:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(name)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    kernel, fpga = rundir.source_hash("kernel", repo), rundir.source_hash("fpga-sim", repo)
    assert re.fullmatch(r"[0-9a-f]{64}", kernel) and kernel != fpga
    (repo / "docs/readme.md").write_text("changed")  # outside the source directories
    (repo / "p4/ebpf/README.md").write_text("changed")  # documentation beside the sources
    (repo / "p4/ebpf/untracked.bpf.c").write_text("new")  # not tracked
    assert (rundir.source_hash("kernel", repo), rundir.source_hash("fpga-sim", repo)) == (kernel, fpga)
    for other in ("p4/v1model/b.p4", "fpga/rtl/e.v", "controller/dataplane/fpgasim.py"):  # not the kernel's
        (repo / other).write_text("changed")
    assert rundir.source_hash("kernel", repo) == kernel and rundir.source_hash("fpga-sim", repo) != fpga
    for own in ("p4/ebpf/a.bpf.c", "controller/dataplane/kernel.py", "hosts/cc/core/x.h", "controller/dataplane/k.py"):
        (repo / own).write_text("changed")  # the kernel target's own, then the shared sources
        assert rundir.source_hash("kernel", repo) != kernel, own
        kernel = rundir.source_hash("kernel", repo)
    assert rundir.source_hash("kernel", tmp_path / "no-repo") == "unknown"


E2E_SPEC = """
name = "claims_e2e"
duration_s = 3
dataplane = "kernel"
seed = 7

[topology]
kind = "dumbbell"
pairs = 1

[bottleneck]
rate_mbps = 10
queue_pkts = 50

[[flows]]
algo = "reno"
src = "h1"
dst = "r1"

[sweep]
repetitions = 5
"flows[0].algo" = ["reno", "cubic"]
"""

RENO_CLAIM = """
[[claims]]
id = "reno-uses-the-link"
source = "TCPW faster-recovery slides, slide 9"
paper = "a made-up floor for this test"
metric = "utilization"
algo = "all"
at = { "flows[0].algo" = "reno" }
compare = "order"
value = 9.0
than = 0.1
margin = 0.0
margin_why = "the order"
n = 5
n_why = "a ninefold effect"
warmup_s = 0
"""

# the same floor judged twice: on the whole run, and over [1 s, end] (its slow start left out)
E2E_CLAIMS = (
    RENO_CLAIM
    + RENO_CLAIM.replace('"reno-uses-the-link"', '"reno-uses-the-link-after-1s"').replace(
        "warmup_s = 0", "warmup_s = 1"
    )
    + """
[[claims]]
id = "cubic-as-reno"
source = "TCPW faster-recovery slides, slide 9"
paper = "1"
metric = "flow_throughput_ratio"
algo = "cubic/reno"
compare = "ratio"
value = 1.0
margin = 0.5
margin_why = "wide on purpose"
n = 10
n_why = "no effect claimed: n >= 10, more than this sweep has"
warmup_s = 0
"""
)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.usefixtures("clean_host")
def test_a_real_sweep_is_pooled_judged_packed_and_regenerated(tmp_path: Path) -> None:
    """2 points x 5 repetitions x 3 s at 10 Mbit/s: runs record commit and source hash, the report pools them by
    the rule (or refuses a dirty tree's runs, naming one), judges the claims and regenerates from its archive."""
    spec_file = tmp_path / "e2e.toml"
    spec_file.write_text(E2E_SPEC)
    (tmp_path / "e2e.claims.toml").write_text(E2E_CLAIMS)
    d = tmp_path / "sweep"
    proc = subprocess.run(
        [*CCLAB, "sweep", str(spec_file), "--dir", str(d), "--no-live"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    commit, source = rundir.git_revision(), rundir.source_hash("kernel")
    for run_dir in (d / "runs").glob("*/*"):
        m = json.loads((run_dir / "manifest.json").read_text())
        assert (m["git_revision"], m["source_hash"]) == (commit, source), run_dir
    archive = tmp_path / "ref.tar.xz"
    proc = subprocess.run([*CCLAB, "report", str(d), "--pack", str(archive)], cwd=REPO, capture_output=True, text=True)
    assert archive.exists(), proc.stderr
    again = [*CCLAB, "report", "--from-reference", str(archive), "--out", str(tmp_path / "again")]
    if proc.returncode != 0:
        # nothing to pool: a work tree with changes, or a host so busy every run failed its fidelity check
        why = "ran from a dirty or unknown tree" if commit.endswith("-dirty") else "failed its fidelity check"
        assert proc.returncode == 2 and f"has no complete run to pool yet; left out: {d}/runs/" in proc.stderr
        assert why in proc.stderr, proc.stderr
        for argv in ([*CCLAB, "report", str(d), "--all-runs"], [*again, "--all-runs"]):
            proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "again" / "table.csv").read_text() == (d / "report" / "table.csv").read_text()
        print(f"archive of 10 runs: {archive.stat().st_size} bytes; nothing pooled ({why})")
        return
    runs = _runs_csv(d / "report")
    assert len(runs) == 10
    assert {(r["commit"], r["source_hash"]) for r in runs.values()} == {(commit, source)}
    failed = [r for r in runs.values() if r["left_out"].startswith("failed its fidelity check")]
    assert all(r["utilization"] != "" for r in runs.values())  # left-out runs' figures are shown too
    assert all(r["pooled"] == "True" for r in runs.values() if r not in failed)
    verdicts = {r["claim"]: r for r in csv.DictReader((d / "report" / "verdicts.csv").open())}
    reno = verdicts["reno-uses-the-link"]
    n_reno = sum(r["pooled"] == "True" for r in runs.values() if r["flows[0].algo"] == "reno")
    failed_reno = sum(r["flows[0].algo"] == "reno" for r in failed)
    assert reno["fidelity_passed"] == f"{n_reno}/{n_reno + failed_reno}" and reno["run_length_s"] == "3"
    # 10 Mbit/s for 3 s: a reno flow uses well over a tenth of the link once its 5 runs all passed
    assert reno["verdict"] == ("holds" if n_reno == 5 else "inconclusive"), (reno, failed)
    after = verdicts["reno-uses-the-link-after-1s"]  # judged on the tables over [1 s, end]
    assert (after["verdict"], after["warmup_s"]) == (reno["verdict"], "1"), after
    rows = [
        r for r in csv.DictReader((d / "report" / "warmup-1s" / "table.csv").open()) if r["metric"] == "utilization"
    ]
    assert len(rows) == 2 and all(int(r["n"]) > 0 for r in rows) and "warmup-1s/" in after["note"], (rows, after)
    assert verdicts["cubic-as-reno"]["verdict"] == "inconclusive" and int(verdicts["cubic-as-reno"]["n"]) <= 5
    proc = subprocess.run(again, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "again" / "verdicts.csv").read_text() == (d / "report" / "verdicts.csv").read_text()
    assert (tmp_path / "again" / "table.csv").read_text() == (d / "report" / "table.csv").read_text()
    again_w = (tmp_path / "again" / "warmup-1s" / "table.csv").read_text().splitlines()
    ours_w = (d / "report" / "warmup-1s" / "table.csv").read_text().splitlines()
    # the archive keeps link.csv (the utilization after the warm-up), not links.csv (the loss after it)
    assert again_w == [r for r in ours_w if ",measured_loss," not in r], "the archive lost the link series"
    print(f"archive of 10 runs: {archive.stat().st_size} bytes; failed fidelity: {len(failed)}")


def test_all_runs_takes_every_complete_run_and_judges_nothing(tmp_path: Path) -> None:
    d, _ = _sweep_dir(tmp_path)
    _spoil(d, "p000-r0", git_revision=COMMIT + "-dirty")
    (tmp_path / "rep.claims.toml").write_text(CLAIMS)
    m = json.loads((d / "sweep.json").read_text())
    rundir.write_json(d / "sweep.json", {**m, "spec_path": str(tmp_path / "rep.toml")})
    names = {p.name for p in report.write([d], everything=True)}
    assert "verdicts.csv" not in names
    assert {r["pooled"] for r in _runs_csv(d / "report").values()} == {"True"}
    assert "verdicts.csv" in {p.name for p in report.write([d], tmp_path / "strict")}

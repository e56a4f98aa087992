"""Runs side by side (`cclab sweep --jobs N`): bad --jobs refused (no root); two isolated runs of one spec that
overlap in time, and a sweep with --jobs 2, complete and leave nothing on the host (root); `cclab bench sweep`,
which says how many side by side a machine holds, measures a sweep's grid point by point (root)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from controller import cc, system
from controller.bench import sweep as bench_sweep
from controller.experiment import executors, sweep
from tests.conftest import CCLAB, REPO, loss_interval
from tests.test_run import TUNED, _csv
from tests.test_sweep import _complete_runs, _raw, _toml
from tests.timing import TRIED_AGAIN


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--jobs", "0"], "--jobs 0: a number >= 1"),
        (["--jobs", "2", "--executor", "vm"], "--jobs 2: a number >= 1, above 1 only for --executor local"),
    ],
)
def test_bad_jobs_is_refused_in_one_line(tmp_path: Path, extra: list[str], message: str) -> None:
    spec_file = _toml(_raw(repetitions=2, **{"flows[0].algo": ["reno", "cubic"]}), tmp_path / "t.toml")
    argv = [*CCLAB, "sweep", str(spec_file), "--dir", str(tmp_path / "d"), *extra]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith(f"cclab: {message}"), proc.stderr
    assert not (tmp_path / "d").exists()


def _host_state() -> dict[str, object]:
    """What the host's namespace shows of runs: links, named namespaces, pins, the shared-state record."""
    netns = Path("/run/netns")
    return {
        "links": sorted(os.listdir("/sys/class/net")),
        "netns": sorted(os.listdir(netns)) if netns.is_dir() else [],
        "pins": sorted(p.name for p in system.PIN_ROOT.iterdir()) if system.PIN_ROOT.exists() else [],
        "hold": executors.HOLD.exists(),
        "htb_hysteresis": system.read_sysctl(executors.sysctls.HTB_HYSTERESIS[0][0]),
    }


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.usefixtures("clean_host")
def test_two_isolated_runs_of_one_spec_overlap_and_leave_nothing(tmp_path: Path) -> None:
    import tomli_w

    raw = dict(tomllib_load(REPO / "experiments" / "demo.toml"))
    raw["duration_s"] = 8
    raw["bottleneck"] = {**raw["bottleneck"], "rate_mbps": 20}
    spec_file = tmp_path / "demo8.toml"
    spec_file.write_text(tomli_w.dumps(raw))
    before = _host_state()
    runs = _side_by_side(spec_file, tmp_path)
    for name, run_dir in runs.items():
        summ = json.loads((run_dir / "summary.json").read_text())
        # what cross-talk between the runs would break: a flow's counted bytes against its own iperf3's, and the
        # random drops against the run's own loss; how many runs this machine holds with every check passing
        # (base RTTs, CPU) is for `cclab bench sweep` to say, not this test
        checks = summ["fidelity"]["checks"]
        own = {k: v for k, v in checks.items() if k.endswith("wire_over_received_bytes")}
        assert len(own) == len(summ["flows"]) and all(v["ok"] for v in own.values()), (name, checks)
        drops = checks["random_drops_in_99pct_interval"]  # held to the tests' interval, not the run's 99 %
        lo, hi = loss_interval(int(drops["note"].removeprefix("n = ")), raw["bottleneck"]["per"])
        assert lo <= drops["value"] <= hi, (name, drops, (lo, hi))
    assert _host_state() == before


def _side_by_side(spec_file: Path, tmp_path: Path) -> dict[str, Path]:
    """Two isolated runs of `spec_file` started together: each complete, and they overlapped in time."""
    spans: dict[str, tuple[float, float, int, str]] = {}

    def one(name: str) -> None:
        t0 = time.monotonic()
        with executors.shared_kernel_state(spec_file):
            rc, error = executors.run_cclab(spec_file, tmp_path / name, plots=False, isolated=True)
        spans[name] = (t0, time.monotonic(), rc, error)

    threads = [threading.Thread(target=one, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {n: s[2:] for n, s in spans.items()} == {"a": (0, ""), "b": (0, "")}, spans
    # they overlapped: each started before the other ended
    assert spans["a"][0] < spans["b"][1] and spans["b"][0] < spans["a"][1]
    runs = {}
    for name in ("a", "b"):
        (run_dir,) = list((tmp_path / name).iterdir())
        assert sweep.is_complete(run_dir), run_dir
        runs[name] = run_dir
    return runs


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.usefixtures("clean_host")
def test_runs_side_by_side_each_read_their_own_algorithm_state(tmp_path: Path) -> None:
    """The algorithms' export maps are the kernel's, one for both runs, and both runs' flows have the same addresses
    and ports: each run must read its own sockets' entries only (keyed by the sender's network namespace too).
    MPTCP shows a mix-up at once: each connection's subflows must carry one token, the run's own."""
    import tomli_w

    raw = dict(tomllib_load(REPO / "labs" / "06-mptcp" / "solution" / "coupled.toml"))
    raw["duration_s"] = 8
    spec_file = tmp_path / "coupled8.toml"
    spec_file.write_text(tomli_w.dumps(raw))
    for attempt in range(1, JOIN_TRIES + 1):
        (tmp_path / f"try{attempt}").mkdir()
        runs = _side_by_side(spec_file, tmp_path / f"try{attempt}")
        unjoined = {name: u for name, d in runs.items() if (u := _unjoined(d))}
        if not unjoined or attempt == JOIN_TRIES:
            break
        # a join the kernel never completed is the run's own fidelity failure (cclab names it), not a mix-up
        TRIED_AGAIN.append(f"side-by-side mptcp runs, try {attempt} of {JOIN_TRIES}: a subflow never joined {unjoined}")
    tokens: dict[str, set[int]] = {}
    coupled = 0
    for name, run_dir in runs.items():
        conns = json.loads((run_dir / "summary.json").read_text())["mptcp"]
        assert [c["id"] for c in conns] == ["f1", "f3"], conns
        named = _unjoined(run_dir)
        for c in conns:
            coupling = c["coupling"]
            # one token on all its subflows (another run's would be a mix-up), and coupled unless the connection
            # fell back to TCP, which the run's own fidelity check names
            assert len(coupling["tokens"]) == 1, (name, c["id"], coupling)
            fell_back = any(u.startswith(f"{c['id']}.subflows_carrying_data") for u in named)
            assert coupling["coupled"] is True or fell_back, (name, c["id"], coupling, named)
            coupled += coupling["coupled"] is True
        tokens[name] = {t for c in conns for t in c["coupling"]["tokens"]}
    assert not tokens["a"] & tokens["b"], f"one token in both runs: {tokens}"
    assert coupled, f"no connection of either run joined its second subflow in {JOIN_TRIES} tries"


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.usefixtures("clean_host")
def test_sweep_with_two_jobs_completes_every_run(tmp_path: Path) -> None:
    spec_file = _toml(_raw(repetitions=2, **{"flows[0].algo": ["reno", "cubic"]}), tmp_path / "t.toml")
    d = tmp_path / "sweep"
    before = _host_state()
    proc = subprocess.run(
        [*CCLAB, "sweep", str(spec_file), "--dir", str(d), "--no-live", "--jobs", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(_complete_runs(d)) == 4
    assert all(p["status"] == "complete" for p in json.loads((d / "sweep.json").read_text())["points"])
    assert _host_state() == before


#: side-by-side mptcp runs made again where a subflow never joined its connection (a fidelity failure the run names:
#: the connection fell back to TCP, e.g. MPCapableDataFallback; a CI run on 2026-12-05 saw it in both tries, in 3
#: of 8 connections), so that the coupling is seen; a connection that fell back still carries one token
JOIN_TRIES = 2


def _unjoined(run_dir: Path) -> list[str]:
    """The run's failing `<flow>.subflows_carrying_data` fidelity checks: connections whose second subflow never
    carried a byte, with cclab's note of why."""
    checks = json.loads((run_dir / "summary.json").read_text())["fidelity"]["checks"]
    return [f"{k}: {v.get('note')}" for k, v in checks.items() if k.endswith(".subflows_carrying_data") and not v["ok"]]


def tomllib_load(path: Path) -> dict[str, Any]:
    from controller.spec import tomllib

    return dict(tomllib.loads(path.read_text()))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--jobs", "2,1"], "--jobs 2,1: want rising numbers >= 1, comma-separated"),
        (["--jobs", "0,1"], "--jobs 0,1: want rising numbers >= 1"),
        (["--jobs", "two"], "--jobs two: want rising numbers >= 1"),
        (["--runs", "0"], "--runs 0: want a number >= 1"),
        (["--spec", "gone.toml"], "spec error: cannot read gone.toml"),
    ],
)
def test_bench_sweep_refuses_bad_input_in_one_line(extra: list[str], message: str) -> None:
    proc = subprocess.run([*CCLAB, "bench", "sweep", *extra], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith(f"cclab: {message}"), proc.stderr
    assert proc.stderr.count("\n") == 1


@pytest.mark.root
def test_bench_sweep_refuses_a_spec_its_run_length_cuts_before_any_run(tmp_path: Path) -> None:
    """Every spec is checked at the bench's run length before the first runs: a later spec's flow starting past
    it must not cost the earlier specs' figures."""
    plain = _raw()
    del plain["sweep"]
    good = _toml(plain, tmp_path / "good.toml")
    late = {**plain, "name": "late"}
    late["flows"] = [{**late["flows"][0], "start_s": 1.5}]
    bad = _toml(late, tmp_path / "late.toml")
    argv = [*CCLAB, "bench", "sweep", "--spec", str(good), "--spec", str(bad), "--jobs", "1", "--runs", "1"]
    proc = subprocess.run([*argv, "--duration-s", "1"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("cclab: spec error: late with runs 1 s long: flows[0].start_s = 1.5"), proc.stderr
    assert "at a time" not in proc.stdout + proc.stderr, "a run started before the last spec was checked"


def test_bench_sweep_cuts_a_spec_to_its_runs() -> None:
    """A run cut to the bench's length keeps the link changes within it (the later ones are left out) and sends
    its finite transfers for the whole run; both counted, the spec it came from untouched."""
    raw: dict[str, Any] = {
        "duration_s": 400,
        "bottleneck": {"rate_mbps": 10, "schedule": [{"at_s": 20, "per": 0.01}, {"at_s": 60, "per": 0.0}]},
        "links": {"l2": {"rate_mbps": 1, "schedule": [{"at_s": 40, "rate_mbps": 2}, {"at_s": 41, "rate_mbps": 1}]}},
        "flows": [{"algo": "reno", "src": "h0", "dst": "r0", "bytes": 10_000_000}, {"algo": "reno", "src": "h1"}],
    }
    cut, changed = bench_sweep.cut_to(raw, 40)
    assert changed == {bench_sweep.STEPS_LEFT_OUT: 2, bench_sweep.TRANSFERS_BACKLOGGED: 1}
    assert cut["duration_s"] == 40
    assert cut["bottleneck"]["schedule"] == [{"at_s": 20, "per": 0.01}]
    assert cut["links"]["l2"]["schedule"] == [{"at_s": 40, "rate_mbps": 2}]
    assert cut["flows"] == [{"algo": "reno", "src": "h0", "dst": "r0"}, {"algo": "reno", "src": "h1"}]
    assert len(raw["bottleneck"]["schedule"]) == 2 and raw["duration_s"] == 400 and raw["flows"][0]["bytes"]


def test_bench_sweep_names_a_run_that_did_not_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that left no complete directory is counted as failed and named with why, not just missing from the
    pass count. (The executor is replaced: this is the bench's bookkeeping; the root test below runs real runs.)"""

    def side_by_side(tasks: list[sweep.Task], started: Any, ended: Any, jobs: int) -> None:
        for t in tasks:
            if t.key == "r0":  # a run that began: its partial results stay to be read
                (t.runs_dir / "t-r0").mkdir(parents=True)
                ended(sweep.TaskResult(t.key, 2, f"f1: iperf3: interrupt (partial results in {t.runs_dir}/t-r0)"))
            else:
                ended(sweep.TaskResult(t.key, 2, "cclab: iperf3 on h1 exited 1"))

    monkeypatch.setattr(executors, "run_side_by_side", side_by_side)
    keep = tmp_path / "kept"
    m = bench_sweep._measure([tmp_path / "t.toml"], tmp_path / "out", 1, 2, keep)
    assert (m["complete"], m["fidelity_ok"], m["pass_rate"]) == (0, 0, 0.0), m
    assert m["failed"] == [
        f"r0: did not complete (exit 2: f1: iperf3: interrupt (partial results in {keep}/r0/t-r0))",
        "r1: did not complete (exit 2: cclab: iperf3 on h1 exited 1)",
    ], m
    assert (keep / "r0" / "t-r0").is_dir() and not (tmp_path / "out" / "r0").exists()


def test_bench_sweep_covers_the_grid_before_a_points_next_repetition(tmp_path: Path) -> None:
    spec_file = _toml(_raw(repetitions=3, **{"flows[0].algo": ["reno", "cubic"]}), tmp_path / "t.toml")
    name, raws = bench_sweep.specs_of(spec_file)
    assert name == "tiny"
    got = [(r["name"], r["flows"][0]["algo"]) for r in raws]
    assert got == [(f"tiny-p00{p}-r{r}", algo) for r in range(3) for p, algo in enumerate(("reno", "cubic"))], got
    # runs of one point side by side draw their repetitions' random losses, not one seed's
    seeds = [r["seed"] for r in raws]
    assert seeds[0] == seeds[1] and len({seeds[0], seeds[2], seeds[4]}) == 3, seeds
    plain = _raw()
    del plain["sweep"]
    assert bench_sweep.specs_of(_toml(plain, tmp_path / "plain.toml")) == ("tiny", [plain])


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.usefixtures("clean_host")
def test_bench_sweep_of_a_spec_judges_every_run_at_every_n(tmp_path: Path) -> None:
    spec_file = _toml(_raw(**{"flows[0].algo": ["reno", "cubic"]}), tmp_path / "t.toml")
    before = _host_state()
    proc = subprocess.run(
        [*CCLAB, "bench", "sweep", "--spec", str(spec_file), "--jobs", "1,2", "--runs", "2", "--duration-s", "3"]
        + ["--json", "--keep-failed", str(tmp_path / "kept")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(proc.stdout)
    assert (res["jobs"], list(res["specs"])) == ([1, 2], ["tiny"])
    for n, m in zip((1, 2), res["specs"]["tiny"], strict=True):
        # every run completed and was judged: passed, or named with the checks it failed
        assert (m["jobs"], m["complete"]) == (n, 2), m
        assert m["fidelity_ok"] + len(m["failed"]) == 2 and m["runs_per_hour"] > 0, m
        assert all(why.startswith(("r0: ", "r1: ")) for why in m["failed"]), m
    kept = sorted(d.relative_to(tmp_path / "kept") for d in (tmp_path / "kept").glob("s0-n*/r*"))
    failed = [Path(f"s0-n{m['jobs']}", why.split(":")[0]) for m in res["specs"]["tiny"] for why in m["failed"]]
    assert kept == sorted(failed), "each failed run's directory stays, and only theirs"
    assert _host_state() == before


def test_points_side_by_side_must_set_an_algorithms_tunables_alike(tmp_path: Path) -> None:
    import tomli_w

    files = []
    for i, alpha in enumerate((8, 8, 16)):
        raw = {**TUNED, "algorithms": {"logwestwood": {"alpha": alpha, "alpha_adapt": 0}}}
        files.append(tmp_path / f"p{i}.toml")
        files[-1].write_text(tomli_w.dumps(raw))
    executors.shareable_together(executors.loaded(files[:2]))
    with pytest.raises(executors.ExecutorError) as exc:
        executors.shareable_together(executors.loaded(files))
    assert str(exc.value).startswith(
        "p0.toml and p2.toml set algorithms.logwestwood differently (alpha=8 alpha_adapt=0 per_ack=0; alpha=16 "
        "alpha_adapt=0 per_ack=0): runs side by side share the kernel's algorithm registry"
    ), exc.value


def test_the_next_run_is_the_first_that_agrees_with_every_run_going() -> None:
    a8: executors.Settings = {"logwestwood": (("alpha", 8),)}
    a16: executors.Settings = {"logwestwood": (("alpha", 16),)}
    reno: executors.Settings = {}
    both: executors.Settings = {**a8, "btbe": (("beta", 1),)}
    assert executors.next_task([a16, a8, both], [a8]) == 1
    assert executors.next_task([a16, both], [a8]) == 1  # an algorithm of its own beside: no matter
    assert executors.next_task([a16], [a8, reno]) is None  # it waits for the alpha-8 run to end
    assert executors.next_task([a16], []) == 0
    assert executors.next_task([reno, a8], [a16]) == 0


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.usefixtures("clean_host")
def test_points_that_set_tunables_apart_go_side_by_side_point_by_point(tmp_path: Path) -> None:
    """Two points of LogWestwood+, alpha 8 and alpha 16, two runs each, two at a time, handed over repetition by
    repetition: each point's two runs go together, never beside the other point's, and each ran with its own
    alpha; the last out unregisters it."""
    import tomli_w

    tasks = []
    for rep in range(2):
        for i, alpha in enumerate((8, 16)):
            f = tmp_path / f"p{i}.toml"
            f.write_text(tomli_w.dumps({**TUNED, "algorithms": {"logwestwood": {"alpha": alpha, "alpha_adapt": 0}}}))
            tasks.append(sweep.Task(f"p{i}-r{rep}", f, tmp_path / "runs" / f"p{i}-r{rep}", plots=False))
    before = _host_state()
    events: list[tuple[str, str]] = []
    ends: list[sweep.TaskResult] = []

    def ended(r: sweep.TaskResult) -> None:
        events.append(("end", r.key))
        ends.append(r)

    executors.run_side_by_side(tasks, lambda key: events.append(("start", key)), ended, jobs=2)
    assert [(r.key, r.returncode) for r in ends if r.returncode] == [], ends
    starts = [k for e, k in events if e == "start"]
    assert starts == ["p0-r0", "p0-r1", "p1-r0", "p1-r1"], events
    first_p1 = events.index(("start", "p1-r0"))
    assert {k for e, k in events[:first_p1] if e == "end"} == {"p0-r0", "p0-r1"}, events
    assert events.index(("start", "p0-r1")) < events.index(("end", "p0-r0")), f"p0's runs did not overlap: {events}"
    for t in tasks:
        (run_dir,) = list(t.runs_dir.iterdir())
        assert sweep.is_complete(run_dir), run_dir
        params = json.loads((run_dir / "manifest.json").read_text())["algorithms"]["logwestwood"]["params"]
        assert params["alpha"] == (8 if t.key.startswith("p0") else 16), (t.key, params)
    assert _host_state() == before
    assert "logwestwood" not in cc.available()


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.usefixtures("clean_host")
def test_runs_side_by_side_share_one_setting_of_an_algorithms_tunables(tmp_path: Path) -> None:
    """LogWestwood+ with alpha = 8 fixed in two runs at once: the first in registers it so, the other finds it so;
    both run with alpha = 8 at every poll and record it, and the last out unregisters it."""
    import tomli_w

    spec_file = tmp_path / "tuned.toml"
    spec_file.write_text(tomli_w.dumps(TUNED))
    before = _host_state()
    for name, run_dir in _side_by_side(spec_file, tmp_path).items():
        rows = [r for r in _csv(run_dir / "ccstate.csv") if r["algo"] == "logwestwood"]
        assert rows and {int(r["alpha_x1024"]) for r in rows} == {8 * 1024}, name
        algo = json.loads((run_dir / "manifest.json").read_text())["algorithms"]["logwestwood"]
        assert algo["params"] == {"alpha": 8, "alpha_adapt": 0, "per_ack": 0}, (name, algo)
    assert _host_state() == before
    assert "logwestwood" not in cc.available()

"""A campaign: its file refused in one line, sweeps in turn, a stop between runs, and its state from the
sweep directories. The runs are faked (an executor that writes run directories): what a run does is
test_sweep's and test_run's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controller import cli, system
from controller.experiment import campaign, executors, sweep
from controller.results import claims as claims_mod
from controller.results import pool, rundir
from controller.spec import sweep as sweep_spec
from controller.spec.sweep import SweepError
from tests.conftest import REPO
from tests.test_report import E2E_SPEC

#: a sweep of 2 points x 5 repetitions, 3 s each
SPEC = E2E_SPEC.replace('name = "claims_e2e"', 'name = "{name}"')


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two sweep specs and a campaign file listing them; sweeps and the campaign's state under tmp_path."""
    for name in ("one", "two"):
        (tmp_path / f"{name}.toml").write_text(SPEC.format(name=name))
    (tmp_path / "campaign.toml").write_text('sweeps = ["one.toml", "two.toml"]\n')
    monkeypatch.setattr(sweep, "SWEEPS", tmp_path / "sweeps")
    monkeypatch.setattr(campaign, "PID_FILE", tmp_path / "run" / "campaign.pid")
    monkeypatch.setattr(campaign, "STOP_FILE", tmp_path / "run" / "campaign.stop")
    return tmp_path / "campaign.toml"


def _write_run(task: sweep.Task, fidelity_ok: bool = True, source_hash: str | None = None) -> None:
    """A complete run of this tree's sources (or of `source_hash`)."""
    d = task.runs_dir / f"run-{task.key}"
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"complete": True, "fidelity": {"ok": fidelity_ok}}))
    source_hash = source_hash or rundir.source_hash("kernel")
    (d / "manifest.json").write_text(json.dumps({"source_hash": source_hash, "git_revision": "328b831"}))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("sweeps = []\n", "sweeps = []: want a non-empty list of spec paths"),
        ('sweeps = "one.toml"\n', "sweeps = 'one.toml': want a non-empty list"),
        ('sweeps = ["one.toml"]\norder = 1\n', "unknown key 'order': a campaign file has only `sweeps`"),
        ('sweeps = ["one.toml", "gone.toml"]\n', "sweeps[1] = 'gone.toml': no such spec"),
        ("sweeps = [\n", "cannot read the campaign file"),
        ('sweeps = [{spec = "one.toml"}]\n', "sweeps[0] = {'spec': 'one.toml'}: want a spec path or a table"),
        ('sweeps = [{spec = "one.toml", jobs = 0}]\n', "sweeps[0].jobs = 0: want a whole number >= 1"),
        ('sweeps = [{spec = "one.toml", jobs = 2.5}]\n', "sweeps[0].jobs = 2.5: want a whole number >= 1"),
        ('sweeps = [{spec = "gone.toml", jobs = 2}]\n', "sweeps[0] = 'gone.toml': no such spec"),
        ("sweeps = [3]\n", "sweeps[0] = 3: want a spec path or a table"),
    ],
)
def test_bad_campaign_file_is_refused_in_one_line(files: Path, text: str, says: str) -> None:
    files.write_text(text)
    with pytest.raises(SweepError) as exc:
        campaign.load(files)
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_an_entry_may_name_its_runs_side_by_side(files: Path) -> None:
    files.write_text('sweeps = [{spec = "one.toml", jobs = 4}, "two.toml"]\n')
    one, two = campaign.load(files)
    assert (one.name, two.name) == ("one.toml", "two.toml")
    assert campaign.jobs(files) == {one: 4}


def test_the_repository_campaign_lists_sweeps_that_load() -> None:
    for p in campaign.load(campaign.DEFAULT):
        assert sweep_spec.load(p).points


def _fake_runs(ran: list[str], stop_after: int) -> Callable[..., tuple[int, str]]:
    """A run that writes a complete run directory at once, and asks the campaign to stop at the `stop_after`th."""

    def run(t: sweep.Task, *_: Any) -> tuple[int, str]:
        _write_run(t)
        ran.append(f"{t.runs_dir.parent.parent.name}/{t.key}")
        if len(ran) == stop_after:
            campaign.request_stop()
        return 0, ""

    return run


def test_sweeps_run_in_turn_and_a_stop_is_seen_between_runs(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = campaign.load(files)
    ran: list[str] = []
    # one at a time: a run is `cclab run` of its point (run_cclab)
    monkeypatch.setattr(executors, "run_cclab", lambda f, d, *a: _fake_runs(ran, 3)(sweep.Task(f.stem, f, d, False)))
    execute = executors.side_by_side(1, stop=campaign.stop_requested)
    with campaign.claimed():
        done = campaign.run(specs, lambda sw, d: sweep.run(sw, d, execute))
    # the run under way when the stop came finished; nothing started after it, not even the next sweep
    assert ran == ["one/p000-r0", "one/p001-r0", "one/p000-r1"]
    assert [sw.name for sw, _ in done] == ["one"]
    assert not campaign.STOP_FILE.exists() and not campaign.PID_FILE.exists()
    # run again: it goes on where it stopped, into the second sweep
    with campaign.claimed():
        campaign.run(specs, lambda sw, d: sweep.run(sw, d, execute))
    assert ran[3] == "one/p001-r1" and len(ran) == 20 and ran[10] == "two/p000-r0" and ran[-1] == "two/p001-r4"


def test_a_stop_starts_no_run_beside_those_going(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Side by side the stop is seen before each start, not only between batches: the runs going finish."""
    (one, _two) = campaign.load(files)
    ran: list[str] = []
    monkeypatch.setattr(executors, "_isolated_run", _fake_runs(ran, 3))
    monkeypatch.setattr(executors, "shareable", lambda *_: None)  # no kernel state: the runs are fake
    with campaign.claimed():
        done = campaign.run([one], lambda sw, d: sweep.run(sw, d, executors.side_by_side(2, campaign.stop_requested)))
    # two go at a time: the fourth may have started beside the third before it asked to stop, no later one did
    assert set(ran[:2]) == {"one/p000-r0", "one/p001-r0"}, ran
    assert set(ran[2:]) <= {"one/p000-r1", "one/p001-r1"} and len(ran) in (3, 4), ran
    [(_, progress)] = done
    assert progress.done == len(ran) < progress.total, progress


def _first_sweep(spec: Path) -> tuple[Path, list[sweep.Task]]:
    """The sweep's directory, prepared, and its runs to do."""
    sw = sweep_spec.load(spec)
    d = sweep.default_dir(sw)
    sweep.prepare(sw, d)
    return d, sweep.pending(sw, d)


def test_state_counts_complete_runs_and_names_fidelity_failures(files: Path) -> None:
    one, _two = campaign.load(files)
    d, tasks = _first_sweep(one)
    _write_run(tasks[0])
    _write_run(tasks[1], fidelity_ok=False)
    st = campaign.state(one)
    assert (st.total, st.complete, st.fidelity_failed) == (10, 2, [tasks[1].key])
    assert st.hours_left == pytest.approx(8 * 3 / 3600)


def test_a_directory_with_runs_of_other_sources_is_counted_and_refused(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs made before a change to the sources a run's hash covers do not pool with the runs after it: status
    counts them, and the campaign does not go on in their directory (it would count them among its n)."""
    one, _two = campaign.load(files)
    d, tasks = _first_sweep(one)
    _write_run(tasks[0])
    _write_run(tasks[1], source_hash="53eff6a0fc9b" + "0" * 52)
    assert campaign.state(one).other_sources == 1
    assert cli.main(["campaign", "status", str(files)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "2 of 20 runs complete (1 of other sources than this tree's), " in said
    ran: list[str] = []

    def run_sweep(sw: sweep_spec.Sweep, d: Path) -> sweep.Progress:
        ran.append(sw.name)
        return sweep.Progress(0)

    with pytest.raises(
        SweepError, match=rf"one: {d} holds 1 complete runs of other sources .* hash 53eff6a0fc9b: p001-r0"
    ):
        campaign.run([one], run_sweep)
    assert ran == []
    # once complete, the sweep has nothing left to run: a campaign goes past it to the others
    for t in tasks[2:]:
        _write_run(t)
    campaign.run([one, _two], run_sweep)
    assert ran == ["one", "two"]


def test_a_sweep_with_a_point_that_cannot_share_is_refused_before_any_run(files: Path) -> None:
    """A sweep to go several at a time with a point that builds and registers an algorithm of its own is refused
    before the campaign's first run, naming the point, not when its first batch starts, hours in; one whose points
    set an algorithm's tunables apart (LogWestwood+'s recovery sweep) goes, point by point (executors.next_task)."""
    recovery = REPO / "experiments/logwestwood-plus/recovery.toml"
    shutil.copyfile(REPO / "labs/04-own-cc/solution/mycc.bpf.c", files.parent / "mycc.bpf.c")
    own = files.parent / "own.toml"
    own.write_text(SPEC.format(name="own").replace('["reno", "cubic"]', '["mycc.bpf.c", "reno"]'))
    one, _two = campaign.load(files)
    ran: list[str] = []

    def run_sweep(sw: sweep_spec.Sweep, d: Path) -> sweep.Progress:
        ran.append(sw.name)
        return sweep.Progress(0)

    with pytest.raises(SweepError) as exc:
        campaign.run([one, own], run_sweep, at_a_time=lambda sw: 2 if sw.path == own else 1)
    assert ran == []
    assert str(exc.value).startswith("own, 2 runs at a time: p000-r0.toml: runs mycc from mycc.bpf.c"), exc.value
    campaign.run([recovery], run_sweep, at_a_time=lambda sw: 2)
    assert ran == ["lwp_recovery"]


def test_one_campaign_at_a_time(files: Path) -> None:
    campaign.PID_FILE.parent.mkdir(parents=True)
    campaign.PID_FILE.write_text(f"{os.getpid()}\n")  # a live process: this one
    with pytest.raises(SweepError, match=rf"a campaign is running already \(pid {os.getpid()}\)"):
        with campaign.claimed():
            pass
    assert campaign.request_stop() == os.getpid() and campaign.STOP_FILE.exists()
    campaign.PID_FILE.write_text("999999999\n")  # no such process: a campaign that died
    assert campaign.running() is None
    ended = subprocess.Popen(["true"])  # a campaign that exited, its parent (this test) not yet reaping it
    try:
        campaign.PID_FILE.write_text(f"{ended.pid}\n")
        deadline = time.monotonic() + 10
        while (st := system.proc_stat(ended.pid)) is not None and st[1][0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert st is not None and st[1][0] == "Z", f"{ended.pid} not a zombie after 10 s: {st}"
        assert campaign.running() is None, "a zombie counted as a campaign running"
    finally:
        ended.wait()
    with campaign.claimed():
        assert not campaign.STOP_FILE.exists()  # the stale request does not stop the new campaign


#: a campaign's stand-in: one child, its argv[1], and it exits as the child did
STAND_IN = "import subprocess, sys; sys.exit(subprocess.Popen([sys.executable, '-c', sys.argv[1]]).wait())"
#: a run under way that ends with 7 on SIGTERM (as a run tears down)
RUN = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(7)); "
    "print('going', flush=True); time.sleep(60)"
)


@pytest.mark.parametrize("now", [False, True])
def test_stop_now_ends_the_runs_under_way(files: Path, now: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """`campaign stop` leaves the runs under way alone; `--now` sends each SIGTERM (the campaign's children), not
    the campaign, which ends once they have."""
    stand_in = subprocess.Popen([sys.executable, "-c", STAND_IN, RUN], stdout=subprocess.PIPE, text=True)
    try:
        assert stand_in.stdout is not None and stand_in.stdout.readline() == "going\n"
        campaign.PID_FILE.parent.mkdir(parents=True)
        campaign.PID_FILE.write_text(f"{stand_in.pid}\n")
        assert cli.main(["campaign", "stop", *(["--now"] if now else [])]) == 0
        assert campaign.STOP_FILE.exists()
        if now:
            code = stand_in.wait(timeout=10)
            assert code == 7, f"exit {code}: the run under way did not end on SIGTERM, or the campaign was signalled"
            assert "ends its runs under way now, marked incomplete" in capsys.readouterr().out
        else:
            with pytest.raises(subprocess.TimeoutExpired):
                stand_in.wait(timeout=1)
            assert "stops after the runs under way" in capsys.readouterr().out
    finally:
        if stand_in.poll() is None:
            for child in system.child_pids(stand_in.pid):
                os.kill(child, 9)
            stand_in.wait()


def test_status_prints_every_sweep(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["campaign", "status", str(files)]) == 0
    text = capsys.readouterr().out
    assert "one" in text and "two" in text and "0 of 20 runs complete, 0.0 h of runs left" in text


def test_save_then_restore_carries_a_campaign_to_a_new_checkout(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `save` packs, `restore` unpacks where a sweep has no run yet, and the campaign goes on from there; a
    directory that holds runs is never replaced."""
    one, two = campaign.load(files)
    sw = sweep_spec.load(one)
    d = sweep.default_dir(sw)

    def three_runs(tasks: list[sweep.Task], started: Any, ended: Any) -> None:
        for t in tasks[:3]:
            _write_run(t)

    sweep.run(sw, d, three_runs)
    monkeypatch.setattr(campaign, "ARCHIVES", tmp_path / "reference")
    assert cli.main(["campaign", "save", str(files)]) == 0
    assert "one: 3 runs -> " in capsys.readouterr().out and not campaign.archive("two").exists()
    _runs(one, 2)  # a later sitting: its runs go into a second part
    assert cli.main(["campaign", "save", str(files)]) == 0
    assert "one: 2 runs -> " in capsys.readouterr().out and len(campaign.archives("one")) == 2
    monkeypatch.setattr(sweep, "SWEEPS", tmp_path / "fresh" / "sweeps")  # a new checkout: no sweep directory
    assert campaign.state(one).complete == 0
    assert campaign.restore([one, two]) == [("one", f"restored 5 runs into {sweep.default_dir(sw)}")]
    st = campaign.state(one)
    assert (st.complete, st.total) == (5, 10) and sweep.pending(sw, st.dir)[0].key == "p001-r2"
    listed = json.loads((st.dir / "sweep.json").read_text())["points"]
    assert sum(pt["run_dir"] is not None for pt in listed) == 5
    assert campaign.save([one]) == [campaign.Saved(st, [], [])]  # restored runs are archived already
    assert campaign.restore([one]) == [("one", f"kept {st.dir}: it holds 5 complete runs already")]


def _runs(spec: Path, n: int, source_hash: str | None = None) -> Path:
    """The sweep's next n runs made (of this tree's sources, or of `source_hash`), as `cclab sweep` records them;
    its directory."""
    sw = sweep_spec.load(spec)
    d = sweep.default_dir(sw)

    def make(tasks: list[sweep.Task], started: Any, ended: Any) -> None:
        for t in tasks[:n]:
            _write_run(t, source_hash=source_hash)

    sweep.run(sw, d, make)
    return d


def test_save_never_drops_runs(files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save adds the runs made since the last one as a new part, rewriting none; an archive of another source
    moves under superseded/ (named by its hash) before the new runs start a new one; a directory lacking runs of
    the archive's source (a new checkout not restored) is refused, the archive left as it was."""
    one, _two = campaign.load(files)
    monkeypatch.setattr(campaign, "ARCHIVES", tmp_path / "reference")
    old_hash = "53eff6a0fc9b" + "0" * 52
    d = _runs(one, 2, old_hash)
    a = campaign.archive("one")
    assert campaign.save([one]) == [campaign.Saved(campaign.state(one), [(a, 2)], [])]
    shutil.rmtree(d)  # the sources changed: the sweep starts over
    _runs(one, 3)
    (saved,) = campaign.save([one])
    moved = tmp_path / "reference/superseded/one-53eff6a0fc9b.tar.xz"
    assert saved.moved == [campaign.superseded("one", old_hash)] == [moved] and moved.exists()
    assert (saved.parts, saved.new) == ([(a, 3)], 3)
    first = a.read_bytes()
    _runs(one, 1)
    a2 = tmp_path / "reference/one.2.tar.xz"
    assert campaign.save([one]) == [campaign.Saved(campaign.state(one), [(a2, 1)], [])]
    assert a.read_bytes() == first and campaign.archives("one") == [a, a2]
    assert campaign.save([one]) == [campaign.Saved(campaign.state(one), [], [])]  # nothing new
    with pool.unpacked([a, a2]) as dirs:  # what a report reads: the parts together, each run once
        runs = pool.collect([d for ds in dirs for d in ds]).runs
    assert sorted(r.point["key"] for r in runs) == ["p000-r0", "p000-r1", "p001-r0", "p001-r1"]
    shutil.rmtree(d)
    _runs(one, 1)
    lacks = r"one: its archive holds 3 runs .* lacks \(runs/p000-r1/.*`cclab campaign restore` first"
    with pytest.raises(SweepError, match=lacks):
        campaign.save([one])
    assert campaign.archives("one") == [a, a2] and a.read_bytes() == first


def test_a_save_knows_what_is_archived_without_unpacking_it(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Restore and save leave in the sweep directory what each archive part holds (campaign.ARCHIVED): a later save
    unpacks no part whose bytes it recorded, and unpacks one again when its bytes differ."""
    one, _two = campaign.load(files)
    monkeypatch.setattr(campaign, "ARCHIVES", tmp_path / "reference")
    unpacked: list[list[Path]] = []
    real = pool.unpacked

    def counted(archives: list[Path]) -> Any:
        unpacked.append(archives)
        return real(archives)

    monkeypatch.setattr(pool, "unpacked", counted)
    d = _runs(one, 2)
    a, a2 = campaign.archive("one"), tmp_path / "reference/one.2.tar.xz"
    assert campaign.save([one]) == [campaign.Saved(campaign.state(one), [(a, 2)], [])]
    _runs(one, 1)
    assert campaign.save([one]) == [campaign.Saved(campaign.state(one), [(a2, 1)], [])]
    assert unpacked == []  # the first part's runs came from the listing the first save left
    listing = json.loads((d / campaign.ARCHIVED).read_text())
    assert [(k, len(v["runs"])) for k, v in listing.items()] == [("one.tar.xz", 2), ("one.2.tar.xz", 1)]
    assert {r: h for v in listing.values() for r, h in v["runs"].items()} == campaign._runs_of([d])
    listing["one.tar.xz"]["sha256"] = "0" * 64  # as if the part's bytes had changed
    (d / campaign.ARCHIVED).write_text(json.dumps(listing))
    assert campaign.save([one]) == [campaign.Saved(campaign.state(one), [], [])]
    assert unpacked == [[a]]
    monkeypatch.setattr(sweep, "SWEEPS", tmp_path / "fresh" / "sweeps")  # a new checkout: restore, then save
    assert campaign.restore([one]) == [("one", f"restored 3 runs into {campaign.state(one).dir}")]
    unpacked.clear()
    assert campaign.save([one]) == [campaign.Saved(campaign.state(one), [], [])]
    assert unpacked == []


def test_a_save_of_many_runs_writes_parts_no_heavier_than_the_limit(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs beyond PART_RAW_BYTES of files go into the next part; a part packed above PART_MAX_BYTES is packed again
    as two halves; the parts together hold every run once, in order, and a report pools them all."""
    one, _two = campaign.load(files)
    monkeypatch.setattr(campaign, "ARCHIVES", tmp_path / "reference")
    d = _runs(one, 7)
    run_files = [
        d / pt["run_dir"] / x
        for pt in json.loads((d / "sweep.json").read_text())["points"]
        if pt["run_dir"]
        for x in pool.RUN_FILES
    ]
    per_run = sum(f.stat().st_size for f in run_files if f.exists()) // 7
    monkeypatch.setattr(campaign, "PART_RAW_BYTES", 3 * per_run + per_run // 2)  # three runs a part, by their files
    (saved,) = campaign.save([one])
    assert [n for _, n in saved.parts] == [3, 3, 1] and saved.new == 7
    assert (
        [a for a, _ in saved.parts] == campaign.archives("one") == [campaign.archive("one", part=k) for k in (1, 2, 3)]
    )
    lightest_of_three = min(a.stat().st_size for a, n in saved.parts if n == 3)
    shutil.rmtree(campaign.ARCHIVES)
    monkeypatch.setattr(campaign, "PART_MAX_BYTES", lightest_of_three - 1)  # three runs are too heavy, two are not
    (saved,) = campaign.save([one])
    assert [n for _, n in saved.parts] == [1, 2, 1, 2, 1]
    assert all(a.stat().st_size <= campaign.PART_MAX_BYTES for a, _ in saved.parts)
    assert sorted(campaign.ARCHIVES.iterdir()) == sorted(a for a, _ in saved.parts)  # none left of a repacked group
    with pool.unpacked(campaign.archives("one")) as dirs:
        runs = pool.collect([d for ds in dirs for d in ds]).runs
    keys = [r.point["key"] for r in runs]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 7


def test_a_campaign_run_restores_only_what_it_can_go_on_from(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cclab campaign run` in a new checkout first restores the archives of this tree's sources (it goes on from
    them); a part-run archive of other sources stays where it is (the sweep starts over, and its next save
    supersedes it), while a whole one is restored, so the run skips it instead of running the sweep again.  On the
    machine that made them, a directory of other sources' runs is kept, and what to do says so."""
    one, two = campaign.load(files)
    monkeypatch.setattr(campaign, "ARCHIVES", tmp_path / "reference")
    _runs(one, 2)
    _runs(two, 1, "53eff6a0fc9b" + "0" * 52)
    campaign.save([one, two])
    monkeypatch.setattr(sweep, "SWEEPS", tmp_path / "fresh" / "sweeps")
    assert campaign.restore([one, two], this_tree=True) == [
        ("one", f"restored 2 runs into {campaign.state(one).dir}"),
        ("two", "left in its archive: runs of source 53eff6a0fc9b, not this tree's"),
    ]
    assert campaign.state(two).complete == 0
    monkeypatch.setattr(sweep, "SWEEPS", tmp_path / "sweeps")
    ((name, kept),) = campaign.restore([two], this_tree=True)
    assert name == "two" and kept.startswith(f"kept {campaign.state(two).dir}: it holds 1 complete runs already (1 of ")
    assert "other sources than this tree's" in kept and "move the directory aside" in kept
    whole = len(sweep_spec.load(two).points)
    _runs(two, whole, "53eff6a0fc9b" + "0" * 52)
    campaign.save([two])
    monkeypatch.setattr(sweep, "SWEEPS", tmp_path / "new" / "sweeps")
    assert campaign.restore([two], this_tree=True) == [("two", f"restored {whole} runs into {campaign.state(two).dir}")]
    assert not sweep.pending(sweep_spec.load(two), campaign.state(two).dir)


def test_a_campaign_refuses_a_changed_tree_and_stops_when_the_tree_changes(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run from a tree with uncommitted changes records `git describe --dirty` and no report pools it: the
    campaign refuses to start on such a tree, in one line, and stops before its next run once the tree changes."""
    repo = tmp_path / "tree"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    (repo / "f").write_text("one\n")
    for argv in (["init", "-q"], ["add", "f"], ["commit", "-qm", "f"]):
        subprocess.run([*git, *argv], check=True)
    monkeypatch.setattr(system, "REPO", repo)
    assert campaign.tree_changed() is None and not campaign.should_stop()
    (repo / "f").write_text("two\n")
    assert "uncommitted changes (git describe: " in (campaign.tree_changed() or "") and campaign.should_stop()
    assert cli.main(["campaign", "run", str(files)]) == 2
    err = capsys.readouterr().err
    assert "work tree has uncommitted changes" in err and "another worktree" in err and len(err.splitlines()) == 1
    assert campaign.running() is None and not campaign.state(campaign.load(files)[0]).dir.exists()


def test_experiments_md_holds_the_table_the_archives_give() -> None:
    """EXPERIMENTS.md's campaign table is what `cclab campaign report` made of the committed archives as they are
    (each report carries its inputs' digests): every claim of the campaign's claims files, judged on its sweep's
    archive alone (n = 0 where the sweep has none)."""
    specs = campaign.load(campaign.DEFAULT)
    rows = campaign.judged_rows(specs)
    claims = [c for p in specs if (f := p.with_name(p.stem + ".claims.toml")).exists() for c in claims_mod.parse(f)]
    assert [r["claim"] for r in rows] == [c.id for c in claims]
    assert {r["verdict"] for r in rows} <= {"holds", "does not hold", "inconclusive"}
    assert all(r["n"] == "0" for r in rows if not campaign.archives(r["sweep"]))
    shown = campaign.table_in(REPO / "EXPERIMENTS.md")
    assert shown == campaign.table(rows), "EXPERIMENTS.md is behind: cclab campaign report --write EXPERIMENTS.md"


#: the committed report made again from its archives: lwp_recovery's (two parts, 5 MB, claims with a warm-up)
AGAIN = "lwp_recovery"


def test_a_committed_report_is_what_its_archives_give_and_is_refused_once_they_change(tmp_path: Path) -> None:
    """One sweep's committed report, made again from its archives alone, judges as committed and from the same
    inputs; reporting again leaves it as it is, and a part saved after it makes the committed table refused."""
    spec_path = next(p for p in campaign.load(campaign.DEFAULT) if sweep_spec.load(p).name == AGAIN)
    held = campaign.archives(AGAIN)
    assert len(held) > 1
    committed = campaign.judged_rows([spec_path])
    assert all(r["n"] != "0" for r in committed)
    for a in held:
        shutil.copy(a, tmp_path / a.name)
    assert campaign.verdict_rows([spec_path], under=tmp_path, plots=False) == committed
    made_from = (held[0].parent / AGAIN / campaign.DIGESTS).read_text()
    assert (tmp_path / AGAIN / campaign.DIGESTS).read_text() == made_from
    assert "controller/results/report.py" in made_from and spec_path.stem + ".claims.toml" in made_from
    (tmp_path / AGAIN / "verdicts.csv").write_text("claim\n")  # what a report made now would not write
    campaign.verdict_rows([spec_path], under=tmp_path, plots=False)
    assert (tmp_path / AGAIN / "verdicts.csv").read_text() == "claim\n"  # its inputs unchanged: not made again
    shutil.copy(held[-1], campaign.archive(AGAIN, tmp_path, part=len(held) + 1))  # a later save's part
    with pytest.raises(SweepError, match="other archives, claims or code than today's: run `cclab campaign report`"):
        campaign.judged_rows([spec_path], under=tmp_path)


def test_the_table_goes_between_its_markers_or_is_refused(tmp_path: Path) -> None:
    md = tmp_path / "E.md"
    md.write_text(f"# head\n{campaign.TABLE_BEGIN}\nold\n{campaign.TABLE_END}\ntail\n")
    campaign.write_table(md, "| new |\n")
    assert md.read_text() == f"# head\n{campaign.TABLE_BEGIN}\n| new |\n{campaign.TABLE_END}\ntail\n"
    assert campaign.table_in(md) == "| new |\n"
    md.write_text("# no markers\n")
    with pytest.raises(SweepError, match="no lines .* to put the table between"):
        campaign.write_table(md, "| new |\n")

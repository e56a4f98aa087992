"""A campaign: sweeps run one after another for tens of hours, over many sittings, stopped between runs.

A campaign file lists sweep specs in the order they run::

    # experiments/papers.campaign.toml
    sweeps = ["logwestwood-plus/per.toml", "logwestwood-plus/recovery.toml"]

(paths relative to the file).  An entry may be a table instead, naming how many
of the sweep's runs go side by side, each isolated (``cclab sweep --jobs``)::

    sweeps = [{spec = "tcpw-faster-recovery/per.toml", jobs = 8}]

where ``cclab bench sweep --spec`` has shown the machine holds that many of its
points (a sweep without ``jobs`` takes ``cclab campaign run --jobs``).
``run`` takes each sweep in turn into its
default directory (results/sweeps/<name>/), which already resumes: what is
complete is skipped, so running a campaign again goes on where it stopped.
``request_stop`` asks a running campaign to stop after the runs under way:
it finishes them (a 300 s run is not thrown away) and starts no other, where
``request_stop(now=True)`` (SIGTERM to each run), SIGTERM or Ctrl-C ends the
runs under way, each marked incomplete.  One campaign
runs at a time on a machine (its pid is in /run/cclab/campaign.pid).

A campaign outlives the machine it ran on: ``save`` packs each sweep's
complete runs into the repository (results/reference/campaign/<sweep>.tar.xz,
what a report needs: the reference archives of `cclab report --pack`), each
later save only the runs made since, as new parts (<sweep>.2.tar.xz, ...), so
that a sitting's runs are kept as soon as they are committed (no part above
PART_MAX_BYTES: a save of many runs writes several); ``restore``
unpacks all the parts into the sweep directories of a new checkout, where
``run`` goes on from them.  Both leave in the sweep directory what each part
holds (ARCHIVED), so that a save unpacks no part it has seen.

``verdict_rows`` reports every sweep from its archive alone (results/reference/
campaign/<sweep>/, as `cclab report --from-reference` writes it, with the
SHA-256 of its inputs beside it) and gathers the verdicts of all the claims
files into one table, each claim with its n, run length and fidelity pass
count; a sweep with no archive yet gives its claims no run (n = 0:
inconclusive).  A report made from today's inputs is not made again.
``judged_rows`` gathers the same table from the reports as they are, reading
no run, and refuses a report whose inputs have changed since.  ``table`` writes
it as Markdown, and ``write_table`` puts it into EXPERIMENTS.md between two
markers, so the table there is what the repository's archives say.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from controller import spec, system
from controller.experiment import executors, sweep
from controller.results import claims as claims_mod
from controller.results import pool, rundir
from controller.results import verdicts as verdicts_mod
from controller.spec import sweep as sweep_spec
from controller.spec.fields import FIELDS
from controller.spec.sweep import MANIFEST, Point, Sweep, SweepError

#: where `save` keeps each sweep's complete runs, one archive (in parts) per sweep, and `restore` finds them
ARCHIVES = system.REPO / "results" / "reference" / "campaign"
#: a campaign file's name ends so (a TOML file under experiments/ that is not a spec)
CAMPAIGN_SUFFIX = ".campaign.toml"
#: the papers at their own scale
DEFAULT = system.REPO / "experiments" / f"papers{CAMPAIGN_SUFFIX}"
#: the most one part of a sweep's archive weighs (git hosts warn above 50 MB and refuse above 100 MB)
PART_MAX_BYTES = 45_000_000
#: the run files (pool.RUN_FILES, unpacked) a save puts into one part: they pack about 5.6 to 1 (lwp_flows'
#: 30-flow runs), so a part comes out near 35 MB; one that comes out above PART_MAX_BYTES is packed again in halves
PART_RAW_BYTES = 200_000_000
PID_FILE = system.RUN_STATE / "campaign.pid"
STOP_FILE = system.RUN_STATE / "campaign.stop"


def _entries(path: Path) -> list[tuple[Path, int | None]]:
    """Each sweep spec a campaign file lists with its `jobs` (None where it names none), each spec checked to
    exist, before anything runs; a bad file is a SweepError of one line."""
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SweepError(f"{path}: cannot read the campaign file: {exc}") from exc
    specs = raw.get("sweeps")
    if not isinstance(specs, list) or not specs:
        raise SweepError(f"{path}: sweeps = {specs!r}: want a non-empty list of spec paths (relative to the file)")
    if unknown := sorted(set(raw) - {"sweeps"}):
        raise SweepError(f"{path}: unknown key {unknown[0]!r}: a campaign file has only `sweeps`")
    out: list[tuple[Path, int | None]] = []
    for i, entry in enumerate(specs):
        rel, jobs = (entry, None) if isinstance(entry, str) else _table(path, i, entry)
        p = path.parent / rel
        if not p.is_file():
            raise SweepError(f"{path}: sweeps[{i}] = {rel!r}: no such spec")
        out.append((p, jobs))
    return out


def _table(path: Path, i: int, entry: object) -> tuple[str, int]:
    """A sweeps[i] table, {spec = "...", jobs = N}: its spec path and jobs."""
    want = 'a spec path or a table {spec = "<path>", jobs = <runs side by side>}'
    if not isinstance(entry, dict) or set(entry) != {"spec", "jobs"} or not isinstance(entry["spec"], str):
        raise SweepError(f"{path}: sweeps[{i}] = {entry!r}: want {want}")
    jobs = entry["jobs"]
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise SweepError(f"{path}: sweeps[{i}].jobs = {jobs!r}: want a whole number >= 1")
    return entry["spec"], jobs


def load(path: Path) -> list[Path]:
    """The sweep specs a campaign file lists, each checked to exist, before anything runs."""
    return [p for p, _ in _entries(path)]


def jobs(path: Path) -> dict[Path, int]:
    """The runs side by side the campaign file names, per sweep spec (those naming none are not in it)."""
    return {p: j for p, j in _entries(path) if j is not None}


@dataclass(frozen=True)
class SweepState:
    """How far one sweep of a campaign has got, read from its directory."""

    name: str
    spec: Path
    dir: Path
    total: int
    complete: int
    fidelity_failed: list[str]
    """Keys of complete runs whose fidelity check failed (counted and named, never dropped)."""
    hours_left: float
    """The runs still to do times the run length (what setting up and tearing down add is not in it)."""
    other_sources: int = 0
    """Complete runs made from other sources than this tree's (`other_sources`): `run` refuses the directory."""


def state(spec_path: Path) -> SweepState:
    sw = sweep_spec.load(spec_path)
    d = sweep.default_dir(sw)
    done = [(pt, sweep.complete_run(d, pt.key)) for pt in sw.points]
    complete = [(pt.key, r) for pt, r in done if r is not None]
    failed = [k for k, r in complete if not _fidelity_ok(r)]
    left_s = sum(float(pt.raw["duration_s"]) for pt, r in done if r is None)
    other = sum(map(len, other_sources(sw, d).values()))
    return SweepState(sw.name, spec_path, d, len(sw.points), len(complete), failed, left_s / 3600, other)


def _fidelity_ok(run_dir: Path) -> bool:
    """As a report judges it (pool.fidelity), so status and report count the same runs."""
    return bool(pool.fidelity(run_dir, json.loads((run_dir / "summary.json").read_text()))["ok"])


def stop_requested() -> bool:
    return STOP_FILE.exists()


def tree_changed() -> str | None:
    """Why a run started now would not pool (a report pools runs of a clean tree only), or None."""
    rev = rundir.git_revision()
    if rev.endswith("-dirty") or rev == "unknown":
        return f"the work tree has uncommitted changes (git describe: {rev}), so a run from it would not pool"
    return None


def should_stop() -> bool:
    """Before each run: a stop was asked for, or the tree has changed since the campaign started."""
    return stop_requested() or tree_changed() is not None


def request_stop(now: bool = False) -> int | None:
    """Ask the running campaign to stop after its runs under way; its pid, or None if none runs.  With `now` the
    runs under way (the campaign's child processes) get SIGTERM as well: each tears down and stays marked
    incomplete, for the next `run` to redo, and the campaign ends as after their last one."""
    pid = running()
    if pid is not None:
        STOP_FILE.parent.mkdir(parents=True, exist_ok=True)
        STOP_FILE.write_text(f"{os.getpid()}\n")  # first: no run starts after the runs signalled below
        for child in system.child_pids(pid) if now else ():
            try:
                os.kill(child, signal.SIGTERM)
            except ProcessLookupError:
                pass  # it ended meanwhile
    return pid


def running() -> int | None:
    """The pid of the campaign running on this machine, if one is."""
    try:
        pid = int(PID_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if system.alive(pid) else None


@contextmanager
def claimed() -> Iterator[None]:
    """This process is the machine's campaign while the block runs; refused if another one is."""
    if (pid := running()) is not None:
        raise SweepError(f"a campaign is running already (pid {pid}); `cclab campaign stop` ends it")
    PID_FILE.parent.mkdir(parents=True, exist_ok=True)
    PID_FILE.write_text(f"{os.getpid()}\n")
    STOP_FILE.unlink(missing_ok=True)  # a request left by a campaign that ended before it saw it
    try:
        yield
    finally:
        STOP_FILE.unlink(missing_ok=True)
        PID_FILE.unlink(missing_ok=True)


def other_sources(sw: Sweep, sweep_dir: Path) -> dict[str, list[str]]:
    """The complete runs of `sweep_dir` made from other sources than this tree's: source hash -> their keys."""
    hashes: dict[str, str] = {}
    out: dict[str, list[str]] = {}
    for pt in sw.points:
        done = sweep.complete_run(sweep_dir, pt.key)
        if done is None:
            continue
        want = _tree_source(pt, hashes)
        if (got := _run_source(done)) != want:
            out.setdefault(got, []).append(pt.key)
    return out


def _run_source(run_dir: Path) -> str:
    """The source hash a run's manifest.json records ("unknown" without one)."""
    try:
        return str(json.loads((run_dir / "manifest.json").read_text()).get("source_hash") or "unknown")
    except (OSError, ValueError):
        return "unknown"


def _tree_source(pt: Point, hashes: dict[str, str]) -> str:
    """The source hash a run of the point makes from this tree (hashes: what is known already, by data plane)."""
    dataplane = pt.raw.get("dataplane", FIELDS["dataplane"].default)
    return hashes.setdefault(dataplane, rundir.source_hash(dataplane))


def run(
    specs: list[Path],
    run_sweep: Callable[[Sweep, Path], sweep.Progress],
    stop: Callable[[], bool] = stop_requested,
    at_a_time: Callable[[Sweep], int] = lambda sw: 1,
) -> list[tuple[Sweep, sweep.Progress]]:
    """Each sweep in turn, by `run_sweep(sweep, its directory)`, until all are done or a stop is asked for;
    every spec is loaded (every point validated) and every directory checked before the first run: one with
    runs still to do that holds runs of other sources than this tree's is refused (a resumed sweep would count
    them among its n, where a report pools only one source hash), and so is a sweep to run more than one at a time
    (`at_a_time`) with a point that cannot go beside others (executors.shareable), which would otherwise stop the
    campaign at that sweep's first runs, hours in."""
    sweeps = [sweep_spec.load(p) for p in specs]
    for sw in sweeps:
        if at_a_time(sw) > 1:
            try:
                for pt in sw.points:
                    executors.shareable(f"{pt.key}.toml", spec.parse(pt.raw))
            except executors.ExecutorError as exc:
                raise SweepError(f"{sw.name}, {at_a_time(sw)} runs at a time: {exc}") from None
    for sw in sweeps:
        d = sweep.default_dir(sw)
        if not sweep.pending(sw, d):
            continue  # complete: nothing runs there, whatever sources made its runs
        if other := other_sources(sw, d):
            h, keys = max(other.items(), key=lambda kv: len(kv[1]))
            raise SweepError(
                f"{sw.name}: {d} holds {sum(map(len, other.values()))} complete runs of other sources than this "
                f"tree's (source hash {h[:12]}: {', '.join(keys[:3])}{', ...' if len(keys) > 3 else ''}); they "
                "would not pool with the runs to come: move the directory aside (its archive keeps them) and run again"
            )
    out = []
    for sw in sweeps:
        if stop():
            break
        out.append((sw, run_sweep(sw, sweep.default_dir(sw))))
    return out


def archive(name: str, under: Path | None = None, part: int = 1) -> Path:
    """Where `save` keeps sweep `name`'s runs: <name>.tar.xz, then each later save's new runs in <name>.<part>.tar.xz
    (a save adds a part and rewrites none: the repository's history holds each run once)."""
    return (under or ARCHIVES) / (f"{name}.tar.xz" if part == 1 else f"{name}.{part}.tar.xz")


def archives(name: str, under: Path | None = None) -> list[Path]:
    """Sweep `name`'s archives, first part first (none if it has no first part)."""
    first = archive(name, under)
    if not first.exists():
        return []
    parts = {}
    for f in first.parent.glob(f"{name}.*.tar.xz"):
        k = f.name.removeprefix(f"{name}.").removesuffix(".tar.xz")
        if k.isdigit() and int(k) > 1:
            parts[int(k)] = f
    return [first, *(parts[k] for k in sorted(parts))]


def superseded(name: str, source_hash: str, under: Path | None = None, part: int = 1) -> Path:
    """Where `save` moves a part of sweep `name`'s archive of runs from another source than those it saves."""
    return archive(f"{name}-{source_hash[:12]}", (under or ARCHIVES) / "superseded", part)


def _runs_of(sweep_dirs: list[Path]) -> dict[str, str]:
    """The complete runs the directories' sweep.json lists (paths under their sweep directory, what `pool.pack`
    packs), each with the source hash it ran from."""
    out = {}
    for d in sweep_dirs:
        for pt in json.loads((d / MANIFEST).read_text())["points"]:
            if pt["run_dir"] is not None and sweep.is_complete(d / pt["run_dir"]):
                out[pt["run_dir"]] = _run_source(d / pt["run_dir"])
    return out


#: in a sweep directory: what each part of its archive holds (by the part's name: its sha256 and its runs with their
#: source hashes), written by restore and save, so that a save knows what is archived without unpacking every part
#: (minutes for a campaign's); a part whose sha256 differs is unpacked again.  Not packed (`pool.pack` takes runs).
ARCHIVED = ".archived.json"


def _sha256(f: Path) -> str:
    h = hashlib.sha256()
    with f.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _archived(sweep_dir: Path, held: list[Path]) -> dict[str, Any]:
    """Each archive part in ``held``: its sha256 and the runs it holds ({run: source hash}), from ``sweep_dir``'s
    ARCHIVED where that names the part with the same sha256, else from the part unpacked."""
    f = sweep_dir / ARCHIVED
    try:
        known = json.loads(f.read_text())
    except (OSError, ValueError):
        known = {}
    out: dict[str, Any] = {}
    for a in held:
        digest = _sha256(a)
        entry = known.get(a.name)
        if not isinstance(entry, dict) or entry.get("sha256") != digest or not isinstance(entry.get("runs"), dict):
            with pool.unpacked([a]) as [dirs]:
                entry = {"sha256": digest, "runs": _runs_of(dirs)}
        out[a.name] = entry
    return out


def _runs_in(parts: dict[str, Any]) -> dict[str, str]:
    """The runs of `_archived`'s parts, each with its source hash."""
    return {k: str(v) for e in parts.values() for k, v in e["runs"].items()}


@dataclass(frozen=True)
class Saved:
    """One sweep `save` looked at."""

    state: SweepState
    parts: list[tuple[Path, int]]
    """Each part it wrote and the runs in it (none: every run was archived already)."""
    moved: list[Path]
    """Where the archive's parts went when they held runs of another source than the ones saved."""

    @property
    def new(self) -> int:
        """The runs it added."""
        return sum(n for _, n in self.parts)


def save(specs: list[Path], under: Path | None = None) -> list[Saved]:
    """Add every sweep's complete runs that its archive lacks to it, as new parts (`_pack_parts`); the sweeps with
    complete runs.
    Runs are never lost: an archive of another source than the directory's runs moves under superseded/ (named by
    its source hash) and the directory's runs start a new one; an archive holding runs of the directory's source
    that the directory lacks (a new checkout not restored) is refused."""
    saved = []
    for p in specs:
        st = state(p)
        if not st.complete:
            continue
        have = _runs_of([st.dir])
        held = archives(st.name, under)
        parts = _archived(st.dir, held)
        archived = _runs_in(parts)
        moved = []
        if archived:
            old_hash = Counter(archived.values()).most_common(1)[0][0]
            if old_hash not in have.values():
                moved = [superseded(st.name, old_hash, under, k) for k in range(1, len(held) + 1)]
                if taken := [m for m in moved if m.exists()]:
                    raise SweepError(f"{st.name}: cannot move its archive aside: {system.shown(taken[0])} exists")
                for a, m in zip(held, moved):
                    m.parent.mkdir(parents=True, exist_ok=True)
                    a.replace(m)
                held, archived, parts = [], {}, {}
            elif lacking := sorted(set(archived) - set(have)):
                raise SweepError(
                    f"{st.name}: its archive holds {len(lacking)} runs {st.dir} lacks ({lacking[0]}"
                    f"{', ...' if len(lacking) > 1 else ''}): `cclab campaign restore` first (a save never drops runs)"
                )
        new = sorted(set(have) - set(archived))
        packed = _pack_parts(st.dir, st.name, under, len(held) + 1, new)
        for a, runs in packed:
            parts[a.name] = {"sha256": _sha256(a), "runs": {r: have[r] for r in runs}}
        rundir.write_json(st.dir / ARCHIVED, parts)
        saved.append(Saved(st, [(a, len(runs)) for a, runs in packed], moved))
    return saved


def _pack_parts(
    sweep_dir: Path, name: str, under: Path | None, first: int, runs: list[str]
) -> list[tuple[Path, list[str]]]:
    """The runs (under ``sweep_dir``) packed into parts ``first``, ``first`` + 1, ... of sweep `name`'s archive, in
    order, PART_RAW_BYTES of run files at most in each; a part above PART_MAX_BYTES is packed again as two halves
    (one run alone is packed whatever it weighs); each part and its runs.  A save cut short leaves whole parts
    (pool.pack writes each under another name first): the next save adds the rest."""
    groups: list[list[str]] = []
    size = 0
    for r in runs:
        n = sum(f.stat().st_size for f in (sweep_dir / r / x for x in pool.RUN_FILES) if f.exists())
        if not groups or (groups[-1] and size + n > PART_RAW_BYTES):
            groups.append([])
            size = 0
        groups[-1].append(r)
        size += n
    parts: list[tuple[Path, list[str]]] = []
    while groups:
        g = groups.pop(0)
        a = pool.pack([sweep_dir], archive(name, under, first + len(parts)), only=g)
        if a.stat().st_size > PART_MAX_BYTES and len(g) > 1:
            a.unlink()
            groups[:0] = [g[: len(g) // 2], g[len(g) // 2 :]]
        else:
            parts.append((a, g))
    return parts


def restore(specs: list[Path], under: Path | None = None, *, this_tree: bool = False) -> list[tuple[str, str]]:
    """Unpack each sweep's archive (all its parts) into its directory where that holds no complete run yet (a
    directory with runs is left as it is, said so: runs are never mixed or replaced); per sweep with an archive,
    its name and what was done.  ``this_tree``: only archives whose runs are all of this tree's sources (what
    `run` can go on from) or that hold every run of the sweep (what `run` skips, whatever made it); a campaign
    run restores so."""
    done = []
    for p in specs:
        sw = sweep_spec.load(p)
        held = archives(sw.name, under)
        if not held:
            continue
        st = state(p)
        if st.complete:
            aside = (
                f" ({st.other_sources} of other sources than this tree's: move the directory aside to run the "
                "sweep on this tree)"
                if st.other_sources
                else ""
            )
            done.append((sw.name, f"kept {st.dir}: it holds {st.complete} complete runs already{aside}"))
            continue
        with pool.unpacked(held) as dirs:
            parts = {a.name: {"sha256": _sha256(a), "runs": _runs_of(ds)} for a, ds in zip(held, dirs, strict=True)}
            hashes: dict[str, str] = {}
            other = (
                set(_runs_in(parts).values()) - {_tree_source(pt, hashes) for pt in sw.points} if this_tree else set()
            )
            (src,), *rest = dirs
            for (d,) in rest:
                for run in d.glob("runs/*/*"):
                    (src / run.parent.relative_to(d)).mkdir(parents=True, exist_ok=True)
                    shutil.move(str(run), src / run.relative_to(d))
            if other and sweep.pending(sw, src):  # a whole sweep is restored: `run` skips it, whatever made it
                done.append((sw.name, f"left in its archive: runs of source {min(other)[:12]}, not this tree's"))
                continue
            if st.dir.exists():
                shutil.rmtree(st.dir)  # no complete run in it: what a killed first run left
            st.dir.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(src), st.dir)
        sweep.write_manifest(sw, st.dir)
        rundir.write_json(st.dir / ARCHIVED, parts)
        done.append((sw.name, f"restored {state(p).complete} runs into {st.dir}"))
    return done


#: EXPERIMENTS.md's campaign table lies between these two lines
TABLE_BEGIN = "<!-- the campaign's verdicts: written by `cclab campaign report --write EXPERIMENTS.md` -->"
TABLE_END = "<!-- end of the campaign's verdicts -->"


def verdict_rows(
    specs: list[Path], under: Path | None = None, *, plots: bool = True, again: bool = False
) -> list[dict[str, str]]:
    """Every sweep with an archive reported from its archive alone (its report written beside the archive, under
    `under`, with the digests of what it was made from; verdicts where it has a claims file), then `judged_rows`.
    A sweep whose report was made from what it would be made from now is left as it is, unless `again`."""
    from controller.results import report

    made: dict[Path, str] = {}
    for p in specs:
        sw = sweep_spec.load(p)
        held = archives(sw.name, under)
        if not held:
            continue
        dest = held[0].parent / sw.name
        inputs = made[p] = _digests(p, held)
        if not again and _made_from(dest) == inputs:
            continue
        for stale in ("verdicts.csv", DIGESTS):  # an earlier report's: judged now, or not at all
            (dest / stale).unlink(missing_ok=True)
        with pool.unpacked(held) as dirs:
            names = pool.labels([Path(system.shown(a)) for a in held], dirs)
            try:
                report.write([d for ds in dirs for d in ds], dest, labels=names, plots=plots)
            except SweepError:
                pass  # no run pooled yet (no report): no verdicts.csv, judged as unrun
        dest.mkdir(parents=True, exist_ok=True)
        (dest / DIGESTS).write_text(inputs)
    return judged_rows(specs, under, made)


def judged_rows(
    specs: list[Path], under: Path | None = None, digests: dict[Path, str] | None = None
) -> list[dict[str, str]]:
    """Every claim of every sweep's claims file, in campaign order, as the sweep's report beside its archive judged
    it (verdicts.csv's columns plus `sweep`); a sweep without an archive, or whose archive pools no run, gives each
    of its claims n = 0 (inconclusive), as the rule would.  Reads no run: SweepError if the report of a sweep with
    an archive, claims or none, was made from other inputs than today's (a part saved since, the claims, the spec
    or the report's code changed).  `digests`: each spec's inputs as `verdict_rows` has just read them (the
    archives are hundreds of MB: read once)."""
    rows: list[dict[str, str]] = []
    for p in specs:
        sw = sweep_spec.load(p)
        claims_file = _claims_file(p)
        held = archives(sw.name, under)
        judged: list[dict[str, str]] = []
        if held:
            dest = held[0].parent / sw.name
            if _made_from(dest) != ((digests or {}).get(p) or _digests(p, held)):
                raise SweepError(
                    f"{system.shown(dest)} was made from other archives, claims or code than today's: "
                    "run `cclab campaign report`"
                )
            if (dest / "verdicts.csv").exists():
                with (dest / "verdicts.csv").open() as f:
                    judged = list(csv.DictReader(f))
        if not claims_file.exists():
            continue  # its report has no verdicts
        if not judged:
            judged = [_unrun(c) for c in claims_mod.parse(claims_file)]
        rows += [{"sweep": sw.name, **r} for r in judged]
    return rows


#: beside a sweep's report: the SHA-256 of each input it was made from (sha256sum's format): the archive's parts,
#: the files beside the spec that share its stem (the spec, its claims, the paper's numbers) and the report's code
DIGESTS = "inputs.sha256"
#: the code that makes a report from runs
REPORT_CODE = system.REPO / "controller" / "results"


def _digests(spec_path: Path, held: list[Path]) -> str:
    beside = sorted(spec_path.parent.glob(f"{spec_path.stem}.*"))
    code = sorted(REPORT_CODE.glob("*.py"))
    named = [(a, a.name) for a in held] + [(f, system.shown(f)) for f in beside + code]
    return "".join(f"{_sha256(f)}  {shown}\n" for f, shown in named)


def _made_from(report_dir: Path) -> str | None:
    f = report_dir / DIGESTS
    return f.read_text() if f.exists() else None


def _claims_file(spec_path: Path) -> Path:
    return spec_path.with_name(spec_path.name.removesuffix(".toml") + claims_mod.CLAIMS_SUFFIX)


def _unrun(c: claims_mod.Claim) -> dict[str, str]:
    row = dict.fromkeys(verdicts_mod.COLUMNS, "")
    row.update(
        claim=c.id,
        source=c.source,
        says=c.says,
        paper=c.paper,
        claimed=verdicts_mod.region_text(c),
        n="0",
        n_required=str(c.n),
        verdict=claims_mod.INCONCLUSIVE,
        fidelity_passed="0/0",
        note="no run yet",
    )
    return row


def table(rows: list[dict[str, str]]) -> str:
    """The verdicts as a Markdown table: one row per claim."""
    head = [
        "sweep",
        "where the paper says it",
        "claim",
        "verdict",
        "n (needed)",
        "run length, s",
        "fidelity passed",
        "mean [95 % CI]",
        "claimed",
        "paper",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ci = f" [{_short(r['ci95_low'])}, {_short(r['ci95_high'])}]" if r["ci95_low"] else ""
        cells = [
            r["sweep"],
            r["source"],
            r["says"],
            f"**{r['verdict']}**",
            f"{r['n']} ({r['n_required']})",
            r["run_length_s"] or "-",
            r["fidelity_passed"],
            f"{_short(r['mean'])}{ci}" if r["mean"] else "-",
            r["claimed"],
            r["paper"],
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _short(cell: str) -> str:
    """A verdicts.csv number to 3 significant digits, as a reader compares it with a claimed region."""
    try:
        return f"{float(cell):.3g}"
    except ValueError:
        return cell


def write_table(md: Path, text: str) -> None:
    """Put `text` between TABLE_BEGIN and TABLE_END in `md`, each on a line of its own; SweepError if they are not."""
    doc = md.read_text()
    lines = doc.splitlines(keepends=True)
    try:
        i = next(k for k, ln in enumerate(lines) if ln.strip() == TABLE_BEGIN)
        j = next(k for k, ln in enumerate(lines) if k > i and ln.strip() == TABLE_END)
    except StopIteration:
        raise SweepError(f"{md}: no lines {TABLE_BEGIN!r} ... {TABLE_END!r} to put the table between") from None
    md.write_text("".join(lines[: i + 1]) + text + "".join(lines[j:]))


def table_in(md: Path) -> str:
    """What lies between the markers of `md` now ('' without them)."""
    doc = md.read_text()
    if TABLE_BEGIN not in doc or TABLE_END not in doc:
        return ""
    return doc.split(TABLE_BEGIN + "\n", 1)[1].split(TABLE_END, 1)[0]

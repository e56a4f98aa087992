"""Pooling the runs of one or more sweep directories of a sweep: which complete runs a report may use.

Sweeps are pooled, never replaced: a report reads every complete run of every directory it is given (a
directory extended with more repetitions, or directories run elsewhere from the same spec). A run is pooled
only if its manifest.json shows a clean tree (``git describe`` without -dirty), the pool's source hash
(rundir.source_hash: the data-plane and algorithm sources), a passed fidelity check (its base-RTT checks
judged by this version's rule from the run's own files, so runs recorded under an earlier rule are judged
alike: summary.rejudged), and a seed no pooled run of its point already had (the same seed draws the same
losses: not an independent repetition).  Every other complete run is left out, counted and named with its
reason.
"""

from __future__ import annotations

import csv
import io
import json
import tarfile
import tempfile
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.results import summary as summary_mod
from controller.spec.sweep import MANIFEST, SweepError

#: what a report reads of a run, and so what a reference archive keeps (timeseries.csv and link.csv: the per-flow
#: and per-link series, which a claim with a warm-up is judged on; not links.csv, link x flow x interval, which
#: only measured_loss after a warm-up reads)
RUN_FILES = ("summary.json", "manifest.json", "timeseries.csv", "link.csv", "cwnd.csv", "ccstate.csv")


@dataclass(frozen=True)
class Run:
    """One complete run of a pooled sweep."""

    point: dict[str, Any]
    """Its point entry in the sweep manifest with the most points (index, values, rep, seed)."""
    run_dir: Path
    summary: dict[str, Any]
    manifest: dict[str, Any]
    """Its manifest.json ({} when it has none)."""
    sweep_dir: Path

    @property
    def commit(self) -> str:
        return str(self.manifest.get("git_revision") or "unknown")

    @property
    def source_hash(self) -> str:
        return str(self.manifest.get("source_hash") or "unknown")


@dataclass
class Pool:
    """The runs a report uses and those it leaves out."""

    manifest: dict[str, Any]
    """The sweep manifest with the most points (grid, points, spec_path)."""
    sweep_dirs: list[Path]
    source_hash: str
    """The hash every pooled run has."""
    everything: bool
    """Every complete run pooled, whatever its tree, hash and fidelity: not a pool a verdict may use."""
    runs: list[Run] = field(default_factory=list)
    """Pooled."""
    left_out: list[tuple[Run, str]] = field(default_factory=list)
    """Complete runs not pooled, each with its reason."""
    rejudged: list[tuple[Path, bool]] = field(default_factory=list)
    """Runs whose fidelity verdict by this version's rule differs from their summary.json's: (run, recorded ok)."""
    labels: dict[Path, str] = field(default_factory=dict)
    """How a report names a sweep directory (an archive's unpacked one by the archive); the path by default."""

    def shown(self, path: Path) -> str:
        """``path`` (a sweep or run directory) as a report names it."""
        for d, label in self.labels.items():
            if path == d or d in path.parents:
                return str(Path(label) / path.relative_to(d))
        return str(path)

    def fidelity_failed(self) -> list[Run]:
        return [r for r, why in self.left_out if why.startswith(FIDELITY)]


FIDELITY = "failed its fidelity check"


def _load(sweep_dir: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((sweep_dir / MANIFEST).read_text())
    except OSError:
        raise SweepError(f"{sweep_dir} is not a sweep directory (no {MANIFEST}); run `cclab sweep` first") from None
    return data


def _key(values: dict[str, Any]) -> str:
    return json.dumps(values, sort_keys=True)


def failed_checks(summary: dict[str, Any]) -> str:
    fid = summary.get("fidelity", {})
    checks = fid.get("checks", {})
    names = [name for name, c in checks.items() if isinstance(c, dict) and not c.get("ok", True)]
    return "; ".join(names + [str(n) for n in fid.get("notes", [])]) or "see its summary.json"


def collect(
    sweep_dirs: list[Path],
    source_hash: str | None = None,
    *,
    everything: bool = False,
    labels: dict[Path, str] | None = None,
) -> Pool:
    """Every complete run of the directories, pooled or left out with its reason. ``source_hash``: the pool's
    (default: the one most clean runs have; on a tie, the newest run's). ``everything``: pool every complete run
    (a look during development; nothing is judged on it). ``labels``: Pool.labels."""
    if not sweep_dirs:
        raise SweepError("give at least one sweep directory (or --from-reference FILE)")
    manifests = [(d, _load(d)) for d in sweep_dirs]
    names = {m["name"] for _, m in manifests}
    if len(names) > 1:
        raise SweepError(f"sweep directories of different sweeps ({', '.join(sorted(names))}) cannot be pooled")
    base = max((m for _, m in manifests), key=lambda m: len(m["points"]))
    index_of = {_key(pt["values"]): pt["index"] for pt in base["points"]}
    found: list[Run] = []
    rejudged: list[tuple[Path, bool]] = []
    for d, m in manifests:
        for pt in m["points"]:
            if pt["run_dir"] is None:
                continue
            if _key(pt["values"]) not in index_of:
                raise SweepError(f"{d}: point {pt['key']} is not a point of the largest sweep pooled; cannot pool it")
            run_dir = d / pt["run_dir"]
            summ = json.loads((run_dir / "summary.json").read_text())
            if not summ.get("complete"):
                continue
            recorded = summ["fidelity"]["ok"]
            summ["fidelity"] = fidelity(run_dir, summ)
            if summ["fidelity"]["ok"] != recorded:
                rejudged.append((run_dir, recorded))
            try:
                man = json.loads((run_dir / "manifest.json").read_text())
            except OSError:
                man = {}
            entry = {**pt, "index": index_of[_key(pt["values"])]}
            found.append(Run(entry, run_dir, summ, man, d))
    clean = [r for r in found if r.manifest and not _dirty(r.commit) and r.source_hash != "unknown"]
    if source_hash is None:
        counts = Counter(r.source_hash for r in clean)
        newest = {r.source_hash: r.run_dir.name for r in clean}
        source_hash = max(counts, key=lambda h: (counts[h], newest[h])) if counts else "unknown"
    pool = Pool(base, list(sweep_dirs), source_hash, everything, rejudged=rejudged, labels=labels or {})
    seen: dict[tuple[int, Any], Run] = {}
    for r in found:
        why = None if everything else _why_not(r, source_hash)
        if why is None and (other := seen.get((r.point["index"], r.point["seed"]))) is not None:
            why = f"same seed as {pool.shown(other.run_dir)} at its point (not an independent repetition)"
        if why is None:
            seen[(r.point["index"], r.point["seed"])] = r
            pool.runs.append(r)
        else:
            pool.left_out.append((r, why))
    return pool


def fidelity(run_dir: Path, summ: dict[str, Any]) -> dict[str, Any]:
    """A run's fidelity check as this version judges it, from its summary.json (``summ``), link.csv and the
    shapers' buckets its manifest.json records."""
    try:
        links = json.loads((run_dir / "manifest.json").read_text()).get("links", [])
    except (OSError, ValueError):
        links = []
    return summary_mod.rejudged(
        summ,
        lambda: _link_polls(run_dir / "link.csv"),
        summary_mod.buckets(links),
        lambda: _windows(run_dir / "cwnd.csv"),
        summary_mod.guarded(_columns(run_dir / "ccstate.csv")),
    )


def _windows(path: Path) -> list[dict[str, Any]]:
    """cwnd.csv's samples as the window check reads them; none when the run has no file."""
    if not path.exists():
        return []
    with path.open() as f:
        return [
            {
                "t_s": float(r["t_s"]),
                "flow": r["flow"],
                "cwnd_pkts": int(r.get("cwnd_pkts") or 0),
                "ssthresh_pkts": int(r.get("ssthresh_pkts") or 0),
            }
            for r in csv.DictReader(f)
        ]


def _columns(path: Path) -> list[str]:
    """A CSV file's header; none when the run has no file."""
    if not path.exists():
        return []
    with path.open() as f:
        return next(csv.reader(f), [])


def _link_polls(path: Path) -> list[dict[str, Any]]:
    """link.csv's polls as the fidelity check reads them (time, link, backlog); none when the run has no file."""
    if not path.exists():
        return []
    with path.open() as f:
        return [
            {"t_s": float(r["t_s"]), "link": r["link"], "backlog_pkts": int(r["backlog_pkts"] or 0)}
            for r in csv.DictReader(f)
        ]


def _dirty(commit: str) -> bool:
    return commit.endswith("-dirty") or commit == "unknown"


def _why_not(r: Run, source_hash: str) -> str | None:
    if not r.manifest:
        return "no manifest.json (its commit and source hash are unknown)"
    if _dirty(r.commit):
        return f"ran from a dirty or unknown tree (git describe: {r.commit})"
    if r.source_hash == "unknown":
        return "no source hash recorded"
    if r.source_hash != source_hash:
        return f"source hash {r.source_hash[:12]} differs from the pool's {source_hash[:12]}"
    if not r.summary.get("fidelity", {}).get("ok"):
        return f"{FIDELITY} ({failed_checks(r.summary)})"
    return None


# --- reference archives ---------------------------------------------------------


def pack(sweep_dirs: list[Path], archive: Path, only: Collection[str] | None = None) -> Path:
    """What a report of these directories needs, as one .tar.xz: each directory's sweep.json and points/, and of
    every complete run RUN_FILES (those it has).  The directories go in as d0/, d1/, ... in the order given.
    ``only``: just these runs (paths under their sweep directory), the others no run in the sweep.json packed."""
    manifests = [_load(d) for d in sweep_dirs]  # every directory checked before anything is written
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + ".part")
    with tarfile.open(tmp, "w:xz") as tar:
        for k, (d, m) in enumerate(zip(sweep_dirs, manifests)):
            if only is None:
                tar.add(d / MANIFEST, f"d{k}/{MANIFEST}")
            else:
                m = {**m, "points": [pt if pt["run_dir"] in only else {**pt, "run_dir": None} for pt in m["points"]]}
                data = json.dumps(m, indent=2).encode()
                info = tarfile.TarInfo(f"d{k}/{MANIFEST}")
                # stamped as the directory's own sweep.json (what tar.add gives it above): the same runs pack to
                # the same bytes at every save
                info.size, info.mode = len(data), 0o644
                info.mtime = int((d / MANIFEST).stat().st_mtime)
                tar.addfile(info, io.BytesIO(data))
            tar.add(d / "points", f"d{k}/points")
            for pt in m["points"]:
                if pt["run_dir"] is None:
                    continue
                for name in RUN_FILES:
                    f = d / pt["run_dir"] / name
                    if f.exists():
                        tar.add(f, f"d{k}/{pt['run_dir']}/{name}")
    tmp.replace(archive)
    return archive


def unpack(archive: Path, into: Path) -> list[Path]:
    """The sweep directories of a reference archive, extracted under ``into`` (a report names each
    ``<archive>/d<k>``: ``labels``)."""
    try:
        with tarfile.open(archive, "r:xz") as tar:
            for m in tar.getmembers():  # what pack writes: plain files and directories under d<k>/
                if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in Path(m.name).parts:
                    raise tarfile.TarError(f"member {m.name!r} is not a plain file under d<k>/")
            tar.extractall(into)
    except (OSError, tarfile.TarError) as e:
        raise SweepError(f"{archive}: not a reference archive ({e})") from None
    dirs = sorted((p for p in into.iterdir() if (p / MANIFEST).exists()), key=lambda p: int(p.name[1:]))
    if not dirs:
        raise SweepError(f"{archive}: holds no sweep directory")
    return dirs


@contextmanager
def unpacked(archives: list[Path]) -> Iterator[list[list[Path]]]:
    """Each archive's sweep directories (`unpack`), in a temporary directory for the block."""
    with tempfile.TemporaryDirectory(prefix="cclab-reference-") as tmp:
        out = []
        for k, a in enumerate(archives):
            (Path(tmp) / str(k)).mkdir()
            out.append(unpack(a, Path(tmp) / str(k)))
        yield out


def labels(archives: list[Path], unpacked: list[list[Path]]) -> dict[Path, str]:
    """The names a report gives the archives' unpacked sweep directories (`unpacked`'s): each archive's path and
    d<k>."""
    return {d: f"{a}/{d.name}" for a, dirs in zip(archives, unpacked, strict=True) for d in dirs}

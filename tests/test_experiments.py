"""The specs under experiments/: each parses (every sweep point validated), each reproduction is a sweep with at
least 3 repetitions, and each paper file names metrics the report writes and fields its sweep varies."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from controller import spec
from controller.experiment import campaign
from controller.results import claims, report
from controller.spec import sweep
from tests.conftest import REPO, experiment_specs

EXPERIMENTS = REPO / "experiments"
SPECS = experiment_specs()
#: the reproductions of the papers: one directory per paper
REPRODUCTIONS = [p for p in SPECS if p.parent != EXPERIMENTS]
PAPER_FILES = sorted(EXPERIMENTS.rglob(f"*{report.PAPER_SUFFIX}"))
METRICS = {m for m, _, _ in report.RUN_METRICS} | set(report.EXTRA_STATS)
METRICS |= {"flow_throughput_mbps", "flow_throughput_ratio", *report.PATH_METRICS}


def _is_sweep(path: Path) -> bool:
    return "sweep" in spec.read_raw(path)


@pytest.mark.parametrize("path", SPECS, ids=[str(p.relative_to(EXPERIMENTS)) for p in SPECS])
def test_spec_parses(path: Path) -> None:
    if _is_sweep(path):
        sw = sweep.load(path)  # every point is validated by the spec parser
        assert sw.points
    else:
        assert spec.load(path).flows


@pytest.mark.parametrize("path", REPRODUCTIONS, ids=[str(p.relative_to(EXPERIMENTS)) for p in REPRODUCTIONS])
def test_reproduction_is_a_sweep_with_three_repetitions(path: Path) -> None:
    assert _is_sweep(path), f"{path} has no [sweep] table"
    sw = sweep.load(path)
    assert sw.repetitions >= 3, f"{path}: {sw.repetitions} repetitions"


def test_sweep_names_are_unique() -> None:
    """A sweep's default directory is results/sweeps/<name>: two specs of one name would share it."""
    names = [sweep.load(p).name for p in SPECS if _is_sweep(p)]
    assert len(names) == len(set(names)), sorted(names)


@pytest.mark.parametrize("path", PAPER_FILES, ids=[str(p.relative_to(EXPERIMENTS)) for p in PAPER_FILES])
def test_paper_file_matches_its_sweep(path: Path) -> None:
    spec_path = path.with_name(path.name.removesuffix(report.PAPER_SUFFIX) + ".toml")
    assert spec_path.exists(), f"{path} has no spec {spec_path.name} beside it"
    sw = sweep.load(spec_path)
    swept = {path for path, _ in sw.grid}
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert rows, f"{path} is empty"
    for i, row in enumerate(rows):
        assert row["metric"] in METRICS, f"{path} row {i}: metric {row['metric']!r}"
        assert row["paper"] and row["paper_ref"], f"{path} row {i}: no paper number or reference"
        fields = set(row) - {"metric", "algo", "paper", "paper_ref"}
        assert fields <= swept, f"{path}: columns {sorted(fields - swept)} are not swept by {spec_path.name}"


#: the campaign at the papers' scale (issue "campaigns"): the sweeps `cclab campaign run` takes in turn
CAMPAIGN_SPECS = campaign.load(campaign.DEFAULT)
CAMPAIGN_MIN_REPETITIONS = 5
#: the least run length per spec (by the start of its path under experiments/): 300 s for the papers whose ns-2
#: runs lasted 500-2000 s, the MPTCPW paper's 600 s (§V-C), slide 8's 800 s for the slides' capacity sweep; the
#: other slides and the TCPW-ABSE paper's transfers give none (a transfer ends its run: its size is the setting)
CAMPAIGN_MIN_DURATION_S = {
    "logwestwood-plus/": 300,
    "btbe/": 300,
    "mptcpw/": 600,
    "tcpw-faster-recovery/capacity.toml": 800,
}
#: the TCPW-ABSE paper's transfers (§3.2): 10 MB in scenarios 1 and 2, 40 MB in scenario 3
ABSE_TRANSFER_BYTES = {"static.toml": 10_000_000, "moving.toml": 10_000_000, "blackout.toml": 40_000_000}


def _rel(path: Path) -> str:
    return path.relative_to(EXPERIMENTS).as_posix()


def test_the_campaign_runs_every_reproduction() -> None:
    """Every spec under experiments/<paper>/ is a sweep of the campaign, and the campaign runs nothing else."""
    assert sorted(map(_rel, CAMPAIGN_SPECS)) == sorted(map(_rel, REPRODUCTIONS))


@pytest.mark.parametrize("path", CAMPAIGN_SPECS, ids=[_rel(p) for p in CAMPAIGN_SPECS])
def test_campaign_spec_runs_long_enough_and_often_enough_for_its_claims(path: Path) -> None:
    """Every point runs as long as its paper's setting (CAMPAIGN_MIN_DURATION_S), and the sweep repeats it >= 5
    times and at least as often as the largest n of its claims file asks, so no claim is left inconclusive for
    want of runs the spec never makes."""
    sw = sweep.load(path)
    least = next((s for start, s in CAMPAIGN_MIN_DURATION_S.items() if _rel(path).startswith(start)), 0)
    short = sorted({p.raw["duration_s"] for p in sw.points if p.raw["duration_s"] < least})
    assert not short, f"{path}: duration_s {short} < {least}"
    assert sw.repetitions >= CAMPAIGN_MIN_REPETITIONS, f"{path}: {sw.repetitions} repetitions"
    claims_file = path.with_name(path.stem + claims.CLAIMS_SUFFIX)
    if claims_file.exists():
        most = max(c.n for c in claims.parse(claims_file))
        assert sw.repetitions >= most, f"{path}: {sw.repetitions} repetitions, {claims_file.name} asks n = {most}"


@pytest.mark.parametrize("name", sorted(ABSE_TRANSFER_BYTES))
def test_abse_specs_are_the_papers_transfers_without_sack(name: str) -> None:
    """The TCPW-ABSE paper's senders had SACK off (§3.1) and each run is one transfer of the paper's size."""
    sw = sweep.load(EXPERIMENTS / "tcpw-abse" / name)
    for p in sw.points:
        s = spec.parse(p.raw)
        assert not s.sack, f"{name} {p.key}: sack on"
        sizes = [f.bytes for f in s.flows]
        assert sizes == [ABSE_TRANSFER_BYTES[name]], f"{name} {p.key}: transfers {sizes}"

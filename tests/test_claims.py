"""Claims files: the parser's one-line errors, the verdict rule on hand-made intervals (each comparison, each of
the three words), and every claims file under experiments/ judged against its spec's grid."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from controller import spec
from controller.results import claims as cl
from controller.results import report, verdicts
from controller.spec import sweep
from tests.conftest import REPO

EXPERIMENTS = REPO / "experiments"
CLAIMS_FILES = sorted(EXPERIMENTS.rglob(f"*{cl.CLAIMS_SUFFIX}"))
PAPER_FILES = sorted(EXPERIMENTS.rglob(f"*{report.PAPER_SUFFIX}"))

GOOD = """
[[claims]]
id = "lw-over-reno"
source = "LogWestwood+ paper, §III, Fig. 7"
paper = "2.6"
metric = "flow_throughput_ratio"
algo = "logwestwood/reno"
at = { "bottleneck.per" = 0.01 }
compare = "ratio"
value = 2.6
margin = 0.25
margin_why = "read off a figure"
n = 5
n_why = "a large effect"
warmup_s = 0
"""


def _claim(**kw: Any) -> cl.Claim:
    base: dict[str, Any] = dict(
        id="c", source="BTBE paper, Fig. 5", paper="x", metric="m", algo="all", margin_why="w", n=5, n_why="w"
    )
    base.update(warmup_s=0.0)
    base.update(kw)
    return cl.Claim(**base)


def _row(mean: float, lo: float | None, hi: float | None, n: int = 10, **cells: Any) -> dict[str, Any]:
    std = None if lo is None or hi is None else (hi - lo) / 2 / 2.262 * math.sqrt(n)  # t(0.975, 9)
    return {"metric": "m", "algo": "all", "n": n, "mean": mean, "std": std, "ci95_low": lo, "ci95_high": hi, **cells}


# --- the rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lo", "hi", "word"),
    [
        (2.2, 2.9, cl.HOLDS),  # inside [2.6 * 0.75, 2.6 * 1.25] = [1.95, 3.25]
        (1.96, 3.24, cl.HOLDS),  # just inside its ends
        (1.2, 1.9, cl.DOES_NOT_HOLD),  # wholly below it
        (3.3, 4.0, cl.DOES_NOT_HOLD),  # wholly above it
        (1.5, 2.5, cl.INCONCLUSIVE),  # straddles its lower end
        (1.0, 4.0, cl.INCONCLUSIVE),  # wider than it
    ],
)
def test_ratio_claim_holds_inside_the_band_fails_outside_else_inconclusive(lo: float, hi: float, word: str) -> None:
    c = _claim(compare="ratio", value=2.6, margin=0.25)
    assert c.region() == pytest.approx((1.95, 3.25))
    v = verdicts.judge(c, [_row((lo + hi) / 2, lo, hi)])
    assert v.verdict == word, v


@pytest.mark.parametrize(
    ("lo", "hi", "word"), [(0.96, 0.98, cl.HOLDS), (0.90, 0.94, cl.DOES_NOT_HOLD), (0.93, 0.97, cl.INCONCLUSIVE)]
)
def test_value_claim_on_the_paper_band(lo: float, hi: float, word: str) -> None:
    c = _claim(compare="value", value=0.97, margin=0.021)  # the LogWestwood+ paper's 95-99 %
    assert verdicts.judge(c, [_row((lo + hi) / 2, lo, hi)]).verdict == word


@pytest.mark.parametrize(
    ("direction", "lo", "hi", "word"),
    [
        ("above", 0.82, 0.9, cl.HOLDS),
        ("above", 0.6, 0.78, cl.DOES_NOT_HOLD),
        ("above", 0.75, 0.85, cl.INCONCLUSIVE),
        ("below", 0.6, 0.78, cl.HOLDS),
        ("below", 0.82, 0.9, cl.DOES_NOT_HOLD),
    ],
)
def test_order_claim_against_a_number(direction: str, lo: float, hi: float, word: str) -> None:
    c = _claim(compare="order", than=0.8, direction=direction, margin=0.0, n=10)
    v = verdicts.judge(c, [_row((lo + hi) / 2, lo, hi)])
    assert v.verdict == word, v
    assert (v.lo, v.hi) == pytest.approx((lo / 0.8 - 1, hi / 0.8 - 1))


def test_order_claim_against_a_number_with_a_margin() -> None:
    """A margin of 10 % above 1: an interval above 1 but not above 1.1 is inconclusive, one below 1.1 fails."""
    c = _claim(compare="order", than=1.0, direction="above", margin=0.1)
    assert verdicts.judge(c, [_row(1.2, 1.15, 1.25)]).verdict == cl.HOLDS
    assert verdicts.judge(c, [_row(1.1, 1.05, 1.15)]).verdict == cl.INCONCLUSIVE
    assert verdicts.judge(c, [_row(1.05, 1.02, 1.08)]).verdict == cl.DOES_NOT_HOLD


@pytest.mark.parametrize(
    ("a", "b", "word"),
    [
        ((0.99, 0.005), (0.95, 0.005), cl.HOLDS),  # btbe clearly the fairer
        ((0.95, 0.005), (0.99, 0.005), cl.DOES_NOT_HOLD),  # clearly the less fair
        ((0.97, 0.03), (0.96, 0.03), cl.INCONCLUSIVE),  # the intervals overlap
    ],
)
def test_order_claim_between_two_rows_is_welchs_difference(
    a: tuple[float, float], b: tuple[float, float], word: str
) -> None:
    c = _claim(compare="order", than={"flows[0].algo": "illinois"}, at={"flows[0].algo": "btbe"}, margin=0.0, n=10)
    rows = [
        {**_row(a[0], None, None), "std": a[1], "ci95_low": 0, "ci95_high": 0, "flows[0].algo": "btbe"},
        {**_row(b[0], None, None), "std": b[1], "ci95_low": 0, "ci95_high": 0, "flows[0].algo": "illinois"},
    ]
    v = verdicts.judge(c, rows)
    assert v.verdict == word, v
    assert v.hi is not None and v.lo is not None, v
    half = (v.hi - v.lo) / 2 * b[0]  # back to Mbit/s-like units: Welch's t (df 18 for equal s.d.) x s.e.
    assert half == pytest.approx(2.1009 * math.sqrt(a[1] ** 2 / 10 + b[1] ** 2 / 10), rel=1e-3)


def test_fewer_runs_than_the_claims_n_is_inconclusive() -> None:
    c = _claim(compare="ratio", value=2.6, margin=0.25, n=10)
    v = verdicts.judge(c, [_row(2.6, 2.5, 2.7, n=6)])
    assert (v.verdict, v.n) == (cl.INCONCLUSIVE, 6) and "n = 6 < the claim's 10" in v.note
    assert verdicts.judge(c, []).verdict == cl.INCONCLUSIVE  # not run yet


def test_a_claim_that_selects_two_rows_is_refused() -> None:
    c = _claim(compare="ratio", value=2.6, margin=0.25)
    with pytest.raises(cl.ClaimsError, match=r"^claim c: metric 'm', algo 'all', at \{\} selects 2 rows"):
        verdicts.judge(c, [_row(1, 1, 1, p=1), _row(1, 1, 1, p=2)])


def test_only_the_three_words() -> None:
    seen = {cl.judge(lo, hi, (1.0, 2.0)) for lo, hi in [(1.2, 1.8), (3, 4), (0.5, 1.5), (None, None)]}
    assert seen == {"holds", "does not hold", "inconclusive"}


# --- the parser ----------------------------------------------------------------------------------


def test_a_good_file_parses(tmp_path: Path) -> None:
    f = tmp_path / "per.claims.toml"
    f.write_text(GOOD)
    [c] = cl.parse(f)
    assert (c.compare, c.value, c.margin, c.n, c.at) == ("ratio", 2.6, 0.25, 5, {"bottleneck.per": 0.01})


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ('compare = "ratio"', 'compare = "about"'),
            "claim lw-over-reno: compare = 'about': allowed: ratio, value, order",
        ),
        (("n = 5", "n = 3"), "claim lw-over-reno: n = 3: an integer >= 5"),
        (("margin = 0.25", "margin = 1.5"), "claim lw-over-reno: margin = 1.5: a relative margin, 0 <= margin < 1"),
        (("value = 2.6", "value = 1.05"), "claim lw-over-reno: n = 5: the claimed effect is 5%, under 10%: n >= 10"),
        (("warmup_s = 0", "warmup_s = -1"), "claim lw-over-reno: warmup_s = -1.0: seconds >= 0"),
        (("value = 2.6\n", ""), "claim lw-over-reno: value is missing (required for compare = 'ratio'"),
        (('n_why = "a large effect"\n', ""), "claim lw-over-reno: n_why is missing"),
        (("warmup_s = 0", "warmup_s = 0\nmargni = 1"), "claim lw-over-reno: margni = 1: unknown field"),
        (
            ("LogWestwood+ paper, §III", "lwp.txt, §III"),
            "claim lw-over-reno: source = 'lwp.txt, §III, Fig. 7': must start with a short name",
        ),
        (
            ("LogWestwood+ paper, §III, Fig. 7", "LogWestwood+ paper, in lwp.pdf"),
            "never a file name",
        ),
    ],
)
def test_a_bad_field_fails_in_one_line_naming_it(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    f = tmp_path / "per.claims.toml"
    assert edit[0] in GOOD
    f.write_text(GOOD.replace(edit[0], edit[1], 1))
    with pytest.raises(cl.ClaimsError) as e:
        cl.parse(f)
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert str(e.value).startswith("per.claims.toml: claim lw-over-reno: ")


def test_order_needs_than_and_a_direction(tmp_path: Path) -> None:
    f = tmp_path / "x.claims.toml"
    order = GOOD.replace('compare = "ratio"', 'compare = "order"').replace("n = 5", "n = 10")
    f.write_text(order)
    with pytest.raises(cl.ClaimsError, match="than is missing"):
        cl.parse(f)
    f.write_text(order.replace("margin = 0.25", 'margin = 0.25\nthan = 1.0\ndirection = "up"'))
    with pytest.raises(cl.ClaimsError, match="direction = 'up': allowed: above, below"):
        cl.parse(f)


def test_duplicate_ids_and_empty_files_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "x.claims.toml"
    f.write_text(GOOD + GOOD)
    with pytest.raises(cl.ClaimsError, match="id = 'lw-over-reno': must be unique"):
        cl.parse(f)
    f.write_text("# nothing\n")
    with pytest.raises(cl.ClaimsError, match=r"claims is missing: give at least one \[\[claims\]\] table"):
        cl.parse(f)


def test_the_short_names_are_docs_papers() -> None:
    text = (REPO / "docs" / "papers.md").read_text()
    names = re.findall(r"^\| <a id=\"[^\"]+\"></a>([^|]+?) \|", text, re.M)
    assert sorted(names) == sorted(cl.PAPERS)


# --- the files under experiments/ -----------------------------------------------------------------


def test_every_paper_file_has_a_claims_file() -> None:
    missing = [
        p for p in PAPER_FILES if not (p.parent / p.name.replace(report.PAPER_SUFFIX, cl.CLAIMS_SUFFIX)).exists()
    ]
    assert not missing


def _grid(claims_file: Path) -> dict[str, list[Any]]:
    raw = spec.read_raw(claims_file.parent / claims_file.name.replace(cl.CLAIMS_SUFFIX, ".toml"))
    return {path: list(values) for path, values in sweep.from_raw(raw).grid}


@pytest.mark.parametrize("path", CLAIMS_FILES, ids=[str(p.relative_to(EXPERIMENTS)) for p in CLAIMS_FILES])
def test_claims_file_parses_and_names_its_sweeps_values(path: Path) -> None:
    """Each claim's at (and than) names swept paths with values of the grid, its metric is one the report writes,
    and a ratio row's algo is a later/earlier pair of the swept algorithm values."""
    grid = _grid(path)
    metrics = {m for m, _, _ in report.RUN_METRICS} | set(report.EXTRA_STATS)
    metrics |= {"flow_throughput_mbps", "flow_throughput_ratio", *report.PATH_METRICS}
    for c in cl.parse(path):
        assert c.metric in metrics, c
        ats = [c.at] + ([{k: v for k, v in c.than.items() if k != "algo"}] if isinstance(c.than, dict) else [])
        for at in ats:
            for k, v in at.items():
                assert k in grid and v in grid[k], f"{c.id}: {k} = {v!r} is not a value of the grid {grid}"
        if c.metric == "flow_throughput_ratio":
            algos = next(vs for p, vs in grid.items() if p.endswith("algo"))
            hi, lo = c.algo.split("/")
            assert algos.index(hi) > algos.index(lo), f"{c.id}: ratios.csv has later/earlier, not {c.algo}"

"""Spec validation: every bad input fails early with one line naming field and value."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from controller import spec
from tests.conftest import CCLAB, REPO

GOOD = """
name = "t"
duration_s = 5
[topology]
pairs = 2
[bottleneck]
rate_mbps = 10
[[flows]]
algo = "cubic"
src = "h1"
dst = "r1"
"""


def _parse(text: str) -> spec.Spec:
    from controller.spec import tomllib

    return spec.parse(tomllib.loads(text))


def test_good_spec_parses_with_defaults() -> None:
    s = _parse(GOOD)
    assert s.bottleneck.rate_bps == 10_000_000
    assert s.bottleneck.queue_pkts == 100
    assert s.flows[0].duration_s == 5
    assert s.interval_s == 0.1


def test_mss_and_sack_parse() -> None:
    s = _parse(
        GOOD.replace('name = "t"', 'name = "t"\nsack = false').replace('dst = "r1"', 'dst = "r1"\nmss_bytes = 1000')
    )
    assert (s.sack, s.flows[0].mss_bytes) == (False, 1000)
    assert (_parse(GOOD).sack, _parse(GOOD).flows[0].mss_bytes) == (True, None)
    udp = GOOD.replace('algo = "cubic"', 'kind = "udp_onoff"\nrate_mbps = 1\nmss_bytes = 1000')
    with pytest.raises(spec.SpecError, match=r"flows\[0\]\.mss_bytes = 1000.*is for kind"):
        _parse(udp)


def test_count_expands_flows_with_ids() -> None:
    s = _parse(GOOD.replace('dst = "r1"', 'dst = "r1"\ncount = 3'))
    assert [f.id for f in s.flows] == ["f1", "f2", "f3"]


def test_demo_spec_is_valid() -> None:
    s = spec.load(REPO / "experiments" / "demo.toml")
    assert len(s.flows) >= 2 and s.topology.pairs == 4


@pytest.mark.parametrize(
    ("old", "new", "field", "value"),
    [
        ("rate_mbps = 10", "rate_mbps = -5", "bottleneck.rate_mbps", "-5"),
        ("rate_mbps = 10", "rate_mbps = 10\nper = 1.5", "bottleneck.per", "1.5"),
        ("rate_mbps = 10", "rate_mbps = 10\nper = -0.1", "bottleneck.per", "-0.1"),
        ('algo = "cubic"', 'algo = "cubik"', "flows[0].algo", "cubik"),
        ("rate_mbps = 10", "rate_mbps = 10\nqueue_pkt = 5", "bottleneck.queue_pkt", "5"),
        ('dst = "r1"', 'dst = "r9"', "flows[0].dst", "r9"),
        ('src = "h1"', 'src = "h9"', "flows[0].src", "h9"),
        ("duration_s = 5", "duration_s = 0", "duration_s", "0"),
        ("pairs = 2", "pairs = 0", "topology.pairs", "0"),
        ("rate_mbps = 10", 'rate_mbps = "fast"', "bottleneck.rate_mbps", "fast"),
        ('name = "t"', 'name = "t"\ndataplane = "ovs"', "dataplane", "ovs"),
        ("rate_mbps = 10", "rate_mbps = 10\nschedule = [{at_s = 9, per = 0.1}]", "bottleneck.schedule[0].at_s", "9"),
        ('dst = "r1"', 'dst = "r1"\n[algorithms.logwestwood]\nalpha = 1', "algorithms.logwestwood.alpha", "1"),
        (
            'dst = "r1"',
            'dst = "r1"\n[algorithms.logwestwood]\nalpha_adapt = false',
            "algorithms.logwestwood.alpha_adapt",
            "False",
        ),
        ('dst = "r1"', 'dst = "r1"\n[algorithms.logwestwood]\nalfa = 4', "algorithms.logwestwood.alfa", "4"),
        ('dst = "r1"', 'dst = "r1"\n[algorithms.cubic]\nbeta = 717', "algorithms.cubic", "beta"),
        ('dst = "r1"', 'dst = "r1"\nmss_bytes = 40', "flows[0].mss_bytes", "40"),
        ('dst = "r1"', 'dst = "r1"\nmss_bytes = 9000', "flows[0].mss_bytes", "9000"),
        ('name = "t"', 'name = "t"\nsack = "off"', "sack", "off"),
    ],
)
def test_bad_field_is_named_with_its_value(old: str, new: str, field: str, value: str) -> None:
    with pytest.raises(spec.SpecError) as exc:
        _parse(GOOD.replace(old, new))
    msg = str(exc.value)
    assert field in msg and value in msg, msg
    assert "\n" not in msg, msg


def test_algorithm_tunables_parse_over_defaults() -> None:
    s = _parse(GOOD.replace('dst = "r1"', 'dst = "r1"\n[algorithms.logwestwood]\nalpha = 4\nalpha_adapt = 0'))
    assert s.algo_params == {"logwestwood": {"alpha": 4, "alpha_adapt": 0}}
    assert spec.algos.with_defaults("logwestwood", s.algo_params["logwestwood"]) == {
        "alpha": 4,
        "alpha_adapt": 0,
        "per_ack": 0,
    }


def test_missing_required_field() -> None:
    with pytest.raises(spec.SpecError, match="bottleneck.rate_mbps is missing"):
        _parse(GOOD.replace("rate_mbps = 10", "queue_pkts = 10"))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (GOOD.replace("rate_mbps = 10", "rate_mbps = -5"), "bottleneck.rate_mbps = -5:"),
        (GOOD.replace("rate_mbps = 10", "rate_mbps = 10\nper = 2"), "bottleneck.per = 2"),
        (GOOD.replace('algo = "cubic"', 'algo = "nope"'), "flows[0].algo = 'nope'"),
        (GOOD.replace("rate_mbps = 10", "rate_mbps = = 10"), "not valid TOML"),
        (GOOD.replace("duration_s = 5", "duration_s = 5\ndurtion_s = 5"), "durtion_s"),
        (
            GOOD.replace("rate_mbps = 10", "rate_mbps = 10\nred = {min_pkts = 5, max_pkts = 15, wlog = 7}").replace(
                'name = "t"', 'name = "t"\ndataplane = "tofino"'
            ),
            "link l1 (s1-s2).red.wlog = 7: the Tofino program's RED average has the weight 2^-9 built in",
        ),
    ],
    ids=["negative-rate", "per-above-1", "unknown-algo", "toml-syntax", "unknown-key", "red-weight-on-tofino"],
)
def test_cli_rejects_bad_spec_in_one_line_and_creates_nothing(tmp_path: Path, text: str, needle: str) -> None:
    """`cclab run` on a bad spec: non-zero exit, one line, no traceback, no results directory."""
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    results = tmp_path / "results"
    proc = subprocess.run(
        [*CCLAB, "run", str(bad), "--results", str(results)], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0], lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not results.exists(), "a results directory was created for a bad spec"

"""Figures after a warm-up (controller/results/window.py, docs/claims.md "Warm-up"): a hand-computed run, a real
run's files against its own summary.json, and a report that judges claims with a warm-up."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from controller.experiment import sweep
from controller.measure.metrics import jain
from controller.results import claims as cl
from controller.results import pool, report, rundir, window
from controller.spec import sweep as sweep_spec
from tests.conftest import REPO

# --- a run by hand --------------------------------------------------------------------------------
#
# Polls every second at t = 1 .. 6 (each row covers the second before it); traffic until 5 s on link l1 of
# 10 kbit/s.  f1 (reno) runs 0-5 s and drains in (5, 6]; f2 (cubic) runs 0-2 s and has moved its last byte by
# 2 s; f3 (cubic) starts at 3 s.  With warmup_s = 2.5 the window is the intervals ending at 3, 4, 5, 6:
#
#   f1: 300 + 400 + 500 + 50 = 1250 bytes from 2 s (the start of its first window interval) to 6 s:
#       1250 * 8 / 4 = 2500 bit/s
#   f2: no byte after 2.5 s: no figure, left out
#   f3: 600 + 600 bytes from 3 s to 5 s: 1200 * 8 / 2 = 4800 bit/s, its whole-run figure too
#   Jain over f1, f3: (2500 + 4800)^2 / (2 (2500^2 + 4800^2)) = 53290000 / 58580000
#   utilization: link.csv's 2400, 8000, 8800 bit/s over (2, 3], (3, 4], (4, 5] (the traffic ends at 5 s):
#       19200 bits / 3 s = 6400 bit/s, 0.64 of 10 kbit/s
#   measured loss: links.csv after 2.5 s: 2 random drops, 23 packets forwarded: 2 / 25
#   window recovery: cwnd.csv's reductions at 2.1 s (whole run only: back to 16 by 2.9 s, 0.8 s) and at 3.5 s
#       (back within a packet of 15 at 4.5 s): after the warm-up only the 1.0 s one
HAND = {
    "f1": {"bytes": [100, 200, 300, 400, 500, 50], "pkts": [1, 1, 3, 4, 5, 1], "rnd": [0, 0, 0, 1, 0, 0]},
    "f2": {"bytes": [1000, 1000, 0, 0, 0, 0], "pkts": [7, 7, 0, 0, 0, 0], "rnd": [1, 0, 0, 0, 0, 0]},
    "f3": {"bytes": [0, 0, 0, 600, 600, 0], "pkts": [0, 0, 0, 5, 5, 0], "rnd": [0, 0, 0, 0, 1, 0]},
}
LINK_BPS = [8800.0, 8800.0, 2400.0, 8000.0, 8800.0, 400.0]
CWND = [  # (t, cwnd, ssthresh) of f1; 2147483647: tcp_info's ssthresh before the first loss
    (1.0, 10, 2147483647), (1.5, 20, 2147483647), (1.6, 10, 10), (2.0, 16, 10), (2.1, 8, 8), (2.9, 15, 8),
    (3.5, 7, 7), (4.5, 14, 7),
]  # fmt: skip
ALGO = {"f1": "reno", "f2": "cubic", "f3": "cubic"}


def _hand_run(run_dir: Path, scale: float = 1.0) -> dict[str, Any]:
    """The run above (bytes, link rates and cwnd scaled by `scale`) as the files a run writes."""
    run_dir.mkdir(parents=True)
    ts, links = [], []
    for i, t in enumerate(range(1, 7)):
        for fid, f in HAND.items():
            b = round(f["bytes"][i] * scale)
            ts.append({"t_s": t, "flow": fid, "algo": ALGO[fid], "bytes": b, "pkts": f["pkts"][i], "random_drops": 0})
            links.append({"t_s": t, "link": "l1", "flow": fid, "bytes": b, "pkts": f["pkts"][i]})
            links[-1]["random_drops"] = f["rnd"][i]
    rundir.write_csv(run_dir / "timeseries.csv", ts)
    rundir.write_csv(run_dir / "links.csv", links)
    rows = [{"t_s": t, "link": "l1", "link_bps": v * scale, "backlog_pkts": 3} for t, v in zip(range(1, 7), LINK_BPS)]
    rundir.write_csv(run_dir / "link.csv", rows)
    cw = [{"t_s": t, "flow": "f1", "algo": "reno", "cwnd_pkts": w, "ssthresh_pkts": th} for t, w, th in CWND]
    rundir.write_csv(run_dir / "cwnd.csv", cw)
    ends = {"f1": (0, 5), "f2": (0, 2), "f3": (3, 2)}
    flows = [
        {"id": f, "flow": f, "kind": "tcp", "algo": ALGO[f], "start_s": s, "duration_s": d, "path": ["l1"]}
        | {"base_rtt_ms": 10.0, "throughput_bps": 1000.0}
        for f, (s, d) in ends.items()
    ]
    summ = {
        "complete": True,
        "name": "hand",
        "duration_s": 5,
        "interval_s": 1.0,
        "flows": flows,
        "mptcp": [],
        "links": [{"id": "l1"}],
        "bottleneck": {"rate_bps": 10_000, "utilization": 0.5, "achieved_bps": 5000.0, "measured_loss": 0.0},
        "jain": 0.5,
        "fidelity": {"ok": True},
    }
    rundir.write_json(run_dir / "summary.json", summ)
    return summ


def test_a_run_by_hand(tmp_path: Path) -> None:
    summ = _hand_run(tmp_path / "run")
    w = window.windowed(tmp_path / "run", summ, 2.5)
    tput = {f["id"]: f["throughput_bps"] for f in w["flows"]}
    assert tput == {"f1": 2500.0, "f3": 4800.0}, "f2 ended before the warm-up: it has no figure"
    assert w["jain"] == pytest.approx(53_290_000 / 58_580_000)
    assert w["bottleneck"]["utilization"] == pytest.approx(0.64) and w["bottleneck"]["achieved_bps"] == 6400
    assert w["bottleneck"]["measured_loss"] == pytest.approx(2 / 25)
    metric = {name: get for name, get, _ in report.RUN_METRICS}
    assert metric["total_throughput_mbps"](w) == pytest.approx(7300 / 1e6) and metric["jain"](w) == w["jain"]
    cwnd = list(csv.DictReader((tmp_path / "run" / "cwnd.csv").open()))
    assert report.cwnd_recoveries(cwnd, {"f1": "reno"}) == (pytest.approx([0.8, 1.0]), 0)
    assert report.cwnd_recoveries(cwnd, {"f1": "reno"}, since_s=2.5) == ([1.0], 0)
    assert summ["flows"][0]["throughput_bps"] == 1000.0, "the run's own summary is left as it was"


def test_a_warm_up_from_a_poll_opens_the_window_at_that_poll(tmp_path: Path) -> None:
    """warmup_s on a poll (3 s): the interval that ends there is out, so f1 counts from 3 s: 950 bytes in 3 s."""
    summ = _hand_run(tmp_path / "run")
    w = window.windowed(tmp_path / "run", summ, 3.0)
    assert {f["id"]: f["throughput_bps"] for f in w["flows"]} == {"f1": pytest.approx(950 * 8 / 3), "f3": 4800.0}


def test_a_run_that_cannot_give_a_figure_says_why(tmp_path: Path) -> None:
    run = tmp_path / "run"
    summ = _hand_run(run)
    assert window.unfit(run, summ, 2.5, "utilization") is None
    assert window.unfit(run, summ, 5, "jain") == f"run {run} has traffic for 5 s only, not past warmup_s = 5"
    (run / "links.csv").unlink()
    assert window.unfit(run, summ, 2.5, "measured_loss") == (
        f"measured_loss after a warm-up is computed from links.csv, which run {run} lacks"
    )
    assert "has no figure after a warm-up" in str(window.unfit(run, summ, 2.5, "mystery"))


def test_every_metric_of_a_report_has_a_figure_after_a_warm_up() -> None:
    metrics = {m for m, _, _ in report.RUN_METRICS} | set(report.EXTRA_STATS) | set(report.PATH_METRICS)
    metrics |= {"flow_throughput_mbps", "flow_throughput_ratio"}
    assert metrics == set(window.SOURCES)


# --- a real run's files ----------------------------------------------------------------------------

#: a real kernel-target run (3 flows over 20 Mbit/s, 8 s; f2 runs 0-4 s, f3 from 3 s; per 1e-3): its files as the
#: run wrote them (tests/data/README.md says how it was made)
REAL = REPO / "tests" / "data" / "window-run"


def _real() -> dict[str, Any]:
    summ: dict[str, Any] = json.loads((REAL / "summary.json").read_text())
    return summ


def test_a_real_run_after_its_own_warm_up_is_its_summary() -> None:
    """summary.json's utilization leaves out min(1 s, end / 5) already: the window from there is its figure."""
    summ = _real()
    start = min(1.0, window.traffic_end_s(summ) / 5)
    w = window.windowed(REAL, summ, start)
    got, want = w["bottleneck"], summ["bottleneck"]
    assert round(got["utilization"], 4) == want["utilization"], (got["utilization"], want["utilization"])
    assert got["achieved_bps"] == pytest.approx(want["achieved_bps"], abs=0.1)


def test_a_real_flow_that_starts_after_the_warm_up_keeps_its_whole_run_figure() -> None:
    summ = _real()
    whole = {f["id"]: f for f in summ["flows"]}
    w = {f["id"]: f for f in window.windowed(REAL, summ, 2.0)["flows"]}
    assert whole["f3"]["start_s"] == 3
    assert w["f3"]["active_s"] == whole["f3"]["active_s"]
    # summary.json's bytes are the counters' final read, after the last poll (which had them all, here)
    assert (w["f3"]["bytes"], w["f3"]["throughput_bps"]) == (
        whole["f3"]["bytes"],
        pytest.approx(whole["f3"]["throughput_bps"]),
    )


def test_a_real_flow_that_ended_before_the_warm_up_is_left_out() -> None:
    summ = _real()
    w = window.windowed(REAL, summ, 5.0)
    assert {f["id"] for f in w["flows"]} == {"f1", "f3"}, "f2 ended at 4 s"
    assert w["jain"] == pytest.approx(jain([f["throughput_bps"] for f in w["flows"]]))
    f1 = next(f for f in w["flows"] if f["id"] == "f1")
    rows = [r for r in csv.DictReader((REAL / "timeseries.csv").open()) if r["flow"] == "f1"]
    after = [(float(r["t_s"]), int(r["bytes"])) for r in rows]
    sent = [t for t, b in after if t > 5.0 and b > 0]
    opened = max(t for t, _ in after if t <= 5.0)  # the last poll at or before the warm-up's end
    assert f1["bytes"] == sum(b for t, b in after if t > 5.0)
    assert f1["active_s"] == pytest.approx(max(sent) - opened, abs=1e-3)


def test_a_real_runs_loss_after_a_warm_up_counts_its_flows_packets() -> None:
    summ = _real()
    w = window.windowed(REAL, summ, 0.0)["bottleneck"]
    want = summ["bottleneck"]["measured_loss"]
    # the flows' packets only (links.csv), where summary.json counts every packet of the link
    assert w["measured_loss"] == pytest.approx(want, rel=0.02), (w["measured_loss"], want)


# --- a report -------------------------------------------------------------------------------------


def _claim(cid: str, metric: str, value: float, warmup_s: float) -> str:
    return f"""
[[claims]]
id = "{cid}"
source = "BTBE paper, Fig. 5"
paper = "made up for this test"
metric = "{metric}"
algo = "all"
compare = "value"
value = {value}
margin = 0.05
margin_why = "a test"
n = 5
n_why = "a test"
warmup_s = {warmup_s}
"""


CLAIMS = (
    _claim("fair-after-2.5s", "jain", 0.91, 2.5)
    + _claim("busy-after-2.5s", "utilization", 0.64, 2.5)
    + _claim("busy-whole-run", "utilization", 0.64, 0)
)


def _sweep(tmp_path: Path) -> Path:
    """Five repetitions of the run by hand, each scaled by 1 + rep / 100 (the same Jain's index, a utilization
    0.64 x that), with a claims file beside the spec."""
    raw = {
        "name": "hand",
        "duration_s": 5,
        "topology": {"pairs": 3},
        "bottleneck": {"rate_mbps": 10},
        "flows": [{"algo": a, "src": f"h{i}", "dst": f"r{i}"} for i, a in enumerate(ALGO.values(), 1)],
        "sweep": {"repetitions": 5, "bottleneck.per": [0]},
    }
    sw = sweep_spec.from_raw(raw)
    d = tmp_path / "sw"
    sweep.prepare(sw, d)
    for pt in sw.points:
        run_dir = d / "runs" / pt.key / f"hand-{pt.key}-20260101T000000Z"
        _hand_run(run_dir, 1 + pt.rep / 100)
        rundir.write_json(
            run_dir / "manifest.json", {"git_revision": "a357f37", "source_hash": "5" * 64, "spec": {"duration_s": 5}}
        )
    sweep.write_manifest(sw, d)
    (tmp_path / "hand.claims.toml").write_text(CLAIMS)
    m = json.loads((d / "sweep.json").read_text())
    rundir.write_json(d / "sweep.json", {**m, "spec_path": str(tmp_path / "hand.toml")})
    return d


def test_a_report_judges_a_claim_with_a_warm_up_on_the_figures_after_it(tmp_path: Path) -> None:
    d = _sweep(tmp_path)
    names = {p.relative_to(d / "report").as_posix() for p in report.write([d])}
    assert {"warmup-2.5s/table.csv", "warmup-2.5s/runs.csv", "verdicts.csv"} <= names
    v = {r["claim"]: r for r in csv.DictReader((d / "report" / "verdicts.csv").open())}
    fair, busy = v["fair-after-2.5s"], v["busy-after-2.5s"]
    assert float(fair["mean"]) == pytest.approx(53_290_000 / 58_580_000, rel=1e-3) and fair["verdict"] == "holds"
    assert float(busy["mean"]) == pytest.approx(0.64 * 1.02, rel=1e-5), busy  # scales 1.00 .. 1.04
    assert (busy["verdict"], busy["warmup_s"], busy["n"]) == ("holds", "2.5", "5")
    assert "warmup-2.5s/" in busy["note"] and "warmup" not in v["busy-whole-run"]["note"]
    # the whole-run claim reads summary.json's figure (0.5 in every run): far from 0.64
    assert (float(v["busy-whole-run"]["mean"]), v["busy-whole-run"]["verdict"]) == (0.5, "does not hold")
    table = {r["metric"]: r for r in csv.DictReader((d / "report" / "warmup-2.5s" / "table.csv").open())}
    assert table["utilization"]["mean"] == busy["mean"] and table["jain"]["n"] == "5"
    cubic = [r for r in csv.DictReader((d / "report" / "warmup-2.5s" / "table.csv").open()) if r["algo"] == "cubic"]
    assert [r["metric"] for r in cubic] == ["flow_throughput_mbps"]
    assert float(cubic[0]["mean"]) == pytest.approx(4800 * 1.02 / 1e6, rel=1e-3), "f2 is left out of cubic's mean"


def test_a_warm_up_no_run_outlasts_fails_in_one_line(tmp_path: Path) -> None:
    d = _sweep(tmp_path)
    (tmp_path / "hand.claims.toml").write_text(CLAIMS.replace("warmup_s = 2.5", "warmup_s = 9", 1))
    with pytest.raises(cl.ClaimsError) as e:
        report.write([d])
    msg = str(e.value)
    assert msg.startswith("claim fair-after-2.5s: warmup_s = 9: run ") and "has traffic for 5 s only" in msg, msg
    assert "\n" not in msg


def test_a_reference_archive_keeps_what_a_warm_up_needs(tmp_path: Path) -> None:
    """utilization and jain after a warm-up come from link.csv and timeseries.csv, which an archive keeps: the
    verdicts from the archive are the same, and its tables after the warm-up lack only the measured loss."""
    d = _sweep(tmp_path)
    report.write([d])
    archive = pool.pack([d], tmp_path / "ref.tar.xz")
    dirs = pool.unpack(archive, tmp_path / "x")  # the claims file is found beside the spec, as recorded
    report.write(dirs, tmp_path / "again")
    assert (tmp_path / "again" / "verdicts.csv").read_text() == (d / "report" / "verdicts.csv").read_text()
    ours, again = (
        (p / "warmup-2.5s" / "table.csv").read_text().splitlines() for p in (d / "report", tmp_path / "again")
    )
    # an archive keeps no links.csv (link x flow x interval): the one figure it cannot give is the loss
    assert again == [r for r in ours if ",measured_loss," not in r] and len(again) == len(ours) - 1
    assert math.isfinite(float(next(csv.DictReader((tmp_path / "again" / "verdicts.csv").open()))["mean"]))

"""`cclab report`: a sweep's complete runs aggregated into CSV tables and PNG plots.

Everything is read from the sweep directory's files (sweep.json and each run's
summary.json, cwnd.csv, ccstate.csv), so a report is regenerated from the raw
runs at any time.  Statistics per grid point over its repetitions: mean, the
sample standard deviation and the 95 % confidence interval of the mean by
Student's t (scipy.stats), with n, the number of complete runs.  Throughput is
the in-network figure of summary.json (switch counters); traces come from the
algorithms' own state (tcp_info, ccstate).

Two comparisons a reproduction needs beside the means: the throughput ratio of
every later over every earlier value of a swept algorithm field, paired by
repetition (the same seed, so the same loss draws), in ratios.csv; and the
paper's own numbers, read from ``<spec>.paper.csv`` beside the sweep's spec
(columns ``metric``, ``algo``, any swept paths, ``paper``, ``paper_ref``) and
written beside ours in table.csv, ratios.csv and the plots.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from controller import system
from controller.network import units
from controller.results import claims as claims_mod
from controller.results import pool as pool_mod
from controller.results import rundir, verdicts, window
from controller.results.cells import CONFIDENCE
from controller.results.cells import cell as _cell
from controller.results.cells import fmt as _fmt
from controller.results.cells import same as _same
from controller.results.cells import scalar as _scalar
from controller.results.plots import _by_flow, _read, _save, plt
from controller.spec.sweep import SweepError

log = logging.getLogger(__name__)

#: run-level metrics: (name, how to read it from summary.json, axis label)
RUN_METRICS = (
    ("utilization", lambda s: s["bottleneck"]["utilization"], "bottleneck utilization"),
    ("achieved_mbps", lambda s: _mbps(s["bottleneck"]["achieved_bps"]), "bottleneck departure rate (Mbit/s)"),
    ("total_throughput_mbps", lambda s: _mbps(sum(f["throughput_bps"] for f in s["flows"])), "sum of flows (Mbit/s)"),
    ("jain", lambda s: s["jain"], "Jain's index"),
    ("measured_loss", lambda s: s["bottleneck"]["measured_loss"], "measured random loss"),
)
#: the column that names the algorithm of a per-algorithm row; run-level rows carry ALL
ALL = "all"
#: a window reduction whose recovery is timed ends when cwnd is back within this many packets of where it was
RECOVERED_WITHIN_PKTS = 1
#: tcp_info's ssthresh before the first loss (TCP_INFINITE_SSTHRESH is 0x7fffffff); anything this large is unset
UNSET_SSTHRESH_PKTS = 1 << 30
#: the paper's numbers: <spec stem>.paper.csv beside the spec
PAPER_SUFFIX = ".paper.csv"


@dataclass(frozen=True)
class Stat:
    """Mean and 95 % confidence interval of one metric at one grid point."""

    n: int
    """Complete runs that gave a value."""
    mean: float | None
    """Sample mean."""
    std: float | None
    """Sample standard deviation (n - 1), None for n < 2."""
    ci_low: float | None
    """Lower end of the 95 % interval of the mean (Student's t, n - 1 degrees of freedom); None for n < 2."""
    ci_high: float | None
    """Upper end of that interval."""


def _mbps(bps: float | None) -> float | None:
    return None if bps is None else units.mbps(bps)


def mean_ci(values: list[float], confidence: float = CONFIDENCE) -> Stat:
    """Mean and Student's-t confidence interval of the mean (scipy.stats.t)."""
    n = len(values)
    if n == 0:
        return Stat(0, None, None, None, None)
    mean = float(np.mean(values))
    if n < 2:
        return Stat(1, mean, None, None, None)
    std = float(np.std(values, ddof=1))
    sem = std / math.sqrt(n)
    if sem == 0:
        return Stat(n, mean, 0.0, mean, mean)
    lo, hi = stats.t.interval(confidence, n - 1, loc=mean, scale=sem)
    return Stat(n, mean, std, float(lo), float(hi))


#: run-level figures besides RUN_METRICS that get a mean and CI per point
EXTRA_STATS = ("rtt_short_over_long", "cwnd_recovery_s")


def rtt_short_over_long(summary: dict[str, Any]) -> float | None:
    """Mean throughput of the TCP flows with the smallest base RTT over that of those with the largest, or None
    when the flows' base RTTs do not differ (RTT fairness: 1 is fair, the inverse RTT ratio is Reno-like)."""
    tcp = [f for f in summary["flows"] if f.get("kind", "tcp") == "tcp" and f.get("base_rtt_ms") is not None]
    rtts = sorted({f["base_rtt_ms"] for f in tcp})
    if len(rtts) < 2:
        return None
    short = [f["throughput_bps"] for f in tcp if f["base_rtt_ms"] == rtts[0]]
    long = [f["throughput_bps"] for f in tcp if f["base_rtt_ms"] == rtts[-1]]
    return None if sum(long) == 0 else (sum(short) / len(short)) / (sum(long) / len(long))


def cwnd_recoveries(
    cwnd_rows: list[dict[str, str]], algo: dict[str, str], since_s: float = 0.0
) -> tuple[list[float], int]:
    """Times (s) from each window reduction to cwnd back within RECOVERED_WITHIN_PKTS of its value before it, from
    the senders' tcp_info samples; and how many reductions had not recovered by the next one or the run's end.

    A reduction is a sample whose ssthresh differs from the previous sample's (the algorithm reacted to a loss)
    with a lower cwnd.  The exit from the first slow start (ssthresh still unset) is not one: its window was
    never the pipe's.  Samples taken before the flow's own algorithm was set are skipped.  ``since_s``: only the
    reductions seen at or after it are timed (a warm-up left out)."""
    series: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for r in cwnd_rows:
        if r.get("flow") in algo and r.get("algo") == algo[r["flow"]] and r.get("cwnd_pkts"):
            series[r["flow"]].append((float(r["t_s"]), float(r["cwnd_pkts"]), float(r.get("ssthresh_pkts") or "nan")))
    done: list[float] = []
    unrecovered = 0
    for samples in series.values():
        start: tuple[float, float] | None = None  # (time of the reduction, cwnd before it)
        for (_, w0, th0), (t, w, th) in zip(samples, samples[1:]):
            if th != th0 and w < w0:
                unrecovered += start is not None
                start = None if not th0 < UNSET_SSTHRESH_PKTS or t < since_s else (t, w0)
            elif start is not None and w >= start[1] - RECOVERED_WITHIN_PKTS:
                done.append(t - start[0])
                start = None
        unrecovered += start is not None
    return done, unrecovered


#: per_path's metrics, each a column "<where>_<metric>" of runs.csv
PATH_METRICS = (
    "subflow_throughput_mbps",
    "path_flow_throughput_mbps",
    "connection_throughput_mbps",
    "connection_over_path_flow",
)


def per_path(s: dict[str, Any]) -> dict[tuple[str, str], float]:
    """Runs with an mptcp connection: each subflow's Mbit/s by the links it crosses ("subflow_throughput_mbps",
    "l1"; "l1:f1.2" where subflows share their links), the mean of the single-path TCP flows on each path beside
    it ("path_flow_throughput_mbps"), each connection's Mbit/s ("connection_throughput_mbps", "f1"), and where all
    of a connection's subflows share one path, the connection over that path's single-path mean
    ("connection_over_path_flow", "f1": 1 is the fair share a coupled connection aims at)."""
    conns = s.get("mptcp", [])
    subs = {sid for conn in conns for sid in conn["subflows"]}
    if not subs:
        return {}
    out: dict[tuple[str, str], float] = {}
    single: dict[str, list[float]] = defaultdict(list)
    where_of = {f["id"]: "+".join(f["path"]) for f in s["flows"]}
    crowded = {w for w in where_of.values() if sum(where_of[i] == w for i in subs) > 1}
    for f in s["flows"]:
        where = where_of[f["id"]]
        if f["id"] in subs:
            key = f"{where}:{f['id']}" if where in crowded else where
            out[("subflow_throughput_mbps", key)] = units.mbps(f["throughput_bps"])
        elif f.get("kind", "tcp") == "tcp":
            single[where].append(units.mbps(f["throughput_bps"]))
    for where, tputs in single.items():
        out[("path_flow_throughput_mbps", where)] = sum(tputs) / len(tputs)
    for conn in conns:
        mbps = units.mbps(conn["throughput_bps"])
        out[("connection_throughput_mbps", conn["id"])] = mbps
        paths = {where_of[sid] for sid in conn["subflows"]}
        if len(paths) == 1 and (mean := out.get(("path_flow_throughput_mbps", next(iter(paths))))):
            out[("connection_over_path_flow", conn["id"])] = mbps / mean
    return out


def _run_row(
    run: pool_mod.Run, point_values: dict[int, dict[str, Any]], pooled: bool, why: str, shown: Callable[[Path], str]
) -> dict[str, Any]:
    pt = run.point
    row: dict[str, Any] = {"point": pt["index"], "rep": pt["rep"], "seed": pt["seed"], **point_values[pt["index"]]}
    row.update(sweep=shown(run.sweep_dir), run_dir=str(run.run_dir.relative_to(run.sweep_dir)))
    row.update(commit=run.commit, source_hash=run.source_hash, pooled=pooled, left_out=why)
    row.update(n_flows=len(run.summary["flows"]), fidelity_ok=run.summary["fidelity"]["ok"])
    row["duration_s"] = run.manifest.get("spec", {}).get("duration_s")
    return row


def tables(pool: pool_mod.Pool, warmup_s: float = 0.0) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """(swept paths, one row per complete run (pooled or left out), one row per grid point x metric x algorithm
    over the pooled runs).  ``warmup_s`` > 0: every figure over [warmup_s, end] of each run (window.windowed)."""
    manifest = pool.manifest
    paths = [g["path"] for g in manifest["grid"]]
    run_rows = []
    # (point index, metric, algo) -> values over repetitions
    values: dict[tuple[int, str, str], list[float]] = defaultdict(list)
    fid_failed: dict[int, int] = defaultdict(int)
    point_values = {pt["index"]: {k: _cell(v) for k, v in pt["values"].items()} for pt in manifest["points"]}
    for run, why in [(r, "") for r in pool.runs] + pool.left_out:
        pt, run_dir, s = run.point, run.run_dir, run.summary
        row = _run_row(run, point_values, not why, why, pool.shown)
        if warmup_s > 0:
            s = window.windowed(run_dir, s, warmup_s)
        fid_failed[pt["index"]] += why.startswith(pool_mod.FIDELITY)
        into = values if not why else defaultdict(list)  # a left-out run's figures are shown, never pooled
        for name, get, _ in RUN_METRICS:
            v = get(s)
            row[name] = v
            if v is not None:
                into[(pt["index"], name, ALL)].append(float(v))
        extra = {"rtt_short_over_long": rtt_short_over_long(s)}
        algo_of = {f["id"]: f["algo"] for f in s["flows"] if f.get("kind", "tcp") == "tcp"}
        times, censored = cwnd_recoveries(_read(run_dir / "cwnd.csv"), algo_of, warmup_s)
        extra["cwnd_recovery_s"] = float(np.median(times)) if times else None
        extra["cwnd_recoveries"] = len(times)
        extra["cwnd_unrecovered"] = censored
        for name, v in extra.items():
            row[name] = v
            if v is not None and name in EXTRA_STATS:
                into[(pt["index"], name, ALL)].append(float(v))
        by_algo: dict[str, list[float]] = defaultdict(list)
        for f in s["flows"]:
            by_algo[f["algo"]].append(units.mbps(f["throughput_bps"]))
        for algo, tputs in sorted(by_algo.items()):
            row[f"{algo}_flow_throughput_mbps"] = sum(tputs) / len(tputs)
            into[(pt["index"], "flow_throughput_mbps", algo)].append(sum(tputs) / len(tputs))
        for (metric, where), v in sorted(per_path(s).items()):
            row[f"{where}_{metric}"] = v
            into[(pt["index"], metric, where)].append(v)
        run_rows.append(row)

    flows_at = {r["point"]: r["n_flows"] for r in run_rows}
    fid_ok = Counter(r.point["index"] for r in pool.runs)
    reps = manifest["repetitions"]
    stat_rows = []
    for (index, metric, algo), vs in sorted(values.items()):
        st = mean_ci(vs)
        stat_rows.append(
            {
                "point": index,
                **point_values[index],
                "n_flows": flows_at.get(index),
                "metric": metric,
                "algo": algo,
                "n": st.n,
                "repetitions": reps,
                "mean": st.mean,
                "std": st.std,
                "ci95_low": st.ci_low,
                "ci95_high": st.ci_high,
                "fidelity_ok_runs": fid_ok[index],
                "fidelity_failed_runs": fid_failed[index],
            }
        )
    return paths, run_rows, stat_rows


def ratios(manifest: dict[str, Any], run_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-flow throughput of every later over every earlier value of each swept algorithm field (a path ending in
    ``algo``), paired by seed (the repetition) and the other swept values: mean and CI of the paired ratios."""
    paths = [g["path"] for g in manifest["grid"]]
    out = []
    for g in manifest["grid"]:
        if not g["path"].endswith("algo") or not all(isinstance(v, str) for v in g["values"]):
            continue
        others = [p for p in paths if p != g["path"]]
        by: dict[tuple[Any, ...], dict[str, float]] = defaultdict(dict)  # (other values..., rep) -> algo -> Mbit/s
        for r in run_rows:
            v = r.get(f"{r[g['path']]}_flow_throughput_mbps")
            if v is not None and r["pooled"]:
                by[tuple(r[o] for o in others) + (r["seed"],)][r[g["path"]]] = v
        for i, lo in enumerate(g["values"]):
            for hi in g["values"][i + 1 :]:
                paired: dict[tuple[Any, ...], list[float]] = defaultdict(list)
                for key, tput in by.items():
                    if lo in tput and hi in tput and tput[lo] > 0:
                        paired[key[:-1]].append(tput[hi] / tput[lo])
                for okey, vs in sorted(paired.items(), key=str):
                    st = mean_ci(vs)
                    out.append(
                        {
                            **dict(zip(others, okey)),
                            "metric": "flow_throughput_ratio",
                            "algo": f"{hi}/{lo}",
                            "n": st.n,
                            "mean": st.mean,
                            "std": st.std,
                            "ci95_low": st.ci_low,
                            "ci95_high": st.ci_high,
                        }
                    )
    return out


def spec_beside(manifest: dict[str, Any], suffix: str) -> Path | None:
    """``<spec stem><suffix>`` beside the sweep's spec (its path as recorded, from here or the repository)."""
    spec = Path(manifest.get("spec_path") or "")
    for base in (Path.cwd(), system.REPO):
        path = base / spec.parent / (spec.stem + suffix)
        if spec.name and path.exists():
            return path
    return None


def paper_numbers(manifest: dict[str, Any]) -> list[dict[str, str]]:
    """The rows of ``<spec stem>.paper.csv`` beside the sweep's spec (none when there is no such file)."""
    path = spec_beside(manifest, PAPER_SUFFIX)
    return _read(path) if path else []


def with_paper(rows: list[dict[str, Any]], paper: list[dict[str, str]], paths: list[str]) -> None:
    """Put the paper's number(s) for each row's metric, algorithm and swept values (where the paper row gives
    them) into its ``paper`` and ``paper_ref`` cells."""
    for r in rows:
        hits = [
            p
            for p in paper
            if p["metric"] == r["metric"]
            and p["algo"] == r["algo"]
            and all(_same(p[k], r.get(k)) for k in paths if p.get(k, "") != "")
        ]
        r["paper"] = "; ".join(p["paper"] for p in hits)
        r["paper_ref"] = "; ".join(p.get("paper_ref", "") for p in hits)


def _float_or_none(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _numeric(xs: list[Any]) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)


def _plot_metric(
    rows: list[dict[str, Any]], x: str, metric: str, others: list[str], label: str, title: str, path: Path
) -> None:
    """Mean with 95 % error bars against swept field x; one line per algorithm and value of the other fields."""
    series: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["metric"] == metric and r["mean"] is not None:
            series[(r["algo"],) + tuple(r[o] for o in others)].append(r)
    xs_all = sorted({r[x] for rs in series.values() for r in rs}, key=lambda v: (str(type(v)), v))
    numeric = _numeric(xs_all)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for key, rs in sorted(series.items(), key=lambda kv: str(kv[0])):
        rs = sorted(rs, key=lambda r: xs_all.index(r[x]))
        pos = [r[x] if numeric else xs_all.index(r[x]) for r in rs]
        mean = [r["mean"] for r in rs]
        err = [
            [0.0 if r["ci95_low"] is None else r["mean"] - r["ci95_low"] for r in rs],
            [0.0 if r["ci95_high"] is None else r["ci95_high"] - r["mean"] for r in rs],
        ]
        name = ", ".join([*([] if key[0] == ALL else [str(key[0])]), *(f"{o}={v}" for o, v in zip(others, key[1:]))])
        line = ax.errorbar(pos, mean, yerr=err, marker="o", capsize=3, lw=1, label=name or metric)
        papers = [(p, v) for p, r in zip(pos, rs) if (v := _float_or_none(r.get("paper"))) is not None]
        if papers:
            ax.plot(
                [p for p, _ in papers],
                [v for _, v in papers],
                "x",
                ms=9,
                mew=2,
                color=line.lines[0].get_color(),
                label=f"paper: {name or metric}",
            )
    if numeric:
        positive = [v for v in xs_all if v > 0]
        if positive and max(positive) / min(positive) > 100:
            ax.set_xscale("symlog", linthresh=min(positive))
    else:
        ax.set_xticks(range(len(xs_all)), [str(v) for v in xs_all])
    n = sorted({r["n"] for rs in series.values() for r in rs})
    ax.set(xlabel=x, ylabel=label, title=f"{title}\nmean and 95 % CI (Student's t), n = {', '.join(map(str, n))}")
    if series:
        ax.legend(fontsize=8)
    _save(fig, path)


def _plot_traces(pool: pool_mod.Pool, out: Path) -> list[Path]:
    """cwnd (tcp_info) and bandwidth estimates (ccstate) of each grid point's first pooled repetition."""
    written = []
    shown: set[int] = set()
    for run in pool.runs:
        pt = run.point
        if pt["index"] in shown:
            continue
        shown.add(pt["index"])
        run_dir = run.run_dir
        algo = {f["id"]: f["algo"] for f in json.loads((run_dir / "summary.json").read_text())["flows"]}
        cwnd, cc = _read(run_dir / "cwnd.csv"), _read(run_dir / "ccstate.csv")
        bwe = _by_flow(cc, "bwe_bps") if cc and "bwe_bps" in cc[0] else {}
        fig, axes = plt.subplots(2 if bwe else 1, 1, figsize=(8, 6 if bwe else 3.5), sharex=True, squeeze=False)
        for flow, (xs, ys) in sorted(_by_flow(cwnd, "cwnd_pkts").items()):
            axes[0][0].plot(xs, ys, lw=1, label=f"{flow} {algo.get(flow, '')}")
        desc = ", ".join(f"{k}={v}" for k, v in pt["values"].items())
        axes[0][0].set(ylabel="cwnd (packets)", title=f"point {pt['index']} ({desc}), rep {pt['rep']}")
        if cwnd:
            axes[0][0].legend(fontsize=8, ncol=2)
        if bwe:
            for flow, (xs, ys) in sorted(bwe.items()):
                axes[1][0].plot(xs, [units.mbps(y) for y in ys], lw=1, label=f"{flow} {algo.get(flow, '')}")
            axes[1][0].set(ylabel="bandwidth estimate (Mbit/s)")
            axes[1][0].legend(fontsize=8, ncol=2)
        axes[-1][0].set(xlabel="time (s)")
        path = out / f"traces-p{pt['index']:03d}.png"
        _save(fig, path)
        written.append(path)
    return written


def _write_tables(
    out: Path,
    paths: list[str],
    run_rows: list[dict[str, Any]],
    stat_rows: list[dict[str, Any]],
    ratio_rows: list[dict[str, Any]],
    paper: list[dict[str, str]],
) -> list[Path]:
    """runs.csv, table.csv and (with ratio rows) ratios.csv under out, the paper's numbers beside ours."""
    out.mkdir(parents=True, exist_ok=True)
    run_cols = ["point", "rep", "seed", *paths, "n_flows", "duration_s", "fidelity_ok", "pooled", "left_out"]
    run_cols += ["commit", "source_hash", "sweep", "run_dir", *(m for m, _, _ in RUN_METRICS)]
    run_cols += ["rtt_short_over_long", "cwnd_recovery_s", "cwnd_recoveries", "cwnd_unrecovered"]
    run_cols += sorted({k for r in run_rows for k in r if k.endswith(("_flow_throughput_mbps", *PATH_METRICS))})
    stat_cols = ["point", *paths, "n_flows", "metric", "algo", "n", "repetitions", "mean", "std", "ci95_low"]
    stat_cols += ["ci95_high", "fidelity_ok_runs", "fidelity_failed_runs"]
    ratio_cols = [*(p for p in paths if ratio_rows and p in ratio_rows[0]), "metric", "algo", "n", "mean", "std"]
    ratio_cols += ["ci95_low", "ci95_high"]
    if paper:
        with_paper(stat_rows, paper, paths)
        with_paper(ratio_rows, paper, paths)
        stat_cols += ["paper", "paper_ref"]
        ratio_cols += ["paper", "paper_ref"]
    written = [out / "runs.csv", out / "table.csv"]
    rundir.write_csv(written[0], run_rows, run_cols)
    fmt = [{k: _fmt(v) if isinstance(v, float) else v for k, v in r.items()} for r in stat_rows]
    rundir.write_csv(written[1], fmt, stat_cols)
    if ratio_rows:
        written.append(out / "ratios.csv")
        fmt = [{k: _fmt(v) if isinstance(v, float) else v for k, v in r.items()} for r in ratio_rows]
        rundir.write_csv(written[-1], fmt, ratio_cols)
    return written


def warmup_dir(out: Path, warmup_s: float) -> Path:
    """Where a report puts its tables over [warmup_s, end]: warmup-<s>s/ beside its whole-run ones."""
    return out / f"warmup-{warmup_s:g}s"


def _judge(
    claims: list[claims_mod.Claim],
    pool: pool_mod.Pool,
    whole: list[dict[str, Any]],
    paper: list[dict[str, str]],
    out: Path,
) -> tuple[dict[float, list[dict[str, Any]]], list[Path]]:
    """The rows each claim is judged on, by its warm-up: the whole-run rows for 0, and for each other warm-up the
    tables over [warmup_s, end] of every run, written under warmup_dir.  A claim whose metric no pooled run can
    give after its warm-up fails in one line (ClaimsError)."""
    rows = {0.0: whole}
    written: list[Path] = []
    for w in sorted({c.warmup_s for c in claims if c.warmup_s > 0}):
        for c in (c for c in claims if c.warmup_s == w):
            for run in pool.runs:
                why = window.unfit(run.run_dir, run.summary, w, c.metric)
                if why is not None:
                    raise claims_mod.ClaimsError(f"claim {c.id}: warmup_s = {w:g}: {why}")
        paths, run_rows, stat_rows = tables(pool, w)
        ratio_rows = ratios(pool.manifest, run_rows)
        written += _write_tables(warmup_dir(out, w), paths, run_rows, stat_rows, ratio_rows, paper)
        rows[w] = stat_rows + ratio_rows
    return rows, written


def write(
    sweep_dirs: list[Path],
    out_dir: Path | None = None,
    source_hash: str | None = None,
    *,
    everything: bool = False,
    labels: dict[Path, str] | None = None,
    plots: bool = True,
) -> list[Path]:
    """Pool the sweep directories' runs (controller.results.pool); write runs.csv, table.csv, ratios.csv, the
    verdicts of the spec's claims file (with the tables over [warmup_s, end] its warm-ups need) and the plots
    under out_dir (default FIRST_SWEEP_DIR/report).  ``everything``: every complete run, whatever its tree,
    hash and fidelity, and no verdicts.  ``labels``: how runs.csv and verdicts.md name the directories.
    ``plots`` False: the tables and verdicts only."""
    pool = pool_mod.collect(sweep_dirs, source_hash, everything=everything, labels=labels)
    manifest = pool.manifest
    out = out_dir or sweep_dirs[0] / "report"
    paths, run_rows, stat_rows = tables(pool)
    if not pool.runs:
        why = f"; left out: {pool.shown(pool.left_out[0][0].run_dir)}: {pool.left_out[0][1]}" if pool.left_out else ""
        raise SweepError(f"{pool.shown(sweep_dirs[0])} has no complete run to pool yet{why}")
    paper = paper_numbers(manifest)
    ratio_rows = ratios(manifest, run_rows)
    written = _write_tables(out, paths, run_rows, stat_rows, ratio_rows, paper)
    claims_file = spec_beside(manifest, claims_mod.CLAIMS_SUFFIX)
    if claims_file is not None and everything:
        log.warning("no verdicts: every complete run was taken (--all-runs), not a pool")
    elif claims_file is not None:
        before, order = verdicts.written_before(claims_file, pool)
        if before:
            claims = claims_mod.parse(claims_file)
            rows, more = _judge(claims, pool, stat_rows + ratio_rows, paper, out)
            written += more + verdicts.write(claims, rows, run_rows, pool, out, order)
        else:
            log.warning("no verdicts: %s", order)
            (out / "verdicts.csv").unlink(missing_ok=True)
            written.append(out / "verdicts.md")
            written[-1].write_text(f"No verdicts: {order}.\n")

    if plots:
        written += _plots(pool, paths, stat_rows, run_rows, ratio_rows, out)
    log.info(
        "report of %s: %d runs pooled, %d left out, %d files",
        sweep_dirs,
        len(pool.runs),
        len(pool.left_out),
        len(written),
    )
    return written


def _plots(
    pool: pool_mod.Pool,
    paths: list[str],
    stat_rows: list[dict[str, Any]],
    run_rows: list[dict[str, Any]],
    ratio_rows: list[dict[str, Any]],
    out: Path,
) -> list[Path]:
    """The report's PNGs: each metric against each swept field, the ratios, and the traces."""
    manifest = pool.manifest
    written: list[Path] = []
    scalar = [g["path"] for g in manifest["grid"] if all(_scalar(v) for v in g["values"])]
    xs = list(scalar)
    if len(scalar) < len(paths) and len({r["n_flows"] for r in run_rows}) > 1:
        xs.append("n_flows")  # a swept table or array (e.g. the flows) sets the flow count: Jain vs flow count
    measured = {r["metric"] for r in stat_rows}
    for x in xs:
        others = [p for p in scalar if p != x]
        slug = x.replace(".", "_").replace("[", "").replace("]", "")
        plots = [
            ("flow_throughput_mbps", "mean throughput per flow (Mbit/s)", "throughput per algorithm", "throughput"),
            ("utilization", "bottleneck utilization", "utilization", "utilization"),
            ("jain", "Jain's index", "Jain's index over all flows", "jain"),
        ]
        optional = [
            ("rtt_short_over_long", "throughput short-RTT / long-RTT flows", "RTT fairness", "rtt-ratio"),
            ("cwnd_recovery_s", "median s from a window reduction back to it", "window recovery", "recovery"),
        ]
        plots += [p for p in optional if p[0] in measured]
        for metric, label, title, name in plots:
            path = out / f"{name}-vs-{slug}.png"
            _plot_metric(stat_rows, x, metric, others, label, title, path)
            written.append(path)
        if ratio_rows and x in ratio_rows[0]:
            path = out / f"ratio-vs-{slug}.png"
            rest = [o for o in others if o in ratio_rows[0]]
            title = "throughput ratio, paired by repetition"
            _plot_metric(ratio_rows, x, "flow_throughput_ratio", rest, "per-flow throughput ratio", title, path)
            written.append(path)
    written += _plot_traces(pool, out)
    return written

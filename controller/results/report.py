"""`cclab report`: a sweep's complete runs aggregated into CSV tables and PNG plots.

Everything is read from the sweep directory's files (sweep.json and each run's
summary.json, cwnd.csv, ccstate.csv), so a report is regenerated from the raw
runs at any time.  Statistics per grid point over its repetitions: mean, the
sample standard deviation and the 95 % confidence interval of the mean by
Student's t (scipy.stats), with n, the number of complete runs.  Throughput is
the in-network figure of summary.json (switch counters); traces come from the
algorithms' own state (tcp_info, ccstate).
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from controller.experiment.sweep import MANIFEST, SweepError
from controller.results import rundir
from controller.results.plots import _by_flow, _read, _save, plt

log = logging.getLogger(__name__)

CONFIDENCE = 0.95
#: run-level metrics: (name, how to read it from summary.json, axis label)
RUN_METRICS = (
    ("utilization", lambda s: s["bottleneck"]["utilization"], "bottleneck utilization"),
    ("achieved_mbps", lambda s: _mbps(s["bottleneck"]["achieved_bps"]), "bottleneck departure rate (Mbit/s)"),
    ("total_throughput_mbps", lambda s: sum(f["throughput_bps"] for f in s["flows"]) / 1e6, "sum of flows (Mbit/s)"),
    ("jain", lambda s: s["jain"], "Jain's index"),
    ("measured_loss", lambda s: s["bottleneck"]["measured_loss"], "measured random loss"),
)
#: the column that names the algorithm of a per-algorithm row; run-level rows carry ALL
ALL = "all"


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
    return None if bps is None else bps / 1e6


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


def _runs(sweep_dir: Path) -> tuple[dict[str, Any], list[tuple[dict[str, Any], Path, dict[str, Any]]]]:
    """The sweep manifest, and (point entry, run dir, summary) of every complete run."""
    try:
        manifest: dict[str, Any] = json.loads((sweep_dir / MANIFEST).read_text())
    except OSError:
        raise SweepError(f"{sweep_dir} is not a sweep directory (no {MANIFEST}); run `cclab sweep` first") from None
    runs = []
    for pt in manifest["points"]:
        if pt["run_dir"] is None:
            continue
        run_dir = sweep_dir / pt["run_dir"]
        summ = json.loads((run_dir / "summary.json").read_text())
        if summ.get("complete"):
            runs.append((pt, run_dir, summ))
    return manifest, runs


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool))


def _cell(v: Any) -> Any:
    """A swept value as a table cell: scalars as they are, tables and arrays as JSON."""
    return v if _scalar(v) else json.dumps(v, sort_keys=True)


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def tables(sweep_dir: Path) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """(swept paths, one row per run, one row per grid point x metric x algorithm)."""
    manifest, runs = _runs(sweep_dir)
    paths = [g["path"] for g in manifest["grid"]]
    run_rows = []
    # (point index, metric, algo) -> values over repetitions
    values: dict[tuple[int, str, str], list[float]] = defaultdict(list)
    fid_ok: dict[int, int] = defaultdict(int)
    point_values = {pt["index"]: {k: _cell(v) for k, v in pt["values"].items()} for pt in manifest["points"]}
    for pt, run_dir, s in runs:
        row: dict[str, Any] = {"point": pt["index"], "rep": pt["rep"], "seed": pt["seed"], **point_values[pt["index"]]}
        row.update(run_dir=str(run_dir.relative_to(sweep_dir)), n_flows=len(s["flows"]))
        row["fidelity_ok"] = s["fidelity"]["ok"]
        fid_ok[pt["index"]] += bool(s["fidelity"]["ok"])
        for name, get, _ in RUN_METRICS:
            v = get(s)
            row[name] = v
            if v is not None:
                values[(pt["index"], name, ALL)].append(float(v))
        by_algo: dict[str, list[float]] = defaultdict(list)
        for f in s["flows"]:
            by_algo[f["algo"]].append(f["throughput_bps"] / 1e6)
        for algo, tputs in sorted(by_algo.items()):
            row[f"{algo}_flow_throughput_mbps"] = sum(tputs) / len(tputs)
            values[(pt["index"], "flow_throughput_mbps", algo)].append(sum(tputs) / len(tputs))
        run_rows.append(row)

    flows_at = {r["point"]: r["n_flows"] for r in run_rows}
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
            }
        )
    return paths, run_rows, stat_rows


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
        ax.errorbar(pos, mean, yerr=err, marker="o", capsize=3, lw=1, label=name or metric)
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


def _plot_traces(sweep_dir: Path, manifest: dict[str, Any], out: Path) -> list[Path]:
    """cwnd (tcp_info) and bandwidth estimates (ccstate) of each grid point's first complete repetition."""
    written = []
    shown: set[int] = set()
    for pt in manifest["points"]:
        if pt["run_dir"] is None or pt["index"] in shown:
            continue
        shown.add(pt["index"])
        run_dir = sweep_dir / pt["run_dir"]
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
                axes[1][0].plot(xs, [y / 1e6 for y in ys], lw=1, label=f"{flow} {algo.get(flow, '')}")
            axes[1][0].set(ylabel="bandwidth estimate (Mbit/s)")
            axes[1][0].legend(fontsize=8, ncol=2)
        axes[-1][0].set(xlabel="time (s)")
        path = out / f"traces-p{pt['index']:03d}.png"
        _save(fig, path)
        written.append(path)
    return written


def write(sweep_dir: Path, out_dir: Path | None = None) -> list[Path]:
    """Write runs.csv, table.csv and the plots under out_dir (default SWEEP_DIR/report); return the files."""
    out = out_dir or sweep_dir / "report"
    paths, run_rows, stat_rows = tables(sweep_dir)
    if not run_rows:
        raise SweepError(f"{sweep_dir} has no complete run yet; run `cclab sweep` on its spec")
    out.mkdir(parents=True, exist_ok=True)
    run_cols = ["point", "rep", "seed", *paths, "n_flows", "fidelity_ok", "run_dir", *(m for m, _, _ in RUN_METRICS)]
    run_cols += sorted({k for r in run_rows for k in r if k.endswith("_flow_throughput_mbps")})
    stat_cols = ["point", *paths, "n_flows", "metric", "algo", "n", "repetitions", "mean", "std", "ci95_low"]
    stat_cols += ["ci95_high", "fidelity_ok_runs"]
    written = [out / "runs.csv", out / "table.csv"]
    rundir.write_csv(written[0], run_rows, run_cols)
    fmt = [{k: _fmt(v) if isinstance(v, float) else v for k, v in r.items()} for r in stat_rows]
    rundir.write_csv(written[1], fmt, stat_cols)

    manifest, _ = _runs(sweep_dir)
    scalar = [g["path"] for g in manifest["grid"] if all(_scalar(v) for v in g["values"])]
    xs = list(scalar)
    if len(scalar) < len(paths) and len({r["n_flows"] for r in run_rows}) > 1:
        xs.append("n_flows")  # a swept table or array (e.g. the flows) sets the flow count: Jain vs flow count
    for x in xs:
        others = [p for p in scalar if p != x]
        slug = x.replace(".", "_").replace("[", "").replace("]", "")
        plots = [
            ("flow_throughput_mbps", "mean throughput per flow (Mbit/s)", "throughput per algorithm", "throughput"),
            ("utilization", "bottleneck utilization", "utilization", "utilization"),
            ("jain", "Jain's index", "Jain's index over all flows", "jain"),
        ]
        for metric, label, title, name in plots:
            path = out / f"{name}-vs-{slug}.png"
            _plot_metric(stat_rows, x, metric, others, label, title, path)
            written.append(path)
    written += _plot_traces(sweep_dir, manifest, out)
    log.info("report of %s: %d runs, %d files", sweep_dir, len(run_rows), len(written))
    return written

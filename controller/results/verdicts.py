"""A report's verdicts: each claim of the sweep's claims file judged on the report's rows (docs/claims.md).

The judged interval is the row's 95 % confidence interval (Student's t) for ratio and value claims; for an
order claim, the relative difference from ``than``: the row's interval over a number, minus 1, or Welch's
interval of the difference of the two rows' means over the other row's mean.  The verdict is
claims.judge's, and inconclusive whenever fewer pooled runs than the claim's n gave the row(s).
"""

from __future__ import annotations

import datetime as dt
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import stats

from controller.results import claims as cl
from controller.results import pool as pool_mod
from controller.results import rundir
from controller.results.cells import CONFIDENCE
from controller.results.cells import cell as _cell
from controller.results.cells import fmt as _fmt
from controller.results.cells import same as _same


@dataclass(frozen=True)
class Verdict:
    claim: cl.Claim
    verdict: str
    """holds, does not hold or inconclusive."""
    n: int
    """Pooled runs behind the judged interval (the smaller of two rows')."""
    mean: float | None
    lo: float | None
    hi: float | None
    note: str
    """Why it is inconclusive without an interval, or what the interval is."""


def _select(rows: list[dict[str, Any]], metric: str, algo: str, at: dict[str, Any], claim: cl.Claim) -> list[Any]:
    hits = [
        r
        for r in rows
        if r["metric"] == metric and r["algo"] == algo and all(k in r and _same(_cell(v), r[k]) for k, v in at.items())
    ]
    if len(hits) > 1:
        raise cl.ClaimsError(
            f"claim {claim.id}: metric {metric!r}, algo {algo!r}, at {at} selects {len(hits)} rows of the report; "
            "give more swept values in at"
        )
    return hits


def _welch(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, float, float] | None:
    """Mean difference a - b and its 95 % Welch interval, or None without standard deviations."""
    if a["std"] is None or b["std"] is None:
        return None
    va, vb = a["std"] ** 2 / a["n"], b["std"] ** 2 / b["n"]
    diff = a["mean"] - b["mean"]
    if va + vb == 0:
        return diff, diff, diff
    df = (va + vb) ** 2 / (va**2 / (a["n"] - 1) + vb**2 / (b["n"] - 1))
    half = float(stats.t.ppf((1 + CONFIDENCE) / 2, df)) * math.sqrt(va + vb)
    return diff, diff - half, diff + half


def judge(claim: cl.Claim, rows: list[dict[str, Any]]) -> Verdict:
    """The verdict of one claim on a report's table and ratio rows (those over [warmup_s, end] for a claim with a
    warm-up: report._judge)."""
    hits = _select(rows, claim.metric, claim.algo, claim.at, claim)
    if not hits or hits[0]["mean"] is None:
        return Verdict(claim, cl.INCONCLUSIVE, 0, None, None, None, "no run gave this row yet")
    row = hits[0]
    n = int(row["n"])
    mean, lo, hi = row["mean"], row["ci95_low"], row["ci95_high"]
    note = "95 % CI of the row"
    if claim.compare == "order" and isinstance(claim.than, dict):
        other_at = {k: v for k, v in claim.than.items() if k != "algo"}
        other = _select(rows, claim.metric, str(claim.than.get("algo", claim.algo)), {**claim.at, **other_at}, claim)
        if not other or other[0]["mean"] is None:
            return Verdict(claim, cl.INCONCLUSIVE, 0, None, None, None, "no run gave the other row yet")
        b = other[0]
        n = min(n, int(b["n"]))
        w = _welch(row, b)
        if w is None or not b["mean"]:
            return Verdict(claim, cl.INCONCLUSIVE, n, None, None, None, "too few runs for an interval")
        mean, lo, hi = (x / b["mean"] for x in w)
        note = f"(row - other) / other = {mean:.3g}, Welch 95 % CI; other mean {b['mean']:.4g}"
    elif claim.compare == "order":
        assert isinstance(claim.than, float)
        t = claim.than
        mean = mean / t - 1
        lo, hi = (None, None) if lo is None else (lo / t - 1, hi / t - 1)
        note = f"row / {t:g} - 1, 95 % CI"
    if n < claim.n:
        return Verdict(claim, cl.INCONCLUSIVE, n, mean, lo, hi, f"n = {n} < the claim's {claim.n}")
    return Verdict(claim, cl.judge(lo, hi, claim.region()), n, mean, lo, hi, note)


def region_text(claim: cl.Claim) -> str:
    a, b = claim.region()
    if claim.compare == "order":
        rel = "relative difference from " + (f"{claim.than:g}" if isinstance(claim.than, float) else "the other row")
        return f"{rel} >= {a:g}" if claim.direction == "above" else f"{rel} <= {b:g}"
    return f"[{a:.4g}, {b:.4g}]"


def _matches(point_values: dict[str, Any], at: dict[str, Any]) -> bool:
    return all(k not in point_values or _same(_cell(v), point_values[k]) for k, v in at.items())


COLUMNS = [
    "claim", "source", "says", "paper", "metric", "algo", "at", "compare", "claimed", "margin", "n", "n_required",
    "mean", "ci95_low", "ci95_high", "verdict", "run_length_s", "warmup_s", "fidelity_passed", "note",
]  # fmt: skip


def written_before(claims_file: Path, pool: pool_mod.Pool) -> tuple[bool, str]:
    """Whether the claims file, as the report reads it, was committed before every pooled run was made, and
    the one line that says so or why not. A run's commit that git has comes after the claims file's last
    commit when that commit is its ancestor; a run's commit that git lacks (made in a clone whose commits
    never reached this one) cannot be placed in the history, so that run is judged by time: it started
    (its manifest's started_utc) after the claims file's last commit was made. A claims file outside any
    git work tree (a user's scratch sweep) has no order to check: True, said so."""
    git = ["git", "-C", str(claims_file.resolve().parent)]

    def ask(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*git, *args], capture_output=True, text=True, timeout=30)

    try:
        if ask("rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
            return True, f"{claims_file.name} is not under git: that it preceded the runs is not checked"
        if ask("status", "--porcelain", "--", claims_file.name).stdout.strip():
            return False, f"{claims_file.name} has changes not committed: a claim is committed before the runs"
        last, _, when = ask("log", "-1", "--format=%H %cI", "--", claims_file.name).stdout.strip().partition(" ")
        if not last:
            return False, f"{claims_file.name} was never committed: a claim is committed before the runs"
        committed = dt.datetime.fromisoformat(when)
        # one question per commit: a campaign's runs share a handful of commits
        commits = {r.commit for r in pool.runs}
        known = {c for c in commits if ask("rev-parse", "--verify", "-q", f"{c}^{{commit}}").returncode == 0}
        after = {c: ask("merge-base", "--is-ancestor", last, c).returncode == 0 for c in known}
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"cannot ask git whether {claims_file.name} preceded the runs: {exc}"
    by_time = [r for r in pool.runs if r.commit not in known]
    late = [r for r in pool.runs if not (after[r.commit] if r.commit in known else _started_after(r, committed))]
    if late:
        first = late[0]
        return False, (
            f"{claims_file.name} was last changed in {last[:12]} ({when}), which {len(late)} of the "
            f"{len(pool.runs)} pooled runs do not come after (e.g. {first.run_dir.name}, made at {first.commit}"
            f"{', which git lacks, started ' + str(first.manifest.get('started_utc')) if first in by_time else ''}"
            "): its claims were not written before them"
        )
    timed = (
        f"; {len(by_time)} of them, made at commits git lacks ({', '.join(sorted({r.commit for r in by_time}))}), "
        "by their start time"
        if by_time
        else ""
    )
    return True, f"{claims_file.name} was last changed in {last[:12]} ({when}), before every pooled run{timed}"


def _started_after(run: pool_mod.Run, committed: dt.datetime) -> bool:
    """Whether the run's manifest says it started after `committed` (False when it says nothing usable)."""
    try:
        return dt.datetime.fromisoformat(str(run.manifest.get("started_utc"))) > committed
    except (TypeError, ValueError):
        return False


def write(
    claims: list[cl.Claim],
    rows: dict[float, list[dict[str, Any]]],
    run_rows: list[dict[str, Any]],
    pool: pool_mod.Pool,
    out: Path,
    order: str = "",
) -> list[Path]:
    """verdicts.csv and verdicts.md (headed by `order`, what written_before said): one row per claim, judged on
    the rows of its warm-up (``rows[claim.warmup_s]``), with its verdict, n, run length and fidelity passes (the
    runs of its grid points that passed the fidelity check, of those from a clean tree with the pool's hash)."""
    values = {pt["index"]: {k: _cell(v) for k, v in pt["values"].items()} for pt in pool.manifest["points"]}
    out_rows = []
    for c in claims:
        v = judge(c, rows[c.warmup_s])
        ats = [c.at] + (
            [{**c.at, **{k: x for k, x in c.than.items() if k != "algo"}}] if isinstance(c.than, dict) else []
        )
        points = {i for i, pv in values.items() if any(_matches(pv, a) for a in ats)}
        mine = [r for r in run_rows if r["point"] in points]
        judged = [r for r in mine if r["pooled"] or r["left_out"].startswith(pool_mod.FIDELITY)]
        lengths = sorted({r["duration_s"] for r in mine if r["pooled"] and r["duration_s"] is not None})
        out_rows.append(
            {
                "claim": c.id,
                "source": c.source,
                "says": c.says,
                "paper": c.paper,
                "metric": c.metric,
                "algo": c.algo,
                "at": ", ".join(f"{k}={x}" for k, x in c.at.items()),
                "compare": c.compare,
                "claimed": region_text(c),
                "margin": f"{c.margin:g}",
                "n": v.n,
                "n_required": c.n,
                "mean": _fmt(v.mean),
                "ci95_low": _fmt(v.lo),
                "ci95_high": _fmt(v.hi),
                "verdict": v.verdict,
                "run_length_s": "/".join(f"{x:g}" for x in lengths),
                "warmup_s": f"{c.warmup_s:g}",
                "fidelity_passed": f"{sum(bool(r['pooled']) for r in judged)}/{len(judged)}",
                "note": v.note + (f"; over [{c.warmup_s:g} s, end]: warmup-{c.warmup_s:g}s/" if c.warmup_s else ""),
            }
        )
    csv_path, md_path = out / "verdicts.csv", out / "verdicts.md"
    rundir.write_csv(csv_path, out_rows, COLUMNS)
    md_cols = ["claim", "source", "paper", "claimed", "mean", "ci95_low", "ci95_high", "n", "n_required"]
    md_cols += ["run_length_s", "fidelity_passed", "verdict"]
    lines = ["| " + " | ".join(md_cols) + " |", "|" + "---|" * len(md_cols)]
    for r in out_rows:
        cells = [f"**{r[k]}**" if k == "verdict" else str(r[k]).replace("|", "\\|") for k in md_cols]
        lines.append("| " + " | ".join(cells) + " |")
    left = [f"- {pool.shown(run.run_dir)}: {why}" for run, why in pool.left_out]
    left += [
        f"- {pool.shown(run_dir)}: its summary.json says fidelity {'passed' if ok else 'failed'}; by this version's"
        f" rules (base RTT, the backlogged-rate band) it {'fails' if ok else 'passes'} (docs/measurement.md)"
        for run_dir, ok in pool.rejudged
    ]
    head = f"Pooled runs: {len(pool.runs)}, source hash {pool.source_hash[:12]}; left out: {len(pool.left_out)}"
    md_path.write_text("\n".join([head, *([order] if order else []), "", *lines, "", *left]) + "\n")
    return [csv_path, md_path]

"""Claims files: what a reproduction must show, written down before the runs that judge it.

``<spec stem>.claims.toml`` beside a sweep spec holds one ``[[claims]]`` table per claim of a paper: where
the paper says it, the paper's value, which row of the report it is judged on, the comparison, an equivalence
margin, the number of runs it needs and the warm-up left out, each margin and n with its reason.  The format
and the verdict rule are docs/claims.md's; this module parses a file (one-line errors naming the claim, the
field, the value and what is allowed) and judges an interval by the rule, with exactly three words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.spec import tomllib

#: <spec stem>.claims.toml beside the spec
CLAIMS_SUFFIX = ".claims.toml"
#: the short names of docs/papers.md; a claim's ``source`` starts with one of them
PAPERS = (
    "TCPW faster-recovery slides",
    "LogWestwood+ paper",
    "TCPW-ABSE paper",
    "BTBE paper",
    "MPTCPW paper",
)
COMPARES = ("ratio", "value", "order")
DIRECTIONS = ("above", "below")
#: the three verdicts, and no other word
HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
#: every claim needs at least this many runs ...
MIN_N = 5
#: ... and this many where the claimed effect is under SMALL_EFFECT
MIN_N_SMALL_EFFECT = 10
SMALL_EFFECT = 0.10

_REQUIRED = ("id", "source", "paper", "metric", "algo", "compare", "margin", "margin_why", "n", "n_why", "warmup_s")
_OPTIONAL = ("at", "value", "than", "direction", "says")


class ClaimsError(ValueError):
    """A claims file that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Claim:
    """One claim of a paper and how a report judges it."""

    id: str
    """Unique within its file; the verdict tables' key."""
    source: str
    """Where the paper says it: its short name (docs/papers.md) and figure, table, slide or section."""
    paper: str
    """The paper's value as the paper gives it ("7.3x", "above 0.8", "highest")."""
    metric: str
    """The report row's metric (table.csv or ratios.csv: flow_throughput_ratio, utilization, jain, ...)."""
    algo: str
    """The report row's algo cell ("all", "reno", "btbe/illinois", "f1")."""
    compare: str
    """ratio, value or order (docs/claims.md)."""
    margin: float
    """Relative equivalence margin (ratio, value) or least relative difference (order), >= 0."""
    margin_why: str
    """One line: why this margin."""
    n: int
    """Complete, pooled runs the verdict needs; fewer and it is inconclusive."""
    n_why: str
    """One line: why this n."""
    warmup_s: float
    """Seconds at the start of each run the claim's metric leaves out."""
    at: dict[str, Any] = field(default_factory=dict)
    """Swept paths and their values that select the row's grid point(s)."""
    value: float | None = None
    """The paper's number: the ratio or value (required for those), the paper's own ratio of an order claim."""
    than: float | dict[str, Any] | None = None
    """order: a number the row's interval is compared with, or the swept values (and/or algo) of the other row."""
    direction: str = "above"
    """order: the row is claimed above or below ``than``."""
    says: str = ""
    """The claim in words, for the tables."""

    def effect(self) -> float:
        """The size of the claimed effect, relative: |ratio - 1|, or an order claim's (its paper ratio's, else
        its margin); a value claim states a level, not an effect (infinite here)."""
        if self.compare == "value":
            return math.inf
        if self.value is not None:
            return abs(self.value - 1)
        return self.margin

    def region(self) -> tuple[float, float]:
        """The values of the judged interval that satisfy the claim (docs/claims.md): ratio and value on the
        row's own scale, order on the relative difference from ``than``."""
        if self.compare in ("ratio", "value"):
            assert self.value is not None
            ends = (self.value * (1 - self.margin), self.value * (1 + self.margin))
            return (min(ends), max(ends))
        return (self.margin, math.inf) if self.direction == "above" else (-math.inf, -self.margin)


def judge(lo: float | None, hi: float | None, region: tuple[float, float]) -> str:
    """The verdict of interval [lo, hi] against a claim's region: holds when the interval lies inside it, does
    not hold when it lies wholly outside, inconclusive otherwise (also when there is no interval)."""
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    a, b = region
    if a <= lo and hi <= b:
        return HOLDS
    if hi < a or lo > b:
        return DOES_NOT_HOLD
    return INCONCLUSIVE


def _err(where: str, key: str, value: Any, allowed: str) -> ClaimsError:
    return ClaimsError(f"{where}: {key} = {value!r}: {allowed}")


def _number(where: str, key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _err(where, key, v, "must be a finite number")
    return float(v)


def _text(where: str, key: str, v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _err(where, key, v, "must be a non-empty string")
    return v


def _claim(path: Path, i: int, raw: Any) -> Claim:
    where = f"{path.name}: claims[{i}]"
    if not isinstance(raw, dict):
        raise ClaimsError(f"{where}: must be a table ([[claims]])")
    if isinstance(raw.get("id"), str):
        where = f"{path.name}: claim {raw['id']}"
    for key in raw:
        if key not in _REQUIRED + _OPTIONAL:
            raise _err(where, key, raw[key], f"unknown field; allowed: {', '.join(_REQUIRED + _OPTIONAL)}")
    for key in _REQUIRED:
        if key not in raw:
            raise ClaimsError(f"{where}: {key} is missing (required: {', '.join(_REQUIRED)})")
    source = _text(where, "source", raw["source"])
    if not source.startswith(PAPERS):
        raise _err(where, "source", source, f"must start with a short name of docs/papers.md: {', '.join(PAPERS)}")
    if any(ext in source for ext in (".txt", ".pdf")):
        raise _err(where, "source", source, "cite the paper by its short name and figure, never a file name")
    compare = raw["compare"]
    if compare not in COMPARES:
        raise _err(where, "compare", compare, f"allowed: {', '.join(COMPARES)}")
    margin = _number(where, "margin", raw["margin"])
    if not 0 <= margin < 1:
        raise _err(where, "margin", margin, "a relative margin, 0 <= margin < 1")
    n = raw["n"]
    if isinstance(n, bool) or not isinstance(n, int) or n < MIN_N:
        raise _err(where, "n", n, f"an integer >= {MIN_N}")
    warmup = _number(where, "warmup_s", raw["warmup_s"])
    if warmup < 0:
        raise _err(where, "warmup_s", warmup, "seconds >= 0")
    at = raw.get("at", {})
    if not isinstance(at, dict):
        raise _err(where, "at", at, "a table of swept paths and values")
    value = None if "value" not in raw else _number(where, "value", raw["value"])
    if compare in ("ratio", "value") and value is None:
        raise ClaimsError(f"{where}: value is missing (required for compare = {compare!r}: the paper's number)")
    if compare in ("ratio", "value") and ("than" in raw or "direction" in raw):
        raise ClaimsError(f"{where}: than and direction belong to compare = 'order' only")
    than = raw.get("than")
    direction = raw.get("direction", "above")
    if compare == "order":
        if than is None:
            raise ClaimsError(f"{where}: than is missing (required for compare = 'order': a number or a table)")
        if isinstance(than, dict):
            if not than:
                raise _err(where, "than", than, "a number, or swept values and/or algo of the other row")
        else:
            than = _number(where, "than", than)
            if than <= 0:
                raise _err(where, "than", than, "a positive number (the order is judged relative to it)")
        if direction not in DIRECTIONS:
            raise _err(where, "direction", direction, f"allowed: {', '.join(DIRECTIONS)}")
    claim = Claim(
        id=_text(where, "id", raw["id"]),
        source=source,
        paper=str(raw["paper"]),
        metric=_text(where, "metric", raw["metric"]),
        algo=_text(where, "algo", raw["algo"]),
        compare=compare,
        margin=margin,
        margin_why=_text(where, "margin_why", raw["margin_why"]),
        n=n,
        n_why=_text(where, "n_why", raw["n_why"]),
        warmup_s=warmup,
        at=dict(at),
        value=value,
        than=than,
        direction=direction,
        says=str(raw.get("says", "")),
    )
    if claim.effect() < SMALL_EFFECT and n < MIN_N_SMALL_EFFECT:
        raise _err(
            where,
            "n",
            n,
            f"the claimed effect is {claim.effect():.0%}, under {SMALL_EFFECT:.0%}: n >= {MIN_N_SMALL_EFFECT}",
        )
    return claim


def parse(path: Path) -> list[Claim]:
    """The claims of a claims file, checked; ClaimsError (one line) on the first bad field."""
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as e:
        raise ClaimsError(f"{path}: cannot read ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise ClaimsError(f"{path.name}: not TOML ({e})") from None
    extra = set(raw) - {"claims"}
    if extra:
        raise ClaimsError(f"{path.name}: {sorted(extra)[0]}: unknown top-level field; allowed: [[claims]]")
    items = raw.get("claims")
    if not isinstance(items, list) or not items:
        raise ClaimsError(f"{path.name}: claims is missing: give at least one [[claims]] table")
    claims = [_claim(path, i, c) for i, c in enumerate(items)]
    seen: set[str] = set()
    for c in claims:
        if c.id in seen:
            raise _err(f"{path.name}: claim {c.id}", "id", c.id, "must be unique in its file")
        seen.add(c.id)
    return claims

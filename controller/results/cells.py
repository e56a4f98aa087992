"""What a report's tables and its verdicts share: the confidence level of every interval, and how a swept value
or a figure becomes a table cell and is compared with a paper's."""

from __future__ import annotations

import json
from typing import Any

#: every interval a report gives (Student's t, and Welch's for a difference of two rows)
CONFIDENCE = 0.95


def scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool))


def cell(v: Any) -> Any:
    """A swept value as a table cell: scalars as they are, tables and arrays as JSON."""
    return v if scalar(v) else json.dumps(v, sort_keys=True)


def fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def same(paper: str, ours: Any) -> bool:
    """Whether a paper row's value (text) names the same swept value as ours: as numbers where both are."""
    try:
        return float(paper) == float(ours)
    except (TypeError, ValueError):
        return paper == str(ours)

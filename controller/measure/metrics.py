"""Fairness and loss statistics, from counters only (no traffic-generator numbers)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def jain(rates: Sequence[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2); None for no flows or all idle."""
    n = len(rates)
    sq = sum(x * x for x in rates)
    if n == 0 or sq == 0:
        return None
    return sum(rates) ** 2 / (n * sq)


def _log_pmf(k: int, n: int, p: float) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)


def binomial_interval(n: int, p: float, level: float = 0.99) -> tuple[int, int]:
    """Central interval [lo, hi] of Binomial(n, p) holding at least ``level`` of the mass.

    lo is the largest k with P(X < k) <= (1 - level)/2, hi the smallest k with
    P(X > k) <= (1 - level)/2.  Exact summation around the mean (tails beyond
    40 standard deviations are below double precision and skipped).
    """
    if not 0 <= p <= 1:
        raise ValueError(f"p = {p} is not a probability")
    if n <= 0 or p == 0:
        return (0, 0)
    if p == 1:
        return (n, n)
    tail = (1 - level) / 2
    sd = math.sqrt(n * p * (1 - p))
    k0 = max(0, int(n * p - 40 * sd - 1))
    k1 = min(n, int(n * p + 40 * sd + 1))
    lo = hi = None
    cdf = 0.0
    for k in range(k0, k1 + 1):
        cdf += math.exp(_log_pmf(k, n, p))
        if lo is None and cdf > tail:
            lo = k
        if hi is None and cdf >= 1 - tail:
            hi = k
            break
    return (lo if lo is not None else k0, hi if hi is not None else k1)


def rate_bps(delta_bytes: int, delta_s: float) -> float:
    return delta_bytes * 8 / delta_s if delta_s > 0 else 0.0

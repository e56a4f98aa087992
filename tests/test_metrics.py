"""Jain's index and the exact binomial interval against hand-worked values."""

from __future__ import annotations

import math

import pytest

from controller.measure.metrics import binomial_interval, jain


def test_jain_equal_shares_is_one() -> None:
    assert jain([5.0, 5.0, 5.0]) == pytest.approx(1.0)


def test_jain_one_of_n_is_one_over_n() -> None:
    assert jain([9.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def test_jain_worked_example() -> None:
    # (1 + 2 + 3)^2 / (3 * (1 + 4 + 9)) = 36 / 42
    assert jain([1.0, 2.0, 3.0]) == pytest.approx(36 / 42)


def test_jain_undefined_without_traffic() -> None:
    assert jain([]) is None
    assert jain([0.0, 0.0]) is None


def test_binomial_interval_matches_normal_approximation_for_large_n() -> None:
    n, p = 100_000, 0.01
    lo, hi = binomial_interval(n, p)
    sd = math.sqrt(n * p * (1 - p))
    assert abs(lo - (n * p - 2.5758 * sd)) <= 3, (lo, hi)
    assert abs(hi - (n * p + 2.5758 * sd)) <= 3, (lo, hi)


def test_binomial_interval_small_exact() -> None:
    # Binomial(10, 0.5): P(X <= 0) = 1/1024 < 0.005 < P(X <= 1) = 11/1024, so lo = 1, hi = 9 by symmetry.
    assert binomial_interval(10, 0.5) == (1, 9)


def test_binomial_interval_edges() -> None:
    assert binomial_interval(1000, 0.0) == (0, 0)
    assert binomial_interval(1000, 1.0) == (1000, 1000)
    with pytest.raises(ValueError):
        binomial_interval(10, 1.5)

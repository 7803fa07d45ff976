"""The exact and approximate one-sided Mann-Whitney p-values, cross-checked against scipy and brute force."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from itertools import combinations

import pytest
import scipy.stats  # type: ignore[import-untyped]

from controller.stats import mann_whitney_less_p
from controller.stats.mannwhitney import EXACT_MAX_PAIRS


def brute_force_less_p(x: list[float], y: list[float]) -> float:
    """P(midrank sum of x <= observed) over every assignment of the pooled values to x, by enumeration."""
    pooled = sorted(x + y)
    midrank = {v: Fraction(pooled.index(v) + 1 + pooled.index(v) + pooled.count(v), 2) for v in pooled}
    observed = sum(midrank[v] for v in x)
    total = 0
    at_most = 0
    for chosen in combinations(range(len(pooled)), len(x)):
        total += 1
        if sum(midrank[pooled[i]] for i in chosen) <= observed:
            at_most += 1
    assert total == math.comb(len(pooled), len(x))
    return at_most / total


def test_three_vs_three_all_smaller_gives_the_smallest_p_of_one_twentieth() -> None:
    assert mann_whitney_less_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == 0.05


def test_all_larger_gives_one() -> None:
    assert mann_whitney_less_p([4.0, 5.0, 6.0], [1.0, 2.0, 3.0]) == 1.0


def test_all_values_tied_gives_one_exact_and_approximate() -> None:
    assert mann_whitney_less_p([7.0] * 3, [7.0] * 4) == 1.0
    assert mann_whitney_less_p([7.0] * 30, [7.0] * 30) == 1.0


def test_one_swap_in_three_vs_three_gives_two_twentieths() -> None:
    assert mann_whitney_less_p([1.0, 2.0, 4.0], [3.0, 5.0, 6.0]) == 0.1


@pytest.mark.parametrize(("x", "y"), [([], [1.0]), ([1.0], []), ([], [])])
def test_empty_input_is_rejected(x: list[float], y: list[float]) -> None:
    with pytest.raises(ValueError, match="at least one value"):
        mann_whitney_less_p(x, y)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_input_is_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        mann_whitney_less_p([1.0, bad], [2.0, 3.0])


@pytest.mark.parametrize(
    ("n1", "n2"), [(1, 1), (1, 5), (3, 3), (3, 7), (5, 5), (4, 9), (8, 8), (12, 15), (20, 20)]
)
def test_exact_p_matches_scipy_exact_without_ties(n1: int, n2: int) -> None:
    assert n1 * n2 <= EXACT_MAX_PAIRS
    rng = random.Random(n1 * 100 + n2)
    for shift in (-1.0, -0.3, 0.0, 0.5):
        x = [rng.gauss(shift, 1.0) for _ in range(n1)]
        y = [rng.gauss(0.0, 1.0) for _ in range(n2)]
        expected = scipy.stats.mannwhitneyu(x, y, alternative="less", method="exact").pvalue
        assert mann_whitney_less_p(x, y) == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(
    ("n1", "n2", "levels"), [(3, 3, 3), (3, 5, 2), (5, 5, 4), (4, 7, 3), (6, 6, 5), (2, 9, 3)]
)
def test_exact_p_with_ties_matches_brute_force_enumeration(n1: int, n2: int, levels: int) -> None:
    rng = random.Random(n1 * 1000 + n2 * 10 + levels)
    for _ in range(8):
        x = [float(rng.randrange(levels)) for _ in range(n1)]
        y = [float(rng.randrange(levels) + rng.choice((0, 1))) for _ in range(n2)]
        assert mann_whitney_less_p(x, y) == brute_force_less_p(x, y)


def test_heavily_tied_exact_case_is_not_the_untied_answer() -> None:
    # With ties the null distribution is coarser; treating them as untied would give a different p.
    x, y = [1.0, 1.0, 2.0], [2.0, 3.0, 3.0]
    assert mann_whitney_less_p(x, y) == brute_force_less_p(x, y)
    assert mann_whitney_less_p(x, y) != mann_whitney_less_p([1.0, 1.1, 2.0], [2.1, 3.0, 3.1])


@pytest.mark.parametrize(
    ("n1", "n2", "tied"), [(25, 25, False), (21, 40, True), (60, 30, True), (100, 5, False)]
)
def test_large_samples_match_scipy_asymptotic_with_tie_and_continuity_correction(
    n1: int, n2: int, tied: bool
) -> None:
    assert n1 * n2 > EXACT_MAX_PAIRS
    rng = random.Random(n1 + n2)
    for shift in (-0.5, 0.0, 0.4):
        x = [rng.gauss(shift, 1.0) for _ in range(n1)]
        y = [rng.gauss(0.0, 1.0) for _ in range(n2)]
        if tied:
            x, y = [round(v * 2) / 2 for v in x], [round(v * 2) / 2 for v in y]
        expected = scipy.stats.mannwhitneyu(
            x, y, alternative="less", method="asymptotic", use_continuity=True
        ).pvalue
        assert mann_whitney_less_p(x, y) == pytest.approx(expected, rel=1e-9)


def test_exact_and_approximate_agree_roughly_at_the_threshold() -> None:
    rng = random.Random(5)
    x = [rng.gauss(-0.5, 1.0) for _ in range(20)]
    y = [rng.gauss(0.0, 1.0) for _ in range(20)]
    exact = mann_whitney_less_p(x, y)
    approx = mann_whitney_less_p(x, [*y, max(y) + 100.0])  # 20 x 21 switches to the approximation
    assert exact < 0.2
    assert abs(exact - approx) < 0.02

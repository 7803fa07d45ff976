"""The one-sided Mann-Whitney U test behind the keep rule's significance check (docs/keep-rule.md).

Benchmarks give a handful of samples per side (often 3 to 10), with ties whenever a metric is rounded or
quantised. A normal approximation is badly wrong there, so small samples get the exact permutation
distribution of the rank sum, computed with midranks over every way of assigning the pooled values to the
two sides, which handles ties exactly. Larger samples use the normal approximation with tie and continuity
correction. Plain Python on purpose: the controller does not depend on numpy or scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from itertools import groupby

# Up to this many (x, y) pairs the exact distribution is computed (a DP of a few hundred thousand steps at
# worst, cached per tie pattern); beyond it the normal approximation is already accurate.
EXACT_MAX_PAIRS = 400


def mann_whitney_less_p(x: Sequence[float], y: Sequence[float]) -> float:
    """One-sided p-value for H1: values in ``x`` tend to be SMALLER than values in ``y``.

    The p-value is P(R <= r) under the null hypothesis that every assignment of the pooled values to the
    two sides is equally likely, where R is the midrank sum of ``x`` (equivalently U = R - n1(n1+1)/2).
    Exact when ``len(x) * len(y) <= EXACT_MAX_PAIRS``, ties included; otherwise the normal approximation
    with tie and continuity correction (as scipy's ``mannwhitneyu(..., method="asymptotic")``).
    With 3 vs 3 and every x below every y the result is 1/20 = 0.05.

    Raises ValueError when either side is empty or a value is not finite.
    """
    xs, ys = _checked(x, "x"), _checked(y, "y")
    multiplicities, doubled_rank_sum = _ranks(xs, ys)
    if len(xs) * len(ys) <= EXACT_MAX_PAIRS:
        return _exact_p(multiplicities, len(xs), doubled_rank_sum)
    return _normal_p(multiplicities, len(xs), len(ys), doubled_rank_sum)


def _checked(values: Sequence[float], name: str) -> list[float]:
    if len(values) == 0:
        raise ValueError(f"{name}: needs at least one value")
    out = [float(v) for v in values]
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"{name}: values must be finite")
    return out


def _ranks(xs: list[float], ys: list[float]) -> tuple[tuple[int, ...], int]:
    """The tie pattern of the pooled sample and twice the midrank sum of ``xs``.

    Doubling keeps midranks integral (a group of t tied values starting after ``start`` smaller ones has
    midrank start + (t + 1) / 2), so the exact distribution can be tabulated over integers.
    """
    pooled = sorted([(v, True) for v in xs] + [(v, False) for v in ys], key=lambda item: item[0])
    multiplicities: list[int] = []
    doubled_rank_sum = 0
    start = 0
    for _, group in groupby(pooled, key=lambda item: item[0]):
        members = list(group)
        size = len(members)
        in_x = sum(1 for _, is_x in members if is_x)
        doubled_rank_sum += in_x * (2 * start + size + 1)
        multiplicities.append(size)
        start += size
    return tuple(multiplicities), doubled_rank_sum


def _exact_p(multiplicities: tuple[int, ...], n1: int, doubled_rank_sum: int) -> float:
    distribution = _doubled_rank_sum_distribution(multiplicities, n1)
    at_most = sum(ways for value, ways in distribution if value <= doubled_rank_sum)
    # int / int is correctly rounded, so an exact p of 1/20 is the float 0.05 exactly.
    return at_most / math.comb(sum(multiplicities), n1)


@lru_cache(maxsize=512)
def _doubled_rank_sum_distribution(multiplicities: tuple[int, ...], n1: int) -> tuple[tuple[int, int], ...]:
    """(doubled midrank sum, number of assignments) over all C(N, n1) choices of the x positions.

    A DP over the groups of tied values in ascending order: choosing j of a group's t values for x has
    C(t, j) ways and adds j times the group's doubled midrank. ``table[c]`` maps the doubled rank sum of
    the c values chosen so far to its number of ways.
    """
    table: list[dict[int, int]] = [{} for _ in range(n1 + 1)]
    table[0][0] = 1
    start = 0
    remaining = sum(multiplicities)
    for size in multiplicities:
        doubled_midrank = 2 * start + size + 1
        start += size
        remaining -= size
        table = _add_group(table, size, doubled_midrank, n1, remaining)
    return tuple(sorted(table[n1].items()))


def _add_group(
    table: list[dict[int, int]], size: int, doubled_midrank: int, n1: int, remaining: int
) -> list[dict[int, int]]:
    new: list[dict[int, int]] = [{} for _ in range(n1 + 1)]
    for chosen, sums in enumerate(table):
        for j in range(min(size, n1 - chosen) + 1):
            if chosen + j + remaining < n1:
                continue  # not enough values left to complete x
            weight = math.comb(size, j)
            shift = j * doubled_midrank
            target = new[chosen + j]
            for value, ways in sums.items():
                target[value + shift] = target.get(value + shift, 0) + ways * weight
    return new


def _normal_p(multiplicities: tuple[int, ...], n1: int, n2: int, doubled_rank_sum: int) -> float:
    total = n1 + n2
    u = doubled_rank_sum / 2 - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    tie_term = sum(t**3 - t for t in multiplicities) / (total * (total - 1))
    variance = n1 * n2 / 12 * ((total + 1) - tie_term)
    if variance <= 0:
        return 1.0  # every value is equal: nothing suggests x is smaller
    z = (u + 0.5 - mean) / math.sqrt(variance)
    return min(1.0, 0.5 * math.erfc(-z / math.sqrt(2)))

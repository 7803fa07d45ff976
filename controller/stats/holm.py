"""Parallel hypotheses (``broker.parallel = N``): which of N candidates of one turn, if any, is kept.

Each of the N candidates is compared with the champion on its own; keeping whichever looks best at the
plain level would keep a do-nothing change up to N times as often as one comparison does (with four
do-nothing candidates at confidence 0.95, about 19% of turns instead of 5%). Holm's step-down
correction keeps the chance of keeping any do-nothing change at most 1 - confidence for any N and any
dependence between the comparisons (they share the champion), and unlike Bonferroni it lets a clearly
significant candidate lower the bar for the next one. Among the candidates whose test passes at their
Holm level, and which pass the rest of the keep rule, the one with the largest median improvement is
kept; the others that passed are ``superseded``, those that did not pass only because of the correction
are ``not_significant`` (ADR-0016).

Pure functions over verdicts, like the rest of ``stats``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.domain.enums import Reason
from controller.stats.keep import KeepVerdict

__all__ = ["Contender", "ParallelChoice", "choose", "holm_levels"]


@dataclass(frozen=True)
class Contender:
    """One candidate of a parallel turn as the choice sees it.

    verdict: the keep rule applied to it alone at the plain level (``decide_keep``), or None when the
    candidate never reached a decision (it failed, changed nothing, broke the policy): such a candidate
    still counts as one of the N comparisons, so the correction does not depend on what failed.
    """

    index: int
    verdict: KeepVerdict | None


@dataclass(frozen=True)
class ParallelChoice:
    """The outcome: the kept index (or None), and the final reason and detail of every contender."""

    kept: int | None
    reasons: dict[int, Reason]
    details: dict[int, str]


def holm_levels(p_values: Sequence[float | None], alpha: float, comparisons: int) -> list[float | None]:
    """The level each p-value was tested at by Holm's step-down procedure over ``comparisons`` tests,
    or None for a test not reached (an earlier, smaller p-value failed, so it fails too).

    ``p_values`` may be shorter than ``comparisons`` (the missing ones never pass); a None p-value (no
    test ran: confidence 0, or too few samples) passes at any level, as it does in ``decide_keep``.
    Raises ValueError when ``comparisons`` is smaller than the number of p-values.
    """
    if comparisons < len(p_values):
        raise ValueError(f"comparisons: must be >= {len(p_values)}, got {comparisons}")
    order = sorted(range(len(p_values)), key=lambda i: (_as_number(p_values[i]), i))
    levels: list[float | None] = [None] * len(p_values)
    for rank, i in enumerate(order):
        level = alpha / (comparisons - rank)
        levels[i] = level
        if _as_number(p_values[i]) > level:
            break
    return levels


def choose(contenders: Sequence[Contender], alpha: float, comparisons: int) -> ParallelChoice:
    """Apply the parallel keep rule: Holm over the contenders' p-values at ``alpha`` (1 - confidence)
    for ``comparisons`` (N) tests, then the largest improvement among those that pass everything.

    A contender whose own verdict rejects it keeps its own reason; one whose verdict would keep it at
    the plain level but whose p-value fails its Holm level becomes ``not_significant``; of the rest, the
    best is kept (``improved``) and the others are ``superseded``. Ties go to the lower index.
    """
    measured = [c for c in contenders if c.verdict is not None]
    levels = holm_levels([c.verdict.p_value for c in measured if c.verdict], alpha, comparisons)
    reasons: dict[int, Reason] = {}
    details: dict[int, str] = {}
    passing: list[Contender] = []
    for contender, level in zip(measured, levels, strict=True):
        verdict = contender.verdict
        assert verdict is not None
        if not verdict.keep:
            reasons[contender.index], details[contender.index] = verdict.reason, verdict.detail
        elif verdict.p_value is not None and (level is None or verdict.p_value > level):
            reasons[contender.index] = Reason.NOT_SIGNIFICANT
            details[contender.index] = _not_significant(verdict, level, comparisons)
        else:
            passing.append(contender)
    passing.sort(key=lambda c: (-_delta(c), c.index))
    for rank, contender in enumerate(passing):
        verdict = contender.verdict
        assert verdict is not None
        if rank == 0:
            reasons[contender.index] = Reason.IMPROVED
            details[contender.index] = f"{verdict.detail} Best of {len(contenders)} parallel hypotheses."
        else:
            reasons[contender.index] = Reason.SUPERSEDED
            details[contender.index] = (
                f"Superseded: it passed the keep rule (improvement {verdict.delta:g}) but hypothesis "
                f"{passing[0].index} improves more ({_delta(passing[0]):g}); one is kept per turn."
            )
    return ParallelChoice(kept=passing[0].index if passing else None, reasons=reasons, details=details)


def _delta(contender: Contender) -> float:
    assert contender.verdict is not None
    return contender.verdict.delta


def _as_number(p: float | None) -> float:
    return 0.0 if p is None else p


def _not_significant(verdict: KeepVerdict, level: float | None, comparisons: int) -> str:
    where = "not reached (a smaller p-value failed first)" if level is None else f"{level:.3g}"
    return (
        f"Not kept: candidate median {verdict.candidate_median:g} vs champion median "
        f"{verdict.champion_median:g} improves by {verdict.delta:g}, but p = {verdict.p_value:.3g} is above "
        f"its Holm level for {comparisons} parallel hypotheses ({where}), so it may be noise."
    )

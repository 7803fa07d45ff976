"""Sequential looks for a refinement round's hold rule: stop measuring once the evidence settles it.

A refinement turn is kept when it holds the score (``keep.decide_hold``): its median within ``hold`` of
the PR head's and of the first published score. That rule has no significance test; it is a decision
on medians after ``samples`` pairs, and most refinement candidates (review fixes that do not touch the
hot path) are clearly within the hold, or clearly outside it, well before that. After each pair from
``min_samples`` on, a look tests the candidate against the PR head shifted by the hold:

* **keep early** when the candidate is significantly *within* the hold (one-sided p <= HOLD_EARLY for
  "not worse than the head by more than the hold") and the median rule (with its guards and the first
  published score) already holds;
* **reject early** when it is significantly *beyond* the hold (p <= HOLD_EARLY for "worse by more");
* otherwise measure on; the last look is ``decide_hold`` itself, unchanged.

The fixed rule's own error rates are not a level (at a candidate exactly ``hold`` worse it keeps about
half the time), so HOLD_EARLY is not a level either: it was chosen by simulation (``bench/decisions.py``,
ADR-0032) as the largest threshold that leaves the fixed rule's keep rates for do-nothing, slightly worse
and clearly worse candidates within their Monte-Carlo error. The test is the one the search uses:
the drift-adjusted t on interleaved pairs, Mann-Whitney U against stored samples.

Pure functions over numbers, like the rest of ``stats``.
"""

from __future__ import annotations

from dataclasses import replace

from controller.config.units import Tolerance
from controller.domain.enums import Direction, Reason, SequentialStop
from controller.stats.keep import Arm, KeepRule, KeepVerdict, decide_hold, median
from controller.stats.sequential import Look, LookAction, SequentialDesign, p_better

__all__ = ["HOLD_EARLY", "hold_look"]

# The one-sided p-value below which an interim look settles a hold decision, either way.
HOLD_EARLY = 0.1


def hold_look(
    rule: KeepRule,
    hold: Tolerance,
    design: SequentialDesign,
    candidate: Arm,
    pr_head: Arm,
    first_published: float,
) -> Look:
    """Decide a refinement turn after ``len(candidate.primary)`` pairs (see the module docstring)."""
    pairs = len(candidate.primary)
    final = decide_hold(rule, hold, candidate, pr_head, first_published)
    if pairs >= design.max_pairs:
        stop = SequentialStop.MAX_SAMPLES
        action = LookAction.KEEP if final.keep else LookAction.REJECT
        return Look(pairs, action, None, stop, final)
    if pairs < design.min_pairs:
        return Look(pairs, LookAction.CONTINUE, None)
    allowed = hold.allowed(median(pr_head.primary))
    # Shift the candidate by the hold towards better: "better than the shifted head" then means "not
    # worse than the head by more than the hold"; the opposite direction means "worse by more".
    sign = 1.0 if rule.direction is Direction.MINIMIZE else -1.0
    shifted = [v - sign * allowed for v in candidate.primary]
    within = p_better(design, rule.direction, shifted, pr_head.primary)
    beyond = p_better(design, _opposite(rule.direction), shifted, pr_head.primary)
    if within is not None and within <= HOLD_EARLY and final.keep:
        detail = f"{final.detail}; within the hold at {pairs} pairs (p = {within:.3g}), kept early"
        return Look(pairs, LookAction.KEEP, within, SequentialStop.KEPT_EARLY, _with(final, detail))
    if beyond is not None and beyond <= HOLD_EARLY:
        detail = (
            f"does not hold the score: {final.candidate_median:g} vs PR head {final.champion_median:g} "
            f"is worse by more than the hold ({hold}) at {pairs} pairs (p = {beyond:.3g}), rejected early"
        )
        verdict = _with(final, detail, reason=Reason.NOT_IMPROVED)
        return Look(pairs, LookAction.REJECT, beyond, SequentialStop.REJECTED_EARLY, verdict)
    return Look(pairs, LookAction.CONTINUE, within)


def _with(verdict: KeepVerdict, detail: str, *, reason: Reason | None = None) -> KeepVerdict:
    """``verdict`` with a new detail and, for an early reject, ``reason`` (and keep = False)."""
    if reason is None:
        return replace(verdict, detail=detail)
    return replace(verdict, detail=detail, keep=False, reason=reason)


def _opposite(direction: Direction) -> Direction:
    return Direction.MAXIMIZE if direction is Direction.MINIMIZE else Direction.MINIMIZE

"""The noise-aware keep rule (docs/keep-rule.md) and the refinement "hold the score" test, as pure functions.

A turn is kept only when the candidate is better by more than noise: its median beats the champion's by
more than ``min_improvement``, a one-sided Mann-Whitney test says the difference is significant, and no
guard metric regressed beyond its tolerance, neither against the champion nor against the run's base
commit (so five small regressions that each pass cannot add up to one large one). The engine measures;
this module only decides, so every rule is unit-testable with numbers in and a verdict out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from controller.config.units import Tolerance
from controller.domain.enums import Direction, Reason
from controller.stats.mannwhitney import mann_whitney_less_p

__all__ = [
    "MIN_SAMPLES_FOR_TEST",
    "Arm",
    "GuardRule",
    "KeepRule",
    "KeepVerdict",
    "Tolerance",
    "alpha_for",
    "decide_keep",
    "guard_check",
    "holds_score",
    "median",
    "needs_base_arm",
]

# Below this many samples on either side no significance test is run (3 vs 3 already allows p = 0.05).
MIN_SAMPLES_FOR_TEST = 3


@dataclass(frozen=True)
class GuardRule:
    """A secondary metric that may not get worse (in ``direction``) by more than ``tolerance``."""

    name: str
    direction: Direction
    tolerance: Tolerance


@dataclass(frozen=True)
class KeepRule:
    """The thresholds of the keep rule, from the spec's ``[metric]`` table.

    min_improvement: absolute, in the metric's unit; the median improvement must be strictly greater.
    confidence: the test requires p <= 1 - confidence; 0 disables the test.
    """

    direction: Direction
    min_improvement: float = 0.0
    confidence: float = 0.95
    guards: tuple[GuardRule, ...] = ()

    def __post_init__(self) -> None:
        if not math.isfinite(self.min_improvement):
            raise ValueError(f"min_improvement: must be finite, got {self.min_improvement}")
        if not 0 <= self.confidence < 1:
            raise ValueError(f"confidence: must be >= 0 and < 1, got {self.confidence}")
        names = [guard.name for guard in self.guards]
        if len(set(names)) != len(names):
            raise ValueError(f"guards: names must be unique, got {names}")


@dataclass(frozen=True)
class Arm:
    """The samples of one side of a comparison: the primary metric and each guard, one value per sample."""

    primary: tuple[float, ...]
    guards: Mapping[str, tuple[float, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class KeepVerdict:
    """The decision and everything needed to explain and store it.

    delta: the candidate's median improvement in the metric's good direction (> 0 is better).
    p_value: None when no test ran (confidence 0, or fewer than 3 samples on a side).
    """

    keep: bool
    reason: Reason
    candidate_median: float
    champion_median: float
    delta: float
    p_value: float | None
    guard_failures: tuple[str, ...]
    detail: str


def median(values: Sequence[float]) -> float:
    """The median (mean of the two middle values for an even count). ValueError if empty or not finite."""
    if len(values) == 0:
        raise ValueError("median of no values")
    ordered = sorted(float(v) for v in values)
    if not all(math.isfinite(v) for v in ordered):
        raise ValueError("median: values must be finite")
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def needs_base_arm(rule: KeepRule) -> bool:
    """Whether the base commit must be measured as a third arm before keeping: only guards need it."""
    return bool(rule.guards)


def holds_score(
    direction: Direction, candidate: Sequence[float], reference: Sequence[float], hold: Tolerance
) -> bool:
    """Holding the score (docs/keep-rule.md): the candidate's median is not worse than the reference's
    median by more than ``hold.allowed(reference median)``."""
    reference_median = median(reference)
    return _worsening(direction, median(candidate), reference_median) <= hold.allowed(reference_median)


def guard_check(rule: KeepRule, candidate: Arm, champion: Arm, base: Arm | None) -> tuple[str, ...]:
    """One human-readable line per guard that regressed beyond its tolerance, against the champion's
    median or (when ``base`` is given) the base's median, e.g. "rss_mb: 112 vs base 100 (tolerance 5%)".

    Raises ValueError when an arm lacks samples for a guard of the rule.
    """
    references = [("champion", champion)] + ([("base", base)] if base is not None else [])
    failures: list[str] = []
    for guard in rule.guards:
        value = median(_guard_samples(candidate, guard.name, "candidate"))
        for label, arm in references:
            reference = median(_guard_samples(arm, guard.name, label))
            if _worsening(guard.direction, value, reference) > guard.tolerance.allowed(reference):
                failures.append(
                    f"{guard.name}: {value:g} vs {label} {reference:g} (tolerance {guard.tolerance})"
                )
    return tuple(failures)


def decide_keep(rule: KeepRule, candidate: Arm, champion: Arm, base: Arm | None = None) -> KeepVerdict:
    """Apply the keep rule of docs/keep-rule.md. Reasons are checked in order: not improved, not significant,
    guard regressed; the p-value and guard failures are reported whichever reason wins."""
    candidate_median = median(candidate.primary)
    champion_median = median(champion.primary)
    delta = -_worsening(rule.direction, candidate_median, champion_median)
    p_value = _p_value(rule, candidate.primary, champion.primary)
    failures = guard_check(rule, candidate, champion, base)
    if not delta > rule.min_improvement:
        reason = Reason.NOT_IMPROVED
    elif p_value is not None and p_value > alpha_for(rule.confidence):
        reason = Reason.NOT_SIGNIFICANT
    elif failures:
        reason = Reason.GUARD_REGRESSED
    else:
        reason = Reason.IMPROVED
    return KeepVerdict(
        keep=reason is Reason.IMPROVED,
        reason=reason,
        candidate_median=candidate_median,
        champion_median=champion_median,
        delta=delta,
        p_value=p_value,
        guard_failures=failures,
        detail=_detail(rule, reason, candidate_median, champion_median, delta, p_value, failures),
    )


def _worsening(direction: Direction, value: float, reference: float) -> float:
    """How much worse ``value`` is than ``reference`` in ``direction`` (negative when it is better)."""
    return value - reference if direction is Direction.MINIMIZE else reference - value


def _guard_samples(arm: Arm, name: str, label: str) -> tuple[float, ...]:
    samples = arm.guards.get(name)
    if not samples:
        raise ValueError(f"{label} arm has no samples for guard {name!r}")
    return samples


def _p_value(rule: KeepRule, candidate: Sequence[float], champion: Sequence[float]) -> float | None:
    if rule.confidence == 0 or min(len(candidate), len(champion)) < MIN_SAMPLES_FOR_TEST:
        return None
    if rule.direction is Direction.MINIMIZE:
        return mann_whitney_less_p(candidate, champion)
    return mann_whitney_less_p(champion, candidate)


def alpha_for(confidence: float) -> float:
    """1 - confidence, computed from the decimal the user wrote, so 0.95 gives exactly the float 0.05
    (and an exact p of 1/20, also 0.05, passes) instead of 0.050000000000000044."""
    return float(1 - Fraction(repr(confidence)))


def _detail(
    rule: KeepRule,
    reason: Reason,
    candidate_median: float,
    champion_median: float,
    delta: float,
    p_value: float | None,
    failures: tuple[str, ...],
) -> str:
    medians = f"candidate median {candidate_median:g} vs champion median {champion_median:g}"
    test = "no significance test" if p_value is None else f"p = {p_value:.3g}"
    if reason is Reason.NOT_IMPROVED:
        return (
            f"Not kept: {medians} improves by {delta:g}, "
            f"not more than the minimum improvement {rule.min_improvement:g} ({test})."
        )
    if reason is Reason.NOT_SIGNIFICANT:
        return (
            f"Not kept: {medians} improves by {delta:g}, but {test} is above "
            f"{alpha_for(rule.confidence):g} (confidence {rule.confidence:g}), so it may be noise."
        )
    if reason is Reason.GUARD_REGRESSED:
        regressions = "; ".join(failures)
        return f"Not kept: {medians} improves by {delta:g} ({test}), but a guard regressed: {regressions}."
    return f"Kept: {medians} improves by {delta:g} ({test}) and no guard regressed."


def decide_hold(
    rule: KeepRule,
    hold: Tolerance,
    candidate: Arm,
    pr_head: Arm,
    first_published: float,
    base: Arm | None = None,
) -> KeepVerdict:
    """The refinement-round rule (docs/keep-rule.md): keep iff the candidate's median is not worse than the PR
    head's (measured beside it) by more than ``hold``, nor worse than the first published score by more
    than ``hold`` (so rounds cannot slide the score down step by step), and no guard regresses against
    the PR head or the base. An improvement is not required: a round addresses review feedback."""
    cand = median(candidate.primary)
    head = median(pr_head.primary)
    delta = -_worsening(rule.direction, cand, head)
    if not holds_score(rule.direction, candidate.primary, pr_head.primary, hold):
        detail = f"does not hold the score: {cand:g} vs PR head {head:g} (hold {hold})"
        return KeepVerdict(False, Reason.NOT_IMPROVED, cand, head, delta, None, (), detail)
    if not holds_score(rule.direction, candidate.primary, [first_published], hold):
        detail = f"does not hold the score: {cand:g} vs first published {first_published:g} (hold {hold})"
        return KeepVerdict(False, Reason.NOT_IMPROVED, cand, head, delta, None, (), detail)
    failures = guard_check(rule, candidate, pr_head, base) if rule.guards else ()
    if failures:
        detail = "; ".join(failures)
        return KeepVerdict(False, Reason.GUARD_REGRESSED, cand, head, delta, None, failures, detail)
    detail = f"holds the score: {cand:g} vs PR head {head:g} and first published {first_published:g}"
    return KeepVerdict(True, Reason.IMPROVED, cand, head, delta, None, (), detail)

"""Sequential measurement: decide after each interleaved pair instead of after a fixed sample count.

Most candidates are clearly worse, or clearly better, after a few pairs; with benchmarks that take
minutes, samples are the budget. After each pair from ``min_samples`` on, a look decides: keep, reject,
or measure another pair; at ``samples`` pairs the decision is final. ADR-0010 has the simulation that
chose this design; in short:

* **The statistic** is a two-sample t statistic with a linear drift term: every sample is regressed on
  an intercept, an "is candidate" indicator and its position in the measurement order. The A B B A
  order makes the indicator nearly orthogonal to time, so a steady drift of a shared machine lands in
  the drift term instead of the noise (that is "the paired evidence": adjacent A/B samples carry the
  comparison), and unlike a paired-difference test it keeps the degrees of freedom of both arms.
* **The error rate of a keep** is bounded by splitting 1 - confidence over the looks that may keep
  (Bonferroni alpha spending): P(any keep | no effect) <= sum of the per-look levels = 1 - confidence,
  however the looks are correlated and whatever the noise does between them. Only a few looks may keep
  (about half-way, about four fifths, and the last, which gets 70% of the level), because every look
  that may keep costs level at the others.
* **Futility** (stop and reject: more pairs are unlikely to make the candidate significant) may happen
  at every look; a reject never raises the error rate of a keep, so it needs no level.

The same looks serve every search decision (ADR-0032): ``interleaved = False`` (the candidate alone
against the champion's stored samples) takes the fixed rule's Mann-Whitney U at each look instead of
the drift-adjusted t (there is no pairing to adjust), and parallel hypotheses (``hypotheses = N``)
report a p-value Holm's correction can use: ``combined_p``, the smallest p of the looks that may keep,
each divided by its share of the level; a hypothesis stops early with a keep only when that passes
Holm's strictest level, (1 - confidence) / N, which it passes whatever the others do.

Pure functions over numbers, like the rest of ``stats``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from controller.domain.enums import Direction, Reason, SequentialStop
from controller.stats.keep import Arm, KeepRule, KeepVerdict, alpha_for, guard_check, median
from controller.stats.mannwhitney import mann_whitney_less_p
from controller.stats.schedule import CANDIDATE, interleaved_order
from controller.stats.tdist import t_cdf

__all__ = [
    "Look",
    "LookAction",
    "SequentialDesign",
    "SequentialStop",
    "combined_p",
    "design_for",
    "drift_adjusted_p",
    "look",
    "p_better",
    "replay",
]

# Share of the level kept for the last look; the rest is split over the interim looks that may keep.
FINAL_SHARE = 0.7
# Futility threshold on the one-sided p-value: stop when p exceeds it. It tightens from FUTILITY_START
# at the first look to FUTILITY_START - FUTILITY_SPAN at the look before the last.
FUTILITY_START = 0.55
FUTILITY_SPAN = 0.3


class LookAction(StrEnum):
    KEEP = "keep"
    REJECT = "reject"
    CONTINUE = "continue"


@dataclass(frozen=True)
class SequentialDesign:
    """When the looks are and what each may do.

    min_pairs / max_pairs: the first look and the last (pairs = samples per arm; without interleaving,
    candidate samples).
    alpha: pairs -> the level at which that look may keep; looks absent from it cannot keep.
    futility: pairs -> reject for futility when the one-sided p-value exceeds this.
    hypotheses: N of a parallel turn; above 1 a look keeps early only at its level / N and the final
    look passes ``combined_p`` at the plain level on to Holm's correction (``stats.holm``).
    interleaved: False when the candidate is measured alone and compared with the champion's stored
    samples (any number of them): Mann-Whitney U at each look instead of the drift-adjusted t.
    """

    min_pairs: int
    max_pairs: int
    alpha: dict[int, float]
    futility: dict[int, float]
    hypotheses: int = 1
    interleaved: bool = True

    def __post_init__(self) -> None:
        if not 2 <= self.min_pairs <= self.max_pairs:
            raise ValueError(f"need 2 <= min_pairs <= max_pairs, got {self.min_pairs}, {self.max_pairs}")
        if self.hypotheses < 1:
            raise ValueError(f"hypotheses: must be >= 1, got {self.hypotheses}")

    @property
    def level(self) -> float:
        """The run's level, 1 - confidence: the per-look levels add up to it."""
        return sum(self.alpha.values())


def design_for(
    min_samples: int, samples: int, confidence: float, *, hypotheses: int = 1, interleaved: bool = True
) -> SequentialDesign:
    """The design for ``[metric]``'s ``min_samples``, ``samples`` (the maximum) and ``confidence``, for
    a turn of ``hypotheses`` parallel hypotheses, measured ``interleaved`` or against stored samples.

    The level 1 - confidence is split: FINAL_SHARE to the last look and the rest in two equal parts to
    looks at about a half and four fifths of the maximum (fewer when the range is short). With
    confidence 0 (no test) every look can keep on the medians alone, as the fixed rule does (the loop
    does not use a design then: nothing to stop on).
    """
    lo, hi = max(2, min(min_samples, samples)), max(2, samples)
    lo = min(lo, hi)
    total = alpha_for(confidence)
    interim = sorted({k for k in (max(lo, round(hi / 2)), max(lo, round(hi * 0.8))) if k < hi})
    alpha = {hi: total * (FINAL_SHARE if interim else 1.0)}
    for k in interim:
        alpha[k] = total * (1 - FINAL_SHARE) / len(interim)
    span = max(1, hi - 1 - lo)
    futility = {k: FUTILITY_START - FUTILITY_SPAN * (k - lo) / span for k in range(lo, hi)}
    return SequentialDesign(
        min_pairs=lo,
        max_pairs=hi,
        alpha=alpha,
        futility=futility,
        hypotheses=hypotheses,
        interleaved=interleaved,
    )


@dataclass(frozen=True)
class Look:
    """What one look decided. ``verdict`` is set when ``action`` is not CONTINUE."""

    pairs: int
    action: LookAction
    p_value: float | None
    stop: SequentialStop | None = None
    verdict: KeepVerdict | None = None


def look(rule: KeepRule, design: SequentialDesign, candidate: Arm, champion: Arm) -> Look:
    """Decide after ``len(candidate.primary)`` pairs (both arms must have that many samples, measured
    in the interleaved order of ``stats.schedule``; without interleaving, ``champion`` holds the
    champion's stored samples, any number of them)."""
    pairs = len(candidate.primary)
    if design.interleaved and len(champion.primary) != pairs:
        raise ValueError(f"a look needs as many champion as candidate samples, got {pairs} vs candidate")
    p = p_better(design, rule.direction, candidate.primary, champion.primary)
    cand_median, champ_median = median(candidate.primary), median(champion.primary)
    delta = -_worsening(rule.direction, cand_median, champ_median)
    improved = delta > rule.min_improvement
    failures = guard_check(rule, candidate, champion, None) if rule.guards else ()
    final = pairs >= design.max_pairs
    level = design.alpha.get(pairs)
    if design.hypotheses > 1:
        # Holm's p-value for this hypothesis, and the level that makes it pass whatever the others do.
        shown = combined_p(rule, design, candidate, champion)
        significant = shown is None or shown <= (design.level if final else design.level / design.hypotheses)
    else:
        shown = p
        significant = p is None or (level is not None and p <= level)

    def verdict(reason: Reason, detail: str) -> KeepVerdict:
        return KeepVerdict(
            keep=reason is Reason.IMPROVED,
            reason=reason,
            candidate_median=cand_median,
            champion_median=champ_median,
            delta=delta,
            p_value=shown,
            guard_failures=failures,
            detail=f"{detail} ({_medians(cand_median, champ_median, delta, shown, pairs, design)})",
        )

    if level is not None and improved and significant and not failures:
        stop = SequentialStop.MAX_SAMPLES if final else SequentialStop.KEPT_EARLY
        return Look(pairs, LookAction.KEEP, shown, stop, verdict(Reason.IMPROVED, f"Kept, {stop}"))
    if final:
        reason = _reject_reason(improved, significant, failures)
        text = f"Not kept at {pairs} pairs (max samples): {_why(reason, level, failures, design)}"
        return Look(pairs, LookAction.REJECT, shown, SequentialStop.MAX_SAMPLES, verdict(reason, text))
    if pairs < design.min_pairs:
        return Look(pairs, LookAction.CONTINUE, shown)
    early = _rejected_early(rule, candidate, champion, design)
    if early is not None:
        reason, why = early
        text = f"Not kept, rejected early at {pairs} pairs: {why}"
        return Look(pairs, LookAction.REJECT, shown, SequentialStop.REJECTED_EARLY, verdict(reason, text))
    if p is not None and p > design.futility.get(pairs, 1.0):
        reason = Reason.NOT_IMPROVED if not improved else Reason.NOT_SIGNIFICANT
        text = (
            f"Not kept, futility at {pairs} pairs: p = {p:.3g} > {design.futility[pairs]:.3g}, "
            "more pairs are unlikely to make it significant"
        )
        return Look(pairs, LookAction.REJECT, shown, SequentialStop.FUTILITY, verdict(reason, text))
    return Look(pairs, LookAction.CONTINUE, shown)


def replay(rule: KeepRule, design: SequentialDesign, candidate: Arm, champion: Arm) -> Look:
    """The look that decided a measurement, replayed from its samples: the first look from
    ``min_pairs`` on that keeps or rejects. A measurement stops there, so whoever holds the samples
    (the benchmark, a controller checking a worker's report) reaches the same decision the loop did.
    ValueError when the samples end before any look decided."""
    n = len(candidate.primary)
    for pairs in range(design.min_pairs, n + 1):
        found = look(rule, design, _prefix(candidate, pairs), _prefix(champion, pairs, design))
        if found.action is not LookAction.CONTINUE:
            return found
    raise ValueError(f"no look decided within {n} samples (the design needs up to {design.max_pairs})")


def combined_p(rule: KeepRule, design: SequentialDesign, candidate: Arm, champion: Arm) -> float | None:
    """A p-value for "the candidate is better" that holds over every look that may keep: the smallest
    of those looks' p-values so far, each divided by its share of the level (capped at 1).

    P(combined <= x) <= the sum over looks of P(p_k <= share_k * x) <= x by the union bound, however
    the looks are correlated, so Holm's correction over parallel hypotheses may use it as it is. A
    hypothesis that stopped early has fewer looks in it: a larger value, still valid; 1 when it
    stopped before any look that may keep (a None would pass every Holm level and lower the bar for
    the others). None only without a level (confidence 0)."""
    total = design.level
    if total <= 0:
        return None
    best = 1.0
    for pairs, level in design.alpha.items():
        if pairs > len(candidate.primary):
            continue
        p = p_better(
            design, rule.direction, candidate.primary[:pairs], _prefix(champion, pairs, design).primary
        )
        if p is not None:
            best = min(best, p * total / level)
    return best


def _prefix(arm: Arm, pairs: int, design: SequentialDesign | None = None) -> Arm:
    """The first ``pairs`` samples of ``arm`` (all of them for stored champion samples)."""
    if design is not None and not design.interleaved:
        return arm
    return Arm(arm.primary[:pairs], {g: v[:pairs] for g, v in arm.guards.items()})


def p_better(
    design: SequentialDesign, direction: Direction, candidate: Sequence[float], champion: Sequence[float]
) -> float | None:
    """One-sided p-value for "the candidate is better": the drift-adjusted t on interleaved pairs, or
    Mann-Whitney U against stored samples (None below two samples on a side)."""
    if design.interleaved:
        return drift_adjusted_p(direction, candidate, champion)
    if min(len(candidate), len(champion)) < 2:
        return None
    if direction is Direction.MINIMIZE:
        return mann_whitney_less_p(candidate, champion)
    return mann_whitney_less_p(champion, candidate)


def drift_adjusted_p(
    direction: Direction, candidate: Sequence[float], champion: Sequence[float]
) -> float | None:
    """One-sided p-value for "the candidate is better", from the t statistic of the candidate indicator
    in a regression of every sample on (1, is candidate, measurement position).

    The samples must come from the interleaved order (A B B A …; ``candidate[i]`` is the i-th B). None
    when there are fewer than 4 samples (no degree of freedom left). A perfectly deterministic metric
    (no residual variance) gives 0 when the candidate is better and 1 otherwise.
    """
    n_pairs = len(candidate)
    if len(champion) != n_pairs:
        raise ValueError("drift_adjusted_p needs as many candidate as champion samples")
    if 2 * n_pairs < 4:
        return None
    ys: list[float] = []
    ds: list[float] = []
    seen = {"A": 0, "B": 0}
    for arm in interleaved_order(n_pairs):
        source = candidate if arm == CANDIDATE else champion
        ys.append(float(source[seen[arm]]))
        ds.append(1.0 if arm == CANDIDATE else 0.0)
        seen[arm] += 1
    effect, se = _indicator_effect(ys, ds)
    better = -effect if direction is Direction.MINIMIZE else effect
    if se == 0.0 or not math.isfinite(se):
        return 0.0 if better > 0 else 1.0
    return 1.0 - t_cdf(better / se, len(ys) - 3)


def _indicator_effect(ys: Sequence[float], ds: Sequence[float]) -> tuple[float, float]:
    """OLS of y on (1, d, t): the coefficient of d and its standard error (closed form, centred)."""
    n = len(ys)
    ts = [float(i) for i in range(n)]
    my, md, mt = sum(ys) / n, sum(ds) / n, sum(ts) / n
    yc = [y - my for y in ys]
    dc = [d - md for d in ds]
    tc = [t - mt for t in ts]
    sdd = sum(d * d for d in dc)
    stt = sum(t * t for t in tc)
    sdt = sum(d * t for d, t in zip(dc, tc, strict=True))
    sdy = sum(d * y for d, y in zip(dc, yc, strict=True))
    sty = sum(t * y for t, y in zip(tc, yc, strict=True))
    syy = sum(y * y for y in yc)
    det = sdd * stt - sdt * sdt
    beta_d = (stt * sdy - sdt * sty) / det
    beta_t = (sdd * sty - sdt * sdy) / det
    rss = max(0.0, syy - beta_d * sdy - beta_t * sty)
    if rss <= 1e-24 * max(syy, my * my, 1e-300) * n:
        return beta_d, 0.0
    sigma2 = rss / (n - 3)
    return beta_d, math.sqrt(sigma2 * stt / det)


def _rejected_early(
    rule: KeepRule, candidate: Arm, champion: Arm, design: SequentialDesign
) -> tuple[Reason, str] | None:
    """A candidate significantly worse than the champion, or with a guard significantly beyond its
    tolerance, at the run's own level: no later pair can rescue it."""
    alpha = design.level
    worse = p_better(design, _opposite(rule.direction), candidate.primary, champion.primary)
    if worse is not None and alpha > 0 and worse <= alpha:
        return Reason.NOT_IMPROVED, f"significantly worse than the champion (p = {worse:.3g})"
    for guard in rule.guards:
        cand = candidate.guards.get(guard.name, ())
        champ = champion.guards.get(guard.name, ())
        if (design.interleaved and len(cand) != len(champ)) or not cand or not champ:
            continue
        allowed = guard.tolerance.allowed(median(champ))
        # Shift the candidate by the tolerance: significance then means "worse by more than allowed".
        sign = 1.0 if guard.direction is Direction.MINIMIZE else -1.0
        shifted = [v - sign * allowed for v in cand]
        p = p_better(design, _opposite(guard.direction), shifted, champ)
        if p is not None and alpha > 0 and p <= alpha:
            return (
                Reason.GUARD_REGRESSED,
                f"guard {guard.name} significantly beyond its tolerance (p = {p:.3g})",
            )
    return None


def _reject_reason(improved: bool, significant: bool, failures: tuple[str, ...]) -> Reason:
    if not improved:
        return Reason.NOT_IMPROVED
    if not significant:
        return Reason.NOT_SIGNIFICANT
    return Reason.GUARD_REGRESSED if failures else Reason.NOT_SIGNIFICANT


def _why(reason: Reason, level: float | None, failures: tuple[str, ...], design: SequentialDesign) -> str:
    if reason is Reason.NOT_IMPROVED:
        return "the median does not improve by more than the minimum improvement"
    if reason is Reason.GUARD_REGRESSED:
        return "a guard regressed: " + "; ".join(failures)
    if design.hypotheses > 1:
        return f"the combined p-value is not significant at the run's level {design.level:.3g}"
    return f"not significant at this look's level {level:.3g}" if level is not None else "not significant"


def _medians(
    cand: float, champ: float, delta: float, p: float | None, pairs: int, design: SequentialDesign
) -> str:
    name = "combined p" if design.hypotheses > 1 else "p"
    test = "no test" if p is None else f"{name} = {p:.3g}"
    medians = f"candidate median {cand:g} vs champion median {champ:g}"
    count = "pairs" if design.interleaved else "candidate samples"
    return f"{medians}, improvement {delta:g}, {test}, {pairs} {count}"


def _opposite(direction: Direction) -> Direction:
    return Direction.MAXIMIZE if direction is Direction.MINIMIZE else Direction.MINIMIZE


def _worsening(direction: Direction, value: float, reference: float) -> float:
    return value - reference if direction is Direction.MINIMIZE else reference - value

"""The controller decides (issue 21): a worker's decision is recomputed from its samples before it counts.

A worker reports a turn as its samples plus a decision (outcome, reason, value, p-value, the kept
commits and the champion's new value). The samples are what the controller must take on trust: the
metric ran in the worker's pod, as the candidate's own code. Everything derived from them it
recomputes here, with the function the turn path decided with (``stats.verdicts.turn_verdict``), the
run's spec as stored and the round's job as minted (never the worker's word for either):

- a decision whose reason the keep rule gives (``improved``, ``not_improved``, ``not_significant``,
  ``guard_regressed``) must be the verdict the samples give, with the same value, p-value, pairs and
  stop; the reference without interleaving is the champion's stored samples, not the worker's;
- a keep must name at least one commit, the same commits as its component heads, and move the
  champion to this turn at the recomputed value; anything else moves nothing;
- a parallel hypothesis's report (``recount_hypothesis``) must carry the reason, value, reference,
  delta and p-value its own samples give, so the controller's Holm choice runs on recomputed figures;
- the baseline's value must be the median of the baseline samples stored for it.

Each check answers None (the report stands) or a sentence naming what did not match, which
``RemoteRounds`` records as a ``policy_violation`` and answers 403 with. A reason the samples cannot
show (``agent_failed``, ``no_change``, ``evaluator_mutated``, ...) is taken as reported: a worker can
always spend its own turn, and such a decision keeps nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from controller.config.spec import Spec
from controller.domain.enums import Outcome, Reason, SampleArm
from controller.domain.jobs import RoundJob
from controller.stats import Arm, GuardRule, KeepRule, median
from controller.stats.verdicts import HoldScore, TurnRule, TurnVerdict, sequential_design, turn_verdict
from controller.store.records import ChampionUpdate, HypothesisReport, Sample, TurnDecision

VERDICT_REASONS = frozenset(
    {Reason.IMPROVED, Reason.NOT_IMPROVED, Reason.NOT_SIGNIFICANT, Reason.GUARD_REGRESSED}
)


class Mismatch(Exception):
    """What a report claims that its samples do not support (the sentence recorded)."""


@dataclass(frozen=True)
class Reference:
    """What the controller knows about the turn's comparison besides the report.

    champion: the champion's stored samples (the reference without interleaving). champion_is_base:
    whether the champion is still the base commit (then the base arm is the champion's). Both are
    read only when a check needs them, so an honest decision costs the controller no extra query."""

    champion: Callable[[], Arm]
    champion_is_base: Callable[[], bool]


def recount_decision(
    spec: Spec,
    job: RoundJob,
    number: int,
    decision: TurnDecision,
    *,
    champion: ChampionUpdate | None,
    component_heads: Mapping[str, str],
    samples: Sequence[Sample],
    reference: Reference,
) -> str | None:
    """None when the decision of turn ``number`` is what its samples give, else what did not match."""
    try:
        _check_decision(spec, job, number, decision, champion, component_heads, samples, reference)
    except Mismatch as exc:
        return str(exc)
    return None


def recount_hypothesis(spec: Spec, report: HypothesisReport, reference: Reference) -> str | None:
    """None when a parallel hypothesis's report is what its samples give (its own rule, the looks for
    the run's N when sequential, ADR-0032), else what did not match. One that never reached the rule
    keeps nothing."""
    figures = {"value": report.value, "reference_value": report.reference_value, "delta": report.delta}
    for name, figure in {**figures, "p_value": report.p_value}.items():
        if figure is not None and not math.isfinite(figure):
            raise ValueError(f"{name}: must be finite, got {figure}")  # a caller bug, as the ledger says
    try:
        if report.reason not in VERDICT_REASONS:
            _require(not report.commits, f"a {report.reason} hypothesis carries commits")
            return None
        design = sequential_design(spec.metric, hypotheses=spec.broker.parallel)
        rule = TurnRule(keep=keep_rule(spec), design=design, parallel=True)
        found = _recompute(spec, rule, samples=report.samples, reference=reference)
        verdict = found.verdict
        _same("reason", report.reason, verdict.reason)
        _close("value", report.value, verdict.candidate_median)
        _close("reference_value", report.reference_value, verdict.champion_median)
        _close("delta", report.delta, verdict.delta)
        _close("p_value", report.p_value, found.p_value)
        _require(bool(report.commits) == verdict.keep, "commits are reported only for a hypothesis to keep")
    except Mismatch as exc:
        return str(exc)
    return None


def recount_baseline(spec: Spec, value: float, samples: Sequence[Sample]) -> str | None:
    """None when ``value`` is the median of the stored baseline samples, else what did not match."""
    try:
        arm = _arm(spec, samples, SampleArm.BASELINE)
        _require(bool(arm.primary), "no baseline samples were reported before the baseline")
        _close("baseline value", value, median(arm.primary))
    except Mismatch as exc:
        return str(exc)
    return None


def stored_arm(spec: Spec, samples: Sequence[Sample], which: SampleArm) -> Arm:
    """One arm of stored samples as the turn path reads it (``RunContext.arm_from_store``)."""
    return _arm(spec, samples, which)


def keep_rule(spec: Spec) -> KeepRule:
    """The run's keep rule from its spec (as ``RunContext.keep_rule`` builds it)."""
    metric = spec.metric
    return KeepRule(
        direction=metric.direction,
        min_improvement=metric.min_improvement,
        confidence=metric.confidence,
        guards=tuple(GuardRule(g.name, g.direction, g.tolerance) for g in metric.guards),
    )


def _check_decision(
    spec: Spec,
    job: RoundJob,
    number: int,
    decision: TurnDecision,
    champion: ChampionUpdate | None,
    component_heads: Mapping[str, str],
    samples: Sequence[Sample],
    reference: Reference,
) -> None:
    kept = decision.outcome is Outcome.ACCEPTED
    if not kept:
        _require(champion is None, f"a {decision.reason} decision moves the champion")
        _require(
            not decision.commits and not component_heads, f"a {decision.reason} decision carries commits"
        )
    if decision.reason not in VERDICT_REASONS:
        return
    hold = None
    if job.round > 0 and job.hold is not None:  # a refinement round (as ``rounds.play_job`` reads it)
        _require(spec.feedback is not None, "a refinement round of a run without [feedback]")
        assert spec.feedback is not None
        hold = HoldScore(spec.feedback.hold, job.hold.first_published)
    rule = TurnRule(
        keep=keep_rule(spec),
        design=sequential_design(spec.metric),
        hold=hold,
    )
    found = _recompute(spec, rule, samples=samples, reference=reference)
    verdict = found.verdict
    _same("reason", decision.reason, verdict.reason)
    _close("value", decision.value, verdict.candidate_median)
    _close("p_value", decision.p_value, found.p_value)
    _same("pairs", decision.pairs, found.pairs)
    _same("sequential_stop", decision.sequential_stop, found.stop)
    if kept:
        _require(bool(decision.commits), "a kept turn names no commit")
        _same("component_heads", dict(component_heads), dict(decision.commits))
        _require(champion is not None, "a kept turn does not move the champion")
        assert champion is not None
        _same("champion turn", champion.turn, number)
        _close("champion value", champion.value, verdict.candidate_median)


def _recompute(spec: Spec, rule: TurnRule, *, samples: Sequence[Sample], reference: Reference) -> TurnVerdict:
    candidate = _arm(spec, samples, SampleArm.CANDIDATE)
    _require(bool(candidate.primary), "no candidate samples")
    champion = _arm(spec, samples, SampleArm.CHAMPION) if spec.metric.interleave else reference.champion()
    _require(bool(champion.primary), "no champion samples")

    def base() -> Arm:
        arm = _arm(spec, samples, SampleArm.BASE)
        if arm.primary:
            return arm
        _require(reference.champion_is_base(), "a keep with guards reports no samples of the base")
        return champion

    try:
        return turn_verdict(rule, candidate, champion, base)
    except ValueError as exc:  # arms of unequal length, no look decided, a guard without samples
        raise Mismatch(f"the samples decide nothing: {exc}") from exc


def _arm(spec: Spec, samples: Sequence[Sample], which: SampleArm) -> Arm:
    """One arm's valid samples in the order measured, as the turn path built it."""
    names = [spec.metric.name, *(g.name for g in spec.metric.guards)]
    rows = sorted((index, values) for arm, index, values, valid in samples if arm == which and valid)
    for index, values in rows:
        missing = [n for n in names if n not in values or not math.isfinite(values[n])]
        _require(not missing, f"{which} sample {index} has no finite {', '.join(missing)}")
    return Arm(
        primary=tuple(values[spec.metric.name] for _i, values in rows),
        guards={g.name: tuple(values[g.name] for _i, values in rows) for g in spec.metric.guards},
    )


def _require(condition: bool, problem: str) -> None:
    if not condition:
        raise Mismatch(problem)


def _same(field: str, reported: object, recomputed: object) -> None:
    if reported != recomputed:
        raise Mismatch(f"{field}: reported {_show(reported)}, the samples give {_show(recomputed)}")


def _show(value: object) -> str:
    return str(value) if isinstance(value, StrEnum) else repr(value)


def _close(field: str, reported: float | None, recomputed: float | None) -> None:
    """Equal up to float noise (the figures went through JSON; the code that computed them is the same)."""
    if reported is None or recomputed is None:
        _same(field, reported, recomputed)
        return
    if not math.isclose(reported, recomputed, rel_tol=1e-9, abs_tol=1e-12):
        raise Mismatch(f"{field}: reported {reported!r}, the samples give {recomputed!r}")

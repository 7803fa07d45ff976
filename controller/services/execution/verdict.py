"""A turn's verdict: validation, measurement of the arms and the keep rule (or, in a refinement round,
the hold rule) applied to the samples.

The rules themselves are pure (``controller.stats``); this module measures what they need, the base
as a third arm only when a keep is near and the champion moved. A refinement round's rule is an
argument (``RoundRule``), never state of the run's context.
"""

from __future__ import annotations

from functools import partial

from controller.domain.enums import Reason, SampleArm, TurnStep
from controller.services.execution.context import RoundRule, RunContext
from controller.services.execution.measure import ArmRoot, Measurement, PairCheck
from controller.services.execution.parallel import run_all
from controller.services.execution.snapshots import clean_snapshot, mutations, snapshot
from controller.services.execution.steps import measure_arms, validate_candidate
from controller.services.execution.work import Settled, TurnStop, TurnWork
from controller.stats import Arm, KeepRule, KeepVerdict, decide_hold, decide_keep, guard_check
from controller.stats.sequential import Look, LookAction, SequentialDesign, design_for, look


def evaluate(
    ctx: RunContext, work: TurnWork, round_rule: RoundRule | None = None
) -> tuple[bool, str, Settled | None]:
    """Validation, measurement and the keep rule (``round_rule``: the refinement round's rule instead, from
    round 1 on). Returns (keep, detail, settled-if-rejected)."""
    metric = ctx.spec.metric
    # The candidate's state was recorded by the policy check; nothing ran since. The champion arm is
    # clean at the champion heads by construction (restored after every keep and on open).
    validate_candidate(ctx, work)
    arms = [ArmRoot(SampleArm.CANDIDATE, ctx.layout.workspace_root("candidate"))]
    if metric.interleave:
        arms.insert(0, ArmRoot(SampleArm.CHAMPION, ctx.layout.workspace_root("champion")))
    rule = ctx.keep_rule()
    # A parallel hypothesis is decided by the fixed rule, then Holm over the turn's N (ADR-0016).
    design = None if work.index is not None else _sequential_design(ctx, work, round_rule)
    looks: list[Look] = []
    check = None if design is None else _pair_check(ctx, rule, design, looks)
    result = measure_arms(ctx, work, arms, "metric", after_pair=check)
    if metric.interleave:
        after, champion_after = run_all(
            [partial(snapshot, ctx, "candidate"), partial(snapshot, ctx, "champion")]
        )
        mutated = mutations(work.before, after) + mutations(clean_snapshot(ctx), champion_after)
    else:
        mutated = mutations(work.before, snapshot(ctx, "candidate"))
    if mutated:
        raise TurnStop(Reason.EVALUATOR_MUTATED, "the evaluator changed " + ", ".join(mutated[:20]))
    work.step(TurnStep.DECIDING)
    guards = ctx.guard_names()
    candidate = result.arm(SampleArm.CANDIDATE, metric.name, guards)
    if metric.interleave:
        champion = result.arm(SampleArm.CHAMPION, metric.name, guards)
    else:
        assert ctx.champion_arm is not None
        champion = ctx.champion_arm
    work.samples = list(candidate.primary)
    work.reference = list(champion.primary)
    if work.round > 0 and round_rule is not None:
        return _evaluate_round(ctx, work, rule, round_rule, candidate, champion)
    if looks:
        verdict = _sequential_verdict(ctx, work, rule, looks[-1], candidate, champion)
    else:
        verdict = decide_keep(rule, candidate, champion)
        if verdict.keep and rule.guards and work.index is None:  # parallel: only for the chosen one
            verdict = decide_keep(rule, candidate, champion, base_arm(ctx, work, champion))
    work.verdict = verdict
    work.value = verdict.candidate_median
    work.p_value = verdict.p_value
    if verdict.keep:
        return True, verdict.detail, None
    return False, verdict.detail, Settled(verdict.reason, verdict.detail)


def _sequential_design(
    ctx: RunContext, work: TurnWork, round_rule: RoundRule | None
) -> SequentialDesign | None:
    """The sequential design for a search turn, or None where the fixed rule decides: refinement
    rounds (holding a score is not an improvement test), ``interleave = false`` (no pairs) and
    ``confidence = 0`` (no test to stop on)."""
    metric = ctx.spec.metric
    if not (metric.sequential and metric.interleave and metric.confidence > 0):
        return None
    if work.round > 0 and round_rule is not None:
        return None
    return design_for(metric.min_samples, metric.samples, metric.confidence)


def _pair_check(ctx: RunContext, rule: KeepRule, design: SequentialDesign, looks: list[Look]) -> PairCheck:
    """After each pair from the first look on: decide, and stop measuring once a look settles it."""
    metric, guards = ctx.spec.metric.name, ctx.guard_names()

    def check(result: Measurement, pairs: int) -> bool:
        if pairs < design.min_pairs:
            return False
        candidate = result.arm(SampleArm.CANDIDATE, metric, guards)
        champion = result.arm(SampleArm.CHAMPION, metric, guards)
        looks.append(look(rule, design, candidate, champion))
        return looks[-1].action is not LookAction.CONTINUE

    return check


def _sequential_verdict(
    ctx: RunContext, work: TurnWork, rule: KeepRule, final: Look, candidate: Arm, champion: Arm
) -> KeepVerdict:
    """The last look's verdict; a keep must still pass the guards against the base (a third arm)."""
    assert final.verdict is not None
    work.pairs, work.stop, work.p_value = final.pairs, final.stop, final.p_value
    verdict = final.verdict
    if verdict.keep and rule.guards:
        failures = guard_check(rule, candidate, champion, base_arm(ctx, work, champion))
        if failures:
            detail = f"Not kept: a guard regressed: {'; '.join(failures)} ({final.pairs} pairs)"
            verdict = KeepVerdict(
                keep=False,
                reason=Reason.GUARD_REGRESSED,
                candidate_median=verdict.candidate_median,
                champion_median=verdict.champion_median,
                delta=verdict.delta,
                p_value=verdict.p_value,
                guard_failures=failures,
                detail=detail,
            )
    return verdict


def base_arm(ctx: RunContext, work: TurnWork, champion: Arm) -> Arm:
    """The base commit measured as a third arm (only when a keep is near and the champion moved)."""
    if ctx.champion_heads == ctx.base_shas:
        return champion
    ctx.ensure_arm("base", ctx.base_shas)
    result = measure_arms(ctx, work, [ArmRoot(SampleArm.BASE, ctx.layout.workspace_root("base"))], "base")
    return result.arm(SampleArm.BASE, ctx.spec.metric.name, ctx.guard_names())


def _evaluate_round(
    ctx: RunContext, work: TurnWork, rule: KeepRule, round_rule: RoundRule, candidate: Arm, pr_head: Arm
) -> tuple[bool, str, Settled | None]:
    """A refinement turn is kept when it holds the score (docs/keep-rule.md), not only when it improves it."""
    hold, first = round_rule.hold, round_rule.first_published
    verdict = decide_hold(rule, hold, candidate, pr_head, first)
    if verdict.keep and rule.guards:
        verdict = decide_hold(rule, hold, candidate, pr_head, first, base_arm(ctx, work, pr_head))
    work.value = verdict.candidate_median
    if verdict.keep:
        return True, verdict.detail, None
    return False, verdict.detail, Settled(verdict.reason, verdict.detail)

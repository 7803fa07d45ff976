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
from controller.stats import Arm
from controller.stats.hold import hold_look
from controller.stats.sequential import Look, LookAction, SequentialDesign, look
from controller.stats.verdicts import HoldScore, TurnRule, sequential_design, turn_verdict


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
    refinement = work.round > 0 and round_rule is not None
    rule = turn_rule(ctx, work, round_rule)
    looks: list[Look] = []
    check = None if rule.design is None else _pair_check(ctx, rule, rule.design, looks)
    result = measure_arms(ctx, work, arms, "metric", after_pair=check)
    # The candidate's walk lists its ignored entries too: after a keep they are its fingerprint for the
    # next turn (``candidate_copy.committed``), with no listing of their own.
    listed: dict[str, list[str]] | None = {} if ctx.spec.workspace.keep_ignored else None
    if metric.interleave:
        after, champion_after = run_all(
            [partial(snapshot, ctx, "candidate", listed, work), partial(snapshot, ctx, "champion")]
        )
        mutated = mutations(work.before, after) + mutations(clean_snapshot(ctx), champion_after)
    else:
        mutated = mutations(work.before, snapshot(ctx, "candidate", listed, work))
    work.ignored_after, work.listed_at = listed, ctx.executor.commands_run
    if mutated:
        raise TurnStop(Reason.EVALUATOR_MUTATED, "the evaluator changed " + ", ".join(mutated[:20]))
    work.step(TurnStep.DECIDING)
    guards = ctx.guard_names()
    candidate = result.arm(SampleArm.CANDIDATE, metric.name, guards)
    if metric.interleave:
        champion = result.arm(SampleArm.CHAMPION, metric.name, guards)
    else:
        champion = ctx.champion_reference()
    work.samples = list(candidate.primary)
    work.reference = list(champion.primary)
    # The same function the controller checks a worker's report with (``stats.verdicts``): the looks
    # that stopped the measurement are replayed over its pairs, so they decide as they did live.
    decided = turn_verdict(rule, candidate, champion, partial(base_arm, ctx, work, champion))
    verdict = decided.verdict
    work.verdict = verdict
    work.value = verdict.candidate_median
    if not refinement:
        work.p_value = decided.p_value
    work.pairs, work.stop = decided.pairs, decided.stop
    if verdict.keep:
        return True, verdict.detail, None
    return False, verdict.detail, Settled(verdict.reason, verdict.detail)


def turn_rule(ctx: RunContext, work: TurnWork, round_rule: RoundRule | None) -> TurnRule:
    """What decides ``work``'s turn besides its samples: the run's keep rule, the sequential design (for
    the run's N when it is one parallel hypothesis, ADR-0032), and the hold rule of a refinement turn
    (``round_rule``, from round 1 on)."""
    refinement = work.round > 0 and round_rule is not None
    parallel = work.index is not None
    hypotheses = ctx.spec.broker.parallel if parallel else 1
    return TurnRule(
        keep=ctx.keep_rule(),
        design=sequential_design(ctx.spec.metric, hypotheses=hypotheses),
        hold=HoldScore(round_rule.hold, round_rule.first_published) if refinement and round_rule else None,
        parallel=parallel,
    )


def _pair_check(ctx: RunContext, rule: TurnRule, design: SequentialDesign, looks: list[Look]) -> PairCheck:
    """After each pair (each candidate sample without interleaving) from the first look on: decide,
    and stop measuring once a look settles it; a refinement turn looks with the hold rule."""
    metric, guards = ctx.spec.metric.name, ctx.guard_names()

    def check(result: Measurement, pairs: int) -> bool:
        if pairs < design.min_pairs:
            return False
        candidate = result.arm(SampleArm.CANDIDATE, metric, guards)
        if design.interleaved:
            champion = result.arm(SampleArm.CHAMPION, metric, guards)
        else:
            champion = ctx.champion_reference()
        if rule.hold is None:
            looks.append(look(rule.keep, design, candidate, champion))
        else:
            hold, first = rule.hold.tolerance, rule.hold.first_published
            looks.append(hold_look(rule.keep, hold, design, candidate, champion, first))
        return looks[-1].action is not LookAction.CONTINUE

    return check


def base_arm(ctx: RunContext, work: TurnWork, champion: Arm) -> Arm:
    """The base commit measured as a third arm (only when a keep is near and the champion moved)."""
    if ctx.champion_heads == ctx.base_shas:
        return champion
    ctx.ensure_arm("base", ctx.base_shas)
    result = measure_arms(ctx, work, [ArmRoot(SampleArm.BASE, ctx.layout.workspace_root("base"))], "base")
    return result.arm(SampleArm.BASE, ctx.spec.metric.name, ctx.guard_names())

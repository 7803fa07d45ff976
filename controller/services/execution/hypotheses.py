"""A turn of N parallel hypotheses (``broker.parallel = N``, docs/keep-rule.md, ADR-0016).

Each hypothesis runs the steps of a single turn (``turn.try_candidate``): the agent proposes with
``CRUCIBLE_PARALLEL_INDEX`` set (the knobs proposer takes a distinct step per index), and the candidate
is measured against the champion and judged by the fixed keep rule on its own. With the local broker
the hypotheses run one after another in the one candidate checkout (two arms measured side by side
on a shared machine would disturb each other's samples; in pods they run at once): one that could be
kept is committed (``refs/crucible/hypotheses/<turn>/<index>``) and the checkout restored for the
next. Each is reported through the ledger as a pod reports its own; once all N are in, the turn is
decided once: Holm over N (``stats.holm.choose``), the guards of the chosen one checked against the
base as a third arm, its commit becomes the champion, and every hypothesis gets its final reason.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from controller.domain import events
from controller.domain.enums import (
    FAILURE_REASONS,
    OUTCOME_OF_REASON,
    EventKind,
    Outcome,
    Reason,
    SampleArm,
)
from controller.engine.knobs import Proposal
from controller.services.execution.context import RunContext
from controller.services.execution.hypothesis_pods import try_in_pods
from controller.services.execution.keep import (
    champion_moved,
    champion_refs,
    commit_changed,
    paths_by_component,
    settle_arms,
)
from controller.services.execution.progress import TurnProgress
from controller.services.execution.turn import try_candidate, write_candidate_file
from controller.services.execution.verdict import base_arm
from controller.services.execution.work import EVENT_OF_OUTCOME, TurnStop, TurnWork
from controller.services.views.reads import hypothesis_view, turn_view
from controller.stats import Arm, KeepVerdict, guard_check
from controller.stats.holm import Contender, ParallelChoice, choose
from controller.stats.keep import alpha_for
from controller.store.records import (
    ChampionUpdate,
    HypothesisReport,
    RunRecord,
    TurnDecision,
    TurnRecord,
)

HYPOTHESIS_REF = "refs/crucible/hypotheses/{turn}/{index}"


def run_parallel_turn(
    ctx: RunContext,
    number: int,
    count: int,
    proposals: Sequence[Proposal] | None,
    turns: Sequence[TurnRecord] | None = None,
    decided_total: int | None = None,
    run: RunRecord | None = None,
    ahead: Sequence[Proposal] = (),
) -> TurnRecord:
    """Run search turn ``number`` with ``count`` hypotheses (fewer when the knobs ``proposals`` ran
    short) and write its decision exactly once. Round 0 only: refinement rounds keep the first turn
    that holds the score, which is not a comparison of several candidates. ``ahead``: the next
    turn's proposals, which pods free before this turn ends start on (ADR-0051; unused locally)."""
    if ctx.hooks.hypothesis_pods is not None:  # one pod per hypothesis; the controller decides (ADR-0018)
        started = time.monotonic()
        reports = try_in_pods(ctx, number, count, proposals, _started(number, count), turns, ahead)
        return _decide(ctx, number, reports, len(reports), time.monotonic() - started)
    ctx.ledger.start_turn(ctx.run_id, number, 0, event=_started(number, count))
    write_candidate_file(ctx, 0, turns, decided_total, run)
    started = time.monotonic()
    reports = []
    for index in range(count if proposals is None else len(proposals)):
        proposal = None if proposals is None else proposals[index]
        ctx.observer.step(f"turn {number}: hypothesis {index + 1} of {count}")
        progress = TurnProgress(ctx.ledger, ctx.run_id, number, 0, ctx.spec.metric.name, parallel_index=index)
        try:
            report = try_hypothesis(ctx, number, index, proposal, progress)
        except BaseException:
            progress.flush_after_error()
            raise
        progress.flush()  # its progress events come before its report
        ctx.ledger.report_hypothesis(ctx.run_id, number, report)
        reports.append(report)
        if ctx.executor.cancel.is_set():  # a cancelled run tries no further hypothesis
            break
    # Holm counts every hypothesis tried, failed ones included (fewer than ``count`` only when the
    # knobs ran short or the run was cancelled mid-turn).
    return _decide(ctx, number, reports, len(reports), time.monotonic() - started)


def _started(number: int, count: int) -> tuple[EventKind, dict[str, Any]]:
    return EventKind.TURN_STARTED, events.TurnStartedPayload(turn=number, round=0, parallel=count).dump()


def try_hypothesis(
    ctx: RunContext, number: int, index: int, proposal: Proposal | None, progress: TurnProgress | None = None
) -> HypothesisReport:
    """One hypothesis, from proposal to its own verdict; the candidate checkout ends at the champion.
    Locally one after another, reporting its steps and samples through ``progress``; in a hypothesis
    pod, its one (``crucible worker``, ADR-0018), which reports none: its token may only report it."""
    work = TurnWork(number, 0, index=index, progress=progress)
    keep, detail, settled = try_candidate(ctx, work, proposal)
    commits: dict[str, str] = {}
    if keep:
        commits = _commit(ctx, work)
    settle_arms(ctx, None)
    verdict = work.verdict
    reason = Reason.IMPROVED if keep else (settled.reason if settled else Reason.NOT_IMPROVED)
    return HypothesisReport(
        index=index,
        reason=reason,
        value=work.value,
        reference_value=verdict.champion_median if verdict else None,
        delta=verdict.delta if verdict else None,
        p_value=work.p_value,
        hypothesis=work.hypothesis,
        proposal=_proposal_payload(work.proposal),
        changed_paths=work.changed_paths(ctx.layout.composite),
        commits=commits,
        samples=tuple(work.raw_samples),
        cost_usd=work.cost_usd,
        tokens=work.tokens,
        duration_s=time.monotonic() - work.started,
        detail=ctx.executor.redact(detail if keep else (settled.detail if settled else "")),
    )


def with_base_samples(ctx: RunContext, number: int, report: HypothesisReport) -> HypothesisReport:
    """In a hypothesis pod (ADR-0018): a hypothesis that could be kept, with guards and a champion
    that moved from the base, measures the base arm in its own pod too, so the guards are compared
    between samples of one machine; its samples ride in the report. Unchanged otherwise, or when the
    base could not be measured (the controller then measures it, as the local path does)."""
    needed = report.reason is Reason.IMPROVED and ctx.keep_rule().guards
    if not needed or ctx.champion_heads == ctx.base_shas:
        return report
    work = TurnWork(number, 0, index=report.index)
    try:
        base_arm(ctx, work, Arm(primary=()))
    except TurnStop:
        return report
    base = tuple(s for s in work.raw_samples if s[0] == SampleArm.BASE)
    return dataclasses.replace(report, samples=report.samples + base)


def _commit(ctx: RunContext, work: TurnWork) -> dict[str, str]:
    """Commit the hypothesis in each changed component and pin it with a ref (restores move HEAD)."""
    ref = HYPOTHESIS_REF.format(turn=work.number, index=work.index)
    hypothesis = work.hypothesis or f"turn {work.number}, hypothesis {work.index}"
    return commit_changed(ctx, work, hypothesis, lambda sha: {ref: sha})


def _verdict(report: HypothesisReport) -> KeepVerdict | None:
    """The report's own verdict as the choice needs it; None when it never reached the keep rule."""
    if report.value is None or report.reference_value is None or report.delta is None:
        return None
    return KeepVerdict(
        keep=report.reason is Reason.IMPROVED,
        reason=report.reason,
        candidate_median=report.value,
        champion_median=report.reference_value,
        delta=report.delta,
        p_value=report.p_value,
        guard_failures=(),
        detail=report.detail,
    )


def choose_reported(ctx: RunContext, reports: Sequence[HypothesisReport], count: int) -> ParallelChoice:
    """Holm over ``count`` hypotheses, then the guards of the chosen one against the base (a third
    arm, measured only when a keep is near); a chosen one that fails them is ``guard_regressed`` and
    the next best is chosen. Failed hypotheses keep their own reason."""
    rule = ctx.keep_rule()
    verdicts = {r.index: _verdict(r) for r in reports}
    overridden: dict[int, tuple[Reason, str]] = {}
    while True:
        contenders = [Contender(i, v) for i, v in verdicts.items()]
        choice = choose(contenders, alpha_for(rule.confidence), count)
        if choice.kept is None or not rule.guards:
            break
        kept = next(r for r in reports if r.index == choice.kept)
        try:
            failures = _base_guard_failures(ctx, kept)
        except TurnStop as stop:  # the base arm could not be measured: this one cannot be kept
            overridden[choice.kept] = (stop.settled.reason, stop.settled.detail)
            verdicts[choice.kept] = None
            continue
        if not failures:
            break
        detail = f"Not kept: a guard regressed against the base: {'; '.join(failures)}"
        overridden[choice.kept] = (Reason.GUARD_REGRESSED, detail)
        verdicts[choice.kept] = None
    reasons = dict(choice.reasons)
    details = dict(choice.details)
    for report in reports:
        if report.index not in reasons:  # never reached the keep rule: its own reason stands
            reasons[report.index], details[report.index] = report.reason, report.detail
    for index, (reason, detail) in overridden.items():
        reasons[index], details[index] = reason, detail
    return ParallelChoice(kept=choice.kept, reasons=reasons, details=details)


def _arm(ctx: RunContext, report: HypothesisReport, arm: SampleArm) -> Arm:
    metric, guards = ctx.spec.metric.name, ctx.guard_names()
    rows = [values for a, _i, values, valid in report.samples if a == arm and valid]
    return Arm(primary=tuple(r[metric] for r in rows), guards={g: tuple(r[g] for r in rows) for g in guards})


def _base_guard_failures(ctx: RunContext, report: HypothesisReport) -> tuple[str, ...]:
    candidate = _arm(ctx, report, SampleArm.CANDIDATE)
    if ctx.spec.metric.interleave:
        champion = _arm(ctx, report, SampleArm.CHAMPION)
    else:
        champion = ctx.champion_reference()
    if any(arm == SampleArm.BASE for arm, _i, _v, _ok in report.samples):
        base = _arm(ctx, report, SampleArm.BASE)  # measured in the hypothesis's own pod (ADR-0018)
    else:
        base = base_arm(ctx, TurnWork(0, 0), champion)
    return guard_check(ctx.keep_rule(), candidate, champion, base)


def _decide(
    ctx: RunContext, number: int, reports: list[HypothesisReport], count: int, duration_s: float
) -> TurnRecord:
    choice = choose_reported(ctx, reports, count)
    winner = next((r for r in reports if r.index == choice.kept), None)
    lead = winner or _representative(reports, choice)
    reason = choice.reasons[lead.index]
    heads = dict(ctx.champion_heads)
    champion: ChampionUpdate | None = None
    if winner is not None:
        heads.update(winner.commits)
        names = [comp.name for comp in ctx.components]
        changed = paths_by_component(winner.changed_paths, names, ctx.layout.composite)
        settle_arms(ctx, heads, changed)  # the champion arm advances to the kept commit
        for comp in ctx.components:
            if comp.name in winner.commits:
                co = ctx.checkout("candidate", comp.name)
                co.restore(winner.commits[comp.name], ctx.spec.workspace.keep_ignored)
                co.set_refs(champion_refs(number, heads[comp.name]))
        assert winner.value is not None
        champion = ChampionUpdate(value=winner.value, turn=number)
    summary = "; ".join(f"#{i}: {choice.reasons[i]}" for i in sorted(choice.reasons))
    decision = TurnDecision(
        outcome=OUTCOME_OF_REASON[reason],
        reason=reason,
        value=lead.value,
        p_value=lead.p_value,
        hypothesis=lead.hypothesis,
        changed_paths=lead.changed_paths,
        commits=dict(winner.commits) if winner else {},
        cost_usd=sum(r.cost_usd for r in reports),
        tokens=sum(r.tokens for r in reports),
        duration_s=duration_s,
        detail=f"{choice.details[lead.index]} [{len(reports)} hypotheses: {summary}]",
    )
    payload = events.TurnDecidedPayload(
        turn=number,
        round=0,
        outcome=decision.outcome,
        reason=reason,
        value=lead.value,
        p_value=lead.p_value,
        hypothesis=lead.hypothesis,
        detail=decision.detail,
        parallel_index=lead.index,
        hypotheses=_payloads(reports, choice),
    ).dump()
    record = ctx.ledger.decide_turn(
        ctx.run_id,
        number,
        decision,
        champion=champion,
        component_heads=dict(winner.commits) if winner else {},
        event=(EVENT_OF_OUTCOME[decision.outcome], payload),
        samples=lead.samples,
        hypotheses={i: (choice.reasons[i], ctx.executor.redact(choice.details[i])) for i in choice.reasons},
    )
    if winner is not None:
        champion_moved(ctx, number, heads)
    cand = [v[ctx.spec.metric.name] for a, _i, v, ok in lead.samples if a == SampleArm.CANDIDATE and ok]
    ref = [v[ctx.spec.metric.name] for a, _i, v, ok in lead.samples if a == SampleArm.CHAMPION and ok]
    stored = ctx.ledger.list_hypotheses(ctx.run_id, number)
    views = [hypothesis_view(h, ctx.spec.metric.name) for h in stored]
    ctx.observer.turn_decided(turn_view(record, cand, ref, views).model_dump(mode="json"))
    return record


def _representative(reports: list[HypothesisReport], choice: ParallelChoice) -> HypothesisReport:
    """The hypothesis a turn that kept nothing is shown by: the measured one that came closest (the
    largest improvement), else one that changed nothing, else the first failure. So the turn counts as
    a failure (``max_consecutive_failures``) only when every hypothesis failed."""

    def rank(r: HypothesisReport) -> tuple[int, float, int]:
        reason = choice.reasons[r.index]
        tier = (
            2 if reason in FAILURE_REASONS else (1 if OUTCOME_OF_REASON[reason] is Outcome.NO_CHANGE else 0)
        )
        return tier, -(r.delta if r.delta is not None else float("-inf")), r.index

    return min(reports, key=rank)


def _proposal_payload(proposal: Proposal | None) -> dict[str, Any] | None:
    if proposal is None:
        return None
    return {"file": proposal.knob.file, "key": proposal.knob.key, "old": proposal.old, "new": proposal.new}


def _payloads(reports: Sequence[HypothesisReport], choice: ParallelChoice) -> list[events.HypothesisOutcome]:
    """Each hypothesis in the decision's event: the knobs walk replays from these (``loop.knob_history``)."""
    out: list[events.HypothesisOutcome] = []
    for r in reports:
        reason = choice.reasons[r.index]
        item = events.HypothesisOutcome(
            index=r.index,
            outcome=OUTCOME_OF_REASON[reason],
            reason=reason,
            value=r.value,
            p_value=r.p_value,
            hypothesis=r.hypothesis,
        )
        if r.proposal is not None:
            item = item.model_copy(update={"proposal": events.KnobChange.model_validate(dict(r.proposal))})
        out.append(item)
    return out

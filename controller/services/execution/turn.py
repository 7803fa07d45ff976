"""One turn: propose → policy check → validation → measurement → decision → keep or restore (docs/agent.md).

The decisions themselves are pure functions (``controller.engine``, ``controller.stats``); the steps
are in ``steps``, the verdict in ``verdict`` and the keep in ``keep``; this module performs them in
order and stops at the first one that settles the turn. Whatever happens, the candidate checkout
ends exactly at the champion (restore) or at the new champion (keep) before the decision is written,
so a crash before the write re-runs the turn from a clean state.

What varies per round (a refinement round's rule, the feedback it quotes) is an argument of
``run_turn``, never state set on the run's context; the turns of a round are ``play.play_turns``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence

from controller.domain import events
from controller.domain.enums import OUTCOME_OF_REASON, EventKind, Reason, TurnPhase
from controller.domain.errors import UnconfirmedError
from controller.engine.candidate import HISTORY_LIMIT, FeedbackQuote, HistoryLine, render_candidate
from controller.engine.knobs import Proposal
from controller.services.execution import candidate_copy
from controller.services.execution.context import Detached, RoundRule, RunContext
from controller.services.execution.keep import champion_moved, champion_refs, commit_changed, settle_arms
from controller.services.execution.progress import TurnProgress
from controller.services.execution.steps import (
    check_policy,
    measured_tree_only,
    propose,
    scan_kept,
)
from controller.services.execution.verdict import evaluate
from controller.services.execution.work import EVENT_OF_OUTCOME, Settled, TurnStop, TurnWork
from controller.services.views.reads import turn_view
from controller.store.records import ChampionUpdate, RunRecord, Sample, TurnDecision, TurnRecord
from controller.workspace.overwrite import write_over


def _hypothesis_lines(ctx: RunContext, history: list[HistoryLine]) -> list[HistoryLine]:
    """A parallel turn's line becomes one line per hypothesis (ADR-0016), so the agent sees what was
    superseded too, not only what was kept."""
    out: list[HistoryLine] = []
    for line in history:
        found = ctx.ledger.list_hypotheses(ctx.run_id, line.turn)
        out += [
            HistoryLine(
                line.turn, f"[#{h.index}] {h.hypothesis or ''}", str(h.outcome), str(h.reason), h.value
            )
            for h in found
        ] or [line]
    return out


def write_candidate_file(
    ctx: RunContext,
    round_number: int,
    turns: Sequence[TurnRecord] | None = None,
    decided_total: int | None = None,
    run: RunRecord | None = None,
    feedback: Sequence[FeedbackQuote] = (),
) -> None:
    """CANDIDATE.md for the next turn: objective, scores, the bounded history and, in a refinement
    round, the ``feedback`` it addresses (docs/agent.md).

    ``turns`` (the most recent ones) and ``decided_total`` save queries when the caller has them."""
    if run is None or turns is None or decided_total is None:  # the caller's reads are current
        snapshot = ctx.ledger.turn_snapshot(ctx.run_id, last=HISTORY_LIMIT)
        run = run or snapshot.run
        turns = snapshot.recent if turns is None else turns
        decided_total = sum(snapshot.counts.decided.values()) if decided_total is None else decided_total
    listed = turns
    history = [
        HistoryLine(t.number, t.hypothesis, str(t.outcome), str(t.reason), t.value)
        for t in listed
        if t.phase == TurnPhase.DECIDED
    ]
    earlier = max(0, decided_total - len(history))
    if ctx.spec.broker.parallel > 1:
        history = _hypothesis_lines(ctx, history)
    text = render_candidate(
        objective=ctx.spec.objective,
        metric_name=ctx.spec.metric.name,
        direction=str(ctx.direction),
        champion_value=run.champion_value,
        baseline_value=run.baseline_value,
        history=history,
        earlier=earlier,
        feedback=tuple(feedback),
        round_number=round_number,
    )
    ctx.layout.agent_dir.mkdir(parents=True, exist_ok=True)
    write_over(ctx.layout.candidate_file, text.encode("utf-8"), flags=os.O_CREAT)
    ctx.layout.steer_file.touch()


def try_candidate(
    ctx: RunContext, work: TurnWork, proposal: Proposal | None, round_rule: RoundRule | None = None
) -> tuple[bool, str, Settled | None]:
    """A turn's steps up to its verdict: propose, policy check, measured tree, validation, measurement
    and the keep rule; (keep, detail, settled-if-not-kept). The candidate checkout is left as the
    agent made it: the caller keeps or restores it. Shared by a single turn and by each parallel
    hypothesis; Detached when a detach (not a cancel) cut it off."""
    ctx.executor.take_violations()  # anything older belongs to a decided turn or the baseline
    try:
        scan_kept(ctx, work)
        propose(ctx, work, proposal)
        check_policy(ctx, work)
        measured_tree_only(ctx, work)
        return evaluate(ctx, work, round_rule)
    except TurnStop as stop:
        if stop.settled.reason is Reason.CANCELLED and ctx.hooks.detach.is_set():
            # Detaching (SIGTERM), not cancelling: the turn stays undecided and is run again from
            # its start by whoever continues the run (open_context reconciles the checkouts).
            raise Detached(f"turn {work.number} cut off by a detach") from stop
        return False, "", stop.settled


def run_turn(
    ctx: RunContext,
    number: int,
    round_number: int,
    proposal: Proposal | None,
    turns: Sequence[TurnRecord] | None = None,
    decided_total: int | None = None,
    run: RunRecord | None = None,
    *,
    round_rule: RoundRule | None = None,
    feedback: Sequence[FeedbackQuote] = (),
) -> TurnRecord:
    """Run turn ``number`` from its start and write its decision exactly once. In a refinement round
    (``round_number`` >= 1) ``round_rule`` keeps a turn that holds the score and ``feedback`` is
    quoted in CANDIDATE.md."""
    started = (EventKind.TURN_STARTED, events.TurnStartedPayload(turn=number, round=round_number).dump())
    ctx.ledger.start_turn(ctx.run_id, number, round_number, event=started)
    # No restore here: every turn ends restored or kept, and open_context reconciles after a crash.
    write_candidate_file(ctx, round_number, turns, decided_total, run, feedback)
    progress = TurnProgress(ctx.ledger, ctx.run_id, number, round_number, ctx.spec.metric.name)
    work = TurnWork(number, round_number, progress=progress)
    try:
        keep, detail, settled = try_candidate(ctx, work, proposal, round_rule)
        record = _decide(ctx, work, progress, run, keep, detail, settled)
    except BaseException:
        progress.flush_after_error()  # and no timer left to write after the turn
        raise
    ctx.observer.turn_decided(turn_view(record, work.samples, work.reference).model_dump(mode="json"))
    return record


def _decide(
    ctx: RunContext,
    work: TurnWork,
    progress: TurnProgress,
    run: RunRecord | None,
    keep: bool,
    detail: str,
    settled: Settled | None,
) -> TurnRecord:
    """Keep (commit, settle the arms) or restore ``work``'s candidate, then write the decision once,
    after the turn's pending progress events."""
    number, round_number = work.number, work.round
    heads = dict(ctx.champion_heads)
    champion: ChampionUpdate | None = None
    if keep and work.value is not None:
        heads = {
            **ctx.champion_heads,
            **commit_changed(ctx, work, work.hypothesis, partial_refs(number), run),
        }
        candidate_copy.committed(ctx, work, heads)
        champion = ChampionUpdate(value=work.value, turn=number)
        reason = Reason.IMPROVED
    else:
        assert settled is not None
        reason, detail = settled.reason, settled.detail
        settle_arms(ctx, None)
    outcome = OUTCOME_OF_REASON[reason]
    decision = TurnDecision(
        outcome=outcome,
        reason=reason,
        value=work.value,
        p_value=work.p_value,
        hypothesis=work.hypothesis,
        changed_paths=work.changed_paths(ctx.layout.composite),
        commits={c: heads[c] for c in work.changed} if keep else {},
        cost_usd=work.cost_usd,
        tokens=work.tokens,
        duration_s=time.monotonic() - work.started,
        detail=ctx.executor.redact(detail),
        pairs=work.pairs,
        sequential_stop=work.stop,
    )
    payload = events.TurnDecidedPayload(
        turn=number,
        round=round_number,
        outcome=outcome,
        reason=reason,
        value=work.value,
        p_value=work.p_value,
        hypothesis=work.hypothesis,
        detail=decision.detail,
    )
    if work.stop is not None:
        payload = payload.model_copy(update={"pairs": work.pairs, "sequential_stop": work.stop})
    if work.proposal is not None:
        p = work.proposal
        change = events.KnobChange(file=p.knob.file, key=p.knob.key, old=p.old, new=p.new)
        payload = payload.model_copy(update={"proposal": change})
    kind = EVENT_OF_OUTCOME[outcome]
    try:
        record = ctx.ledger.decide_turn(
            ctx.run_id,
            number,
            decision,
            champion=champion,
            component_heads={c: heads[c] for c in work.changed} if keep else {},
            event=(kind, payload.dump()),
            samples=work.raw_samples,
            progress=progress.take(),  # the turn's progress events come before its decision
        )
    except UnconfirmedError as refused:  # a remote keep its confirmation did not reproduce (ADR-0043)
        # Only the HTTP ledger refuses so, and it sent the progress before the decision.
        keep = False
        settle_arms(ctx, None)
        record = _unconfirmed(ctx, number, decision, payload, work.raw_samples, str(refused))
    if keep:
        settle_arms(ctx, heads, work.changed)
        champion_moved(ctx, number, heads, work.raw_samples)
    return record


def _unconfirmed(
    ctx: RunContext,
    number: int,
    kept: TurnDecision,
    payload: events.TurnDecidedPayload,
    samples: Sequence[Sample],
    why: str,
) -> TurnRecord:
    """Settle a turn whose keep the controller refused as unconfirmed: rejected ``unconfirmed``, with
    the turn's own figures and samples and no commit, the detail saying what the confirmation found."""
    reason, outcome = Reason.UNCONFIRMED, OUTCOME_OF_REASON[Reason.UNCONFIRMED]
    detail = ctx.executor.redact(why)
    decision = dataclasses.replace(kept, outcome=outcome, reason=reason, commits={}, detail=detail)
    update = {"outcome": outcome, "reason": reason, "detail": detail}
    event = (EVENT_OF_OUTCOME[outcome], payload.model_copy(update=update).dump())
    return ctx.ledger.decide_turn(
        ctx.run_id, number, decision, champion=None, component_heads={}, event=event, samples=samples
    )


def partial_refs(turn: int) -> Callable[[str], dict[str, str]]:
    """The refs of turn ``turn``'s kept commit, as ``commit_changed`` asks for them."""
    return lambda sha: champion_refs(turn, sha)

"""A turn's parallel hypotheses, each in a pod of its own, followed by the controller (ADR-0018).

With ``broker.parallel = N`` on Kubernetes the controller runs the round's loop itself and, per turn,
launches its N hypotheses through ``ctx.hooks.hypothesis_pods`` (which hands each to its index's warm
pod, started once per round, ADR-0034). Each pod's ``crucible worker`` proposes
its one hypothesis (``CRUCIBLE_PARALLEL_INDEX``; the knobs proposal is computed here and sent), measures
it against the champion in its own pod, uploads its commits as a verified bundle and reports it
through the worker API (``report_hypothesis``). This module waits until every one of the N has a
report; a pod that ended without one (deleted, evicted, OOM-killed, past its deadline, its worker
failed) is reported here as a failed hypothesis naming why (``lost``, ``timeout`` past the deadline,
``cancelled`` when the run was), so a lost pod never blocks the turn.
The caller then decides the turn exactly as the local path does (``hypotheses._decide``).

Restarts: a turn found STARTED is not started again (that would forget the reports already in);
hypotheses already reported are not launched again, and a launch whose Job exists adopts it.
A cancel deletes every pod still running; a detach (SIGTERM) leaves them running for the resume.

Speculative turns (ADR-0051, knobs proposer only): with ``ahead`` (the next turn's proposals as the
walk gives them if this turn keeps nothing), a slot whose hypothesis reported while others still
measure is offered its hypothesis of the next turn at once, against the current champion, instead
of idling until the slowest one ends. Nothing of it is recorded: the next turn starts after this one
is decided, as ever, and its pod reports only once it sees that. Before a turn starts, every offer
or grant of it that the turn will not be played with is withdrawn (``HypothesisLauncher.withdraw``:
the champion moved, or a failure changed the walk's proposals), which stops the pods measuring them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from controller.brokers.base import HypothesisLauncher, HypothesisPod
from controller.domain.enums import EventKind, Reason, TurnPhase
from controller.domain.errors import ConflictError, NotFoundError
from controller.domain.jobs import RoundJob
from controller.engine.knobs import Proposal
from controller.services.execution.context import Detached, RunContext
from controller.store.records import HypothesisRecord, HypothesisReport, TurnRecord

POLL_S = 1.0  # between looks at the turn's reports and pods when no report woke the wait


def try_in_pods(
    ctx: RunContext,
    number: int,
    count: int,
    proposals: Sequence[Proposal] | None,
    started: tuple[EventKind, Mapping[str, Any]],
    turns: Sequence[TurnRecord] | None,
    ahead: Sequence[Proposal] = (),
) -> list[HypothesisReport]:
    """Start turn ``number`` (unless a resume finds it started), run its hypotheses in pods and
    return one report per hypothesis, by index, once every pod reported or ended. ``ahead``: the
    next turn's knobs proposals, offered to the slots that are free before this turn ends."""
    pods = ctx.hooks.hypothesis_pods
    assert pods is not None
    job = RoundJob(run_id=ctx.run_id, round=0, turns=1, first_turn=number, heads=dict(ctx.champion_heads))
    indices = range(count if proposals is None else len(proposals))
    wanted = {i: proposal_json(proposals[i]) if proposals is not None else None for i in indices}
    # Before the turn exists, so no hypothesis offered ahead of it that it is not played with reports.
    pods.withdraw(job, number, ctx.spec.broker.parallel, wanted)
    if not any(t.number == number and t.phase is TurnPhase.STARTED for t in turns or ()):
        ctx.ledger.start_turn(ctx.run_id, number, 0, event=started)
    reported = _reported(ctx, number)
    for index in indices:
        if index not in reported:  # the ones held ahead of the turn too: the offer, news in ``Slots``,
            pods.launch_hypothesis(job, number, index, wanted[index])  # answers their pods' long poll
    ctx.observer.step(f"turn {number}: {len(indices)} hypotheses in pods")
    _follow(ctx, pods, number, [i for i in indices if i not in reported], _Ahead(ctx, pods, number, ahead))
    return [report_of(h) for h in sorted(_reported(ctx, number).values(), key=lambda h: h.index)]


class _Ahead:
    """The next turn's hypotheses, offered slot by slot as this turn's reports free them (module
    docstring). Not once a report came without its proposal (a lost pod: the walk will propose that
    value again, so the next turn's proposals are not these), nor to the last slot to report (the
    decision follows at once), nor after a cancel."""

    def __init__(
        self, ctx: RunContext, pods: HypothesisLauncher, number: int, ahead: Sequence[Proposal]
    ) -> None:
        self.ctx, self.pods, self.turn = ctx, pods, number + 1
        self.proposals = list(ahead)
        self.offered: set[int] = set()
        self.off = not self.proposals

    def offer(self, reported: Mapping[int, HypothesisRecord], waiting: set[int]) -> None:
        if self.off or not waiting:
            return
        if any(h.proposal is None for h in reported.values()):
            self.off = True
            return
        ctx = self.ctx
        job = RoundJob(
            run_id=ctx.run_id, round=0, turns=1, first_turn=self.turn, heads=dict(ctx.champion_heads)
        )
        for index in sorted(set(reported) - self.offered):
            if index < len(self.proposals):
                self.pods.launch_hypothesis(job, self.turn, index, proposal_json(self.proposals[index]))
            self.offered.add(index)


def withdraw_ahead(ctx: RunContext) -> None:
    """The search is over: no hypothesis offered ahead for a turn after the last one stays live
    (its pod stops measuring it). A turn still STARTED keeps its own (a resume plays it)."""
    pods = ctx.hooks.hypothesis_pods
    if pods is None or ctx.spec.broker.parallel < 2:
        return
    counts = ctx.ledger.turn_snapshot(ctx.run_id, last=1).counts
    number = counts.highest + 1
    job = RoundJob(run_id=ctx.run_id, round=0, turns=1, first_turn=number, heads=dict(ctx.champion_heads))
    pods.withdraw(job, number, ctx.spec.broker.parallel, {})


def warm_pods(ctx: RunContext) -> None:
    """Start a fresh run's N pods before its baseline is measured (ADR-0040). With pods, the
    controller measures the baseline itself, and the pods' start-up (a process each importing the
    worker, then its first ask for a hypothesis: 10 s of the first turn measured for four at once on a
    loaded 2-core machine) runs beside it instead of in the first turn. Its first turn is turn 1."""
    pods = ctx.hooks.hypothesis_pods
    if pods is None or ctx.spec.broker.parallel < 2:
        return
    job = RoundJob(run_id=ctx.run_id, round=0, turns=1, first_turn=1, heads=dict(ctx.champion_heads))
    pods.warm(job, ctx.spec.broker.parallel)


def _follow(
    ctx: RunContext, pods: HypothesisLauncher, number: int, pending: list[int], ahead: _Ahead
) -> None:
    """Until each pending hypothesis reported or its pod ended (then reported failed here); the
    slots freed meanwhile take the next turn's hypotheses (``ahead``)."""
    waiting = set(pending)
    cancelled = False
    while waiting:
        if ctx.executor.cancel.is_set() and not cancelled:
            if ctx.hooks.detach.is_set():  # SIGTERM: the pods go on; a resume adopts them
                raise Detached(f"run {ctx.run_id} detached from this process; it goes on when resumed")
            for index in sorted(waiting):
                pods.cancel_hypothesis(ctx.run_id, 0, number, index)
            cancelled = ahead.off = True
        reported = _reported(ctx, number)
        for index in sorted(waiting):
            if index in reported:
                waiting.discard(index)
                continue
            state = _state(pods, ctx.run_id, number, index)
            if not state.finished:
                continue
            if index not in _reported(ctx, number):  # a pod reports before it exits
                _report_lost(ctx, number, index, state, cancelled)
            waiting.discard(index)
        if waiting:
            if not ahead.off:
                ahead.offer(_reported(ctx, number), waiting)
            pods.wait_for_reports(POLL_S)


def _state(pods: HypothesisLauncher, run_id: str, number: int, index: int) -> HypothesisPod:
    try:
        return pods.hypothesis_status(run_id, 0, number, index)
    except NotFoundError as exc:  # launched, and its Job is gone: someone deleted it
        return HypothesisPod(True, f"job_deleted: {exc}")


def _report_lost(ctx: RunContext, number: int, index: int, state: HypothesisPod, cancelled: bool) -> None:
    """A hypothesis whose pod ended without reporting: failed, naming the pod's reason."""
    if state.error is None:
        error = "no_outcome: its pod succeeded but the controller received no report from it"
    else:
        error = state.error
    if cancelled:
        reason, detail = Reason.CANCELLED, f"cancelled with the run ({error})"
    elif error.startswith("deadline_exceeded"):
        reason, detail = Reason.TIMEOUT, error
    else:
        reason, detail = Reason.LOST, f"its pod ended without a report: {error}"
    with contextlib.suppress(ConflictError):  # its own report arrived after all
        ctx.ledger.report_hypothesis(ctx.run_id, number, HypothesisReport(index, reason, detail=detail))


def _reported(ctx: RunContext, number: int) -> dict[int, HypothesisRecord]:
    return {h.index: h for h in ctx.ledger.list_hypotheses(ctx.run_id, number)}


def report_of(h: HypothesisRecord) -> HypothesisReport:
    """A stored report as the choice reads it."""
    return HypothesisReport(
        index=h.index,
        reason=h.reason,
        value=h.value,
        reference_value=h.reference_value,
        delta=h.delta,
        p_value=h.p_value,
        hypothesis=h.hypothesis,
        proposal=h.proposal,
        changed_paths=h.changed_paths,
        commits=h.commits,
        samples=h.samples,
        cost_usd=h.cost_usd,
        tokens=h.tokens,
        duration_s=h.duration_s,
        detail=h.detail,
    )


def proposal_json(proposal: Proposal) -> dict[str, Any]:
    """A knobs proposal as its hypothesis pod receives it."""
    knob = proposal.knob
    return {
        "file": knob.file,
        "key": knob.key,
        "old": proposal.old,
        "new": proposal.new,
        "hypothesis": proposal.hypothesis,
    }

"""The run loop: baseline, then round 0's search, one turn after another (``play.play_turns`` with the
``Search`` planner) until a budget or a failure stops the run.

The counters the stop rules need (turns done, consecutive failures, cost) are read from the store when
the search starts (or resumes) and then carried forward from each turn's decision as the store wrote
it (``after_decision``, ADR-0050): nothing but this loop changes them while it holds the run, so the
figures are those a read would give, and an interrupted run and a resumed one behave identically. A
cancel reaches the loop through its lease's renewal (``liveness``), not through these reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from controller.domain import events
from controller.domain.enums import (
    FAILURE_REASONS,
    EventKind,
    Outcome,
    RunPhase,
    RunStatus,
    SampleArm,
    StopReason,
    TurnPhase,
    status_for_stop,
)
from controller.engine.candidate import HISTORY_LIMIT
from controller.engine.knobs import Knob, KnobProposer, Proposal, current_values
from controller.engine.stopping import Budgets, Progress, check_stop, explain_stop
from controller.services.execution.baseline import run_baseline
from controller.services.execution.context import Detached, RunContext
from controller.services.execution.execute import disk_usage
from controller.services.execution.hypothesis_pods import warm_pods, withdraw_ahead
from controller.services.execution.keep import notify_champion
from controller.services.execution.liveness import Heartbeat
from controller.services.execution.play import TurnPlan, play_turns
from controller.store.ports import RunLeases
from controller.store.records import RunRecord, TurnCounts, TurnRecord, TurnSnapshot
from controller.workspace.sandboxpaths import sandbox_hides


@dataclass(frozen=True)
class LoopResult:
    status: RunStatus
    stop_reason: StopReason
    message: str


def budgets_of(ctx: RunContext) -> Budgets:
    b = ctx.spec.budget
    run = ctx.ledger.get_run(ctx.run_id)
    return Budgets(
        turns=run.turns_planned,
        wall_clock_s=b.wall_clock,
        cost_usd=b.cost_usd,
        tokens=b.tokens,
        disk_bytes=b.disk,
        max_consecutive_failures=b.max_consecutive_failures,
        target=b.target,
    )


def progress_of(
    ctx: RunContext, counts: TurnCounts, recent: list[TurnRecord], run: RunRecord | None = None
) -> Progress:
    """Counters for the stop rules; ``recent`` must reach back to the start of the current failure
    streak, or hold at least max_consecutive_failures turns."""
    run = run or ctx.ledger.get_run(ctx.run_id)
    failures = 0
    for t in reversed([t for t in recent if t.phase == TurnPhase.DECIDED]):
        if t.reason in FAILURE_REASONS:
            failures += 1
        else:
            break
    elapsed = (datetime.now(UTC) - run.created_at).total_seconds()
    disk = disk_usage(ctx.layout.root) if ctx.spec.budget.disk is not None else None
    return Progress(
        turns_done=counts.decided.get(0, 0),
        elapsed_s=elapsed,
        cost_usd=run.cost_usd,
        tokens=run.tokens,
        disk_bytes=disk,
        consecutive_failures=failures,
        champion_value=run.champion_value,
        direction=ctx.direction,
    )


def _streak_may_go_on(recent: Sequence[TurnRecord], window: int, bound: int) -> bool:
    """Whether the failure streak may reach back past the ``window`` turns read and still matter:
    every one of them is a failure, the window is full, and the bound lies beyond it."""
    decided = [t for t in recent if t.phase == TurnPhase.DECIDED]
    return (
        len(recent) >= window and bound > len(decided) and all(t.reason in FAILURE_REASONS for t in decided)
    )


def after_decision(snapshot: TurnSnapshot, record: TurnRecord, window: int) -> TurnSnapshot:
    """``snapshot`` as the store holds it once the turn ``record`` (the decided turn of round 0 as
    ``decide_turn`` returned it) was decided: one more decided turn, none cut off, the turn last of the
    ``window`` most recent ones, its cost and tokens added to the run's, and the run's champion when
    the turn was kept (both kinds of turn give the store a champion exactly then, with the turn's
    value). The lease fields and ``updated_at`` are left as they were read (the loop reads neither).
    tests/rounds check it against ``turn_snapshot`` after every turn of a run."""
    counts = snapshot.counts
    decided = dict(counts.decided)
    decided[record.round] = decided.get(record.round, 0) + 1
    started = tuple(n for n in counts.started if n != record.number)
    recent = sorted(
        [t for t in snapshot.recent if t.number != record.number] + [record], key=lambda t: t.number
    )
    run = replace(
        snapshot.run,
        cost_usd=snapshot.run.cost_usd + record.cost_usd,
        tokens=snapshot.run.tokens + record.tokens,
    )
    if record.outcome is Outcome.ACCEPTED and record.value is not None:
        run = replace(run, champion_value=record.value, champion_turn=record.number)
    return TurnSnapshot(
        run, TurnCounts(decided, max(counts.highest, record.number), started), tuple(recent[-window:])
    )


def knob_proposer(ctx: RunContext) -> tuple[KnobProposer, list[Knob]] | None:
    agent = ctx.spec.agent
    if agent.builtin != "knobs":
        return None
    knobs = [Knob(k.file, k.key, tuple(k.candidates())) for k in agent.knobs]
    return KnobProposer(knobs, agent.seed), knobs


def knob_history(
    ctx: RunContext, knobs: list[Knob], known: KnobHistory | None = None
) -> list[tuple[Proposal, bool]]:
    """Earlier proposals with whether they were kept, rebuilt from the event stream. With ``known``
    (kept by the loop between turns) only the events after the last one read are read, so a turn of
    a long run does not re-read every earlier decision."""
    known = known if known is not None else KnobHistory()
    by_id = {k.ident: k for k in knobs}
    decided = {EventKind.ACCEPTED, EventKind.REJECTED, EventKind.FAILED, EventKind.NO_CHANGE}
    for event in ctx.ledger.list_events(ctx.run_id, after_id=known.after_id, kinds=decided):
        known.after_id = max(known.after_id, event.id)
        turn = events.read(events.TurnDecidedPayload, event.payload)
        if turn is None:  # a malformed payload proposes nothing to replay
            continue
        # A parallel turn (ADR-0016) lists each hypothesis with its own proposal; one was kept at most.
        items: list[events.TurnDecidedPayload | events.HypothesisOutcome] = (
            list(turn.hypotheses) if turn.hypotheses is not None else [turn]
        )
        for item in items:
            p = item.proposal
            knob = by_id.get((p.file, p.key)) if p is not None else None
            if knob is None or p is None:
                continue
            proposal = Proposal(knob, p.old, p.new, item.hypothesis or "")
            known.history.append((proposal, item.outcome is Outcome.ACCEPTED))
    return list(known.history)


@dataclass
class KnobHistory:
    """The knobs walk's history read so far, and the id of the last event read for it."""

    after_id: int = 0
    history: list[tuple[Proposal, bool]] = field(default_factory=list)


def finish(ctx: RunContext, reason: StopReason, message: str) -> LoopResult:
    """Record the run's stop; LeaseLostError (nothing written) if another process took it over, and
    Detached (nothing written) for a cancel that only detaches this process (``ctx.hooks.detach``)."""
    if ctx.hooks.lease is not None:
        ctx.hooks.lease.check()
    if reason is StopReason.CANCELLED and ctx.hooks.detach.is_set():
        raise Detached(f"run {ctx.run_id} detached from this process; it goes on when resumed")
    status = status_for_stop(reason)
    if ctx.lease_elsewhere:  # a worker: the controller holding the lease records the stop (ADR-0031)
        return LoopResult(status, reason, message)
    if reason not in (StopReason.BASELINE_FAILED, StopReason.CANCELLED, StopReason.ERROR):
        notify_champion(ctx)  # publishing is idempotent: this repairs anything a crash or outage left
    ctx.ledger.set_run_status(ctx.run_id, status, stop_reason=reason, stop_message=message)
    completed = events.CompletedPayload(status=status, stop_reason=reason, message=message)
    ctx.ledger.append_event(ctx.run_id, EventKind.COMPLETED, completed.dump())
    return LoopResult(status, reason, message)


# Stops that end the search of round 0 but, with --watch-feedback, not the run: rounds follow.
SEARCH_DONE = frozenset({StopReason.MAX_TURNS, StopReason.EXHAUSTED, StopReason.TARGET_REACHED})


Handover = Callable[[RunContext, LoopResult], LoopResult]
"""What takes over when round 0's search is done (the feedback watch); it decides the final stop."""


def run_loop(ctx: RunContext, *, then: Handover | None = None, leases: RunLeases | None = None) -> LoopResult:
    """Drive a pending or resumed run to its stop, holding its lease (``liveness.Heartbeat``) unless
    the caller already holds it (``ctx.hooks.lease``, or ``ctx.lease_elsewhere``); LeaseHeldError if
    a live process drives it. A lease claimed here is handed to the rounds (``RunContext.with_lease``).
    ``leases``: where it claims one (the round environment holds no store, only the ledger); the
    run service always hands its rounds the lease it holds, so only a caller driving a run by hand
    (a test) gives it; ValueError when neither a lease nor ``leases`` is given.

    ``then`` (the feedback watch) takes over when round 0's search is done, or at once for a run
    resumed after its search (watching, or in a round); it decides the final stop."""
    if ctx.hooks.lease is not None or ctx.lease_elsewhere:
        return _run_held(ctx, then)
    if leases is None:
        raise ValueError(f"run_loop of run {ctx.run_id} holds no lease and was given no leases to claim one")
    with heartbeat_for(ctx, leases) as beat:
        return _run_held(ctx.with_lease(beat), then)


def heartbeat_for(ctx: RunContext, leases: RunLeases) -> Heartbeat:
    """The lease keeper of ``ctx``'s run in ``leases`` (not yet started): a cancel request wakes the run."""
    return Heartbeat(
        leases,
        ctx.run_id,
        cancel=ctx.executor.cancel,
        ttl_s=ctx.settings.lease_ttl_s,
        on_cancel=ctx.hooks.wakeup.set,
    )


def _run_held(ctx: RunContext, then: Handover | None) -> LoopResult:
    run = ctx.ledger.get_run(ctx.run_id)
    if run.status != RunStatus.RUNNING and not ctx.lease_elsewhere:
        ctx.ledger.set_run_status(ctx.run_id, RunStatus.RUNNING)
    budgets = budgets_of(ctx)
    try:
        result = _drive(ctx, budgets, hand_over=then is not None)
        if then is not None and result.status == RunStatus.RUNNING:
            return then(ctx, result)
        return result
    except KeyboardInterrupt:
        ctx.executor.cancel.set()
        return finish(ctx, StopReason.CANCELLED, "stopped: cancelled by the user")


def _drive(ctx: RunContext, budgets: Budgets, *, hand_over: bool = False) -> LoopResult:
    run = ctx.ledger.get_run(ctx.run_id)
    if run.baseline_value is None:
        warm_pods(ctx)  # a parallel round's pods start up while the baseline is measured
        failure = run_baseline(ctx)
        if failure is not None:
            if ctx.executor.cancel.is_set():
                return finish(ctx, StopReason.CANCELLED, "stopped: cancelled by the user")
            message = f"stopped: the baseline failed: {ctx.executor.redact(failure)}"
            return finish(ctx, StopReason.BASELINE_FAILED, message)
    elif ctx.champion_arm is None:
        turn = run.champion_turn or 0
        arm = SampleArm.BASELINE if turn == 0 else SampleArm.CANDIDATE
        ctx.champion.measured(ctx.arm_from_store(turn, arm))
    search = Search(ctx, budgets, hand_over=hand_over)
    play_turns(ctx, 0, search)
    # No hypothesis offered ahead outlives the search (ADR-0051). A detach or a lost lease leaves
    # them for whoever continues the run, which withdraws what it does not play.
    withdraw_ahead(ctx)
    assert search.stop is not None  # the search plays turns until it stops
    return search.stop


def _speculates(ctx: RunContext, budgets: Budgets, progress: Progress) -> bool:
    """Whether the next turn's hypotheses may start before this one is decided (ADR-0051): N > 1 in
    pods that speculate, and the turn budget leaves a turn after this one. Only the knobs proposer
    asks (its proposals are the controller's and checked before the next turn starts; an agent's
    would be made from a history missing this turn)."""
    pods = ctx.hooks.hypothesis_pods
    return (
        ctx.spec.broker.parallel > 1
        and pods is not None
        and pods.speculative
        and progress.turns_done + 2 <= budgets.turns
    )


class Search:
    """Round 0's planner (``play.play_turns``): before each turn the counters are re-derived from the
    record and the stop rules applied; the turn is of ``broker.parallel`` hypotheses, with the knobs'
    next proposals for a knobs agent. ``stop`` is the round's result once it is over: the run's stop
    (written by ``finish``), or, with ``hand_over``, the search's end that the feedback watch takes."""

    def __init__(self, ctx: RunContext, budgets: Budgets, *, hand_over: bool) -> None:
        self.budgets, self.hand_over = budgets, hand_over
        self.proposer = knob_proposer(ctx)
        self.known_knobs = KnobHistory()  # the knobs walk so far: each turn reads only new decisions
        # What the store holds: aggregates plus the last few turns, read when the search starts and
        # carried forward from each decision (``after_decision``), however long the run and whatever
        # max_consecutive_failures is (a longer read only while a longer failure streak runs).
        self.window = HISTORY_LIMIT + 1
        self.known: TurnSnapshot | None = None
        self.stop: LoopResult | None = None

    def next_turn(self, ctx: RunContext) -> TurnPlan | None:
        budgets = self.budgets
        if self.known is None:
            self.known = ctx.ledger.turn_snapshot(ctx.run_id, last=self.window)
        snapshot = self.known
        if _streak_may_go_on(snapshot.recent, self.window, budgets.max_consecutive_failures):
            snapshot = ctx.ledger.turn_snapshot(ctx.run_id, last=budgets.max_consecutive_failures + 1)
        counts, recent, latest = snapshot.counts, list(snapshot.recent), snapshot.run
        progress = progress_of(ctx, counts, recent, latest)
        if ctx.executor.cancel.is_set():
            self.stop = finish(
                ctx, StopReason.CANCELLED, explain_stop(StopReason.CANCELLED, budgets, progress)
            )
            return None
        reason = check_stop(budgets, progress)
        if reason is None and self.hand_over and latest.phase is not RunPhase.SEARCH:
            # Resumed after round 0 (watching, or in a round): the watch picks up where it was.
            self.stop = LoopResult(
                RunStatus.RUNNING, StopReason.MAX_TURNS, "round 0 was over before the resume"
            )
            return None
        if reason is not None:
            self.stop = self._end(ctx, reason, explain_stop(reason, budgets, progress))
            return None
        parallel = ctx.spec.broker.parallel
        proposals: list[Proposal] | None = None
        ahead: list[Proposal] = []
        if self.proposer is not None:
            knobs_proposer, knobs = self.proposer
            current = current_values(knobs, ctx.layout.workspace_root("champion"))
            history = knob_history(ctx, knobs, self.known_knobs)
            # The walk's next N after this turn's N are the next turn's if this one keeps nothing.
            wanted = parallel * (2 if _speculates(ctx, budgets, progress) else 1)
            found = knobs_proposer.next_proposals(current, history, wanted)
            proposals, ahead = found[:parallel], found[parallel:]
            if not proposals:
                exhausted = explain_stop(StopReason.EXHAUSTED, budgets, progress)
                self.stop = self._end(ctx, StopReason.EXHAUSTED, exhausted)
                return None
        number = counts.started[0] if counts.started else counts.highest + 1
        decided = sum(counts.decided.values())
        return TurnPlan(number, proposals, parallel, recent, decided, latest, ahead)

    def decided(self, ctx: RunContext, record: TurnRecord) -> bool:
        if self.known is not None:
            self.known = after_decision(self.known, record, self.window)
        if sandbox_hides(problem := ctx.executor.last_start_problem):
            # The sandbox hides what a command needs: every later turn would fail the same way.
            cause = ctx.executor.redact(problem or "")
            message = f"stopped: turn {record.number}: a command cannot start: {cause}"
            self.stop = finish(ctx, StopReason.ERROR, message)
            return True
        return False

    def _end(self, ctx: RunContext, reason: StopReason, message: str) -> LoopResult:
        """The search is over for ``reason``: the run stops, unless the watch takes over after it."""
        if self.hand_over and reason in SEARCH_DONE:
            return LoopResult(RunStatus.RUNNING, reason, message)
        return finish(ctx, reason, message)

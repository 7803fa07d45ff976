"""Round jobs for the broker, and the local runner that executes them (ADR-0003).

The run service describes each round as a ``RoundJob`` and launches it through the broker; the
``LocalRounds`` runner here is what the local broker is given (dependency inversion: the broker sits
below ``services`` and cannot import this). It executes a round with the code the loop always used:
round 0 is ``run_loop``'s search, a refinement round is ``run_round`` over its feedback batch. The
live ``RunContext`` of each run stays in this process, registered by the service before launching.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from controller.brokers.base import RoundOutcome
from controller.domain.enums import RunStatus, StopReason
from controller.domain.errors import NotFoundError, RetryLaterError
from controller.domain.jobs import HoldRule, RoundJob
from controller.engine.candidate import clean_feedback
from controller.services.execution.context import Detached, RunContext
from controller.services.execution.loop import LoopResult, run_loop
from controller.services.feedback.rounds import Batch, first_published_score, run_round
from controller.store.ports import RefinementRecords, RoundJobReads, TurnReads


def search_job(ctx: RunContext, reads: TurnReads, *, attempt: int = 0) -> RoundJob:
    """Round 0 of a run (new or resumed) as a job: the turns its budget still allows (its turns read
    from ``reads``). ``attempt``: which drive of the run this is (``RoundJob.attempt``)."""
    snapshot = reads.turn_snapshot(ctx.run_id, last=1)
    done = snapshot.counts.decided.get(0, 0)
    first = snapshot.counts.started[0] if snapshot.counts.started else snapshot.counts.highest + 1
    return RoundJob(
        run_id=ctx.run_id,
        round=0,
        turns=max(0, snapshot.run.turns_planned - done),
        first_turn=first,
        heads=ctx.champion_heads,
        attempt=attempt,
    )


def refinement_job(
    ctx: RunContext, reads: RoundJobReads, batch: Batch, *, attempt: int = 0, number: int | None = None
) -> RoundJob:
    """The next refinement round of a run, steered by ``batch``; ``number``: the round, when it was
    begun already (``rounds.begin_round``, a remote round), else the one after the run's last."""
    spec = ctx.spec
    assert spec.feedback is not None
    first = first_published_score(ctx, reads)
    hold = None
    if first is not None:
        tolerance = spec.feedback.hold
        hold = HoldRule(tolerance=tolerance.value, relative=tolerance.relative, first_published=first)
    steer = "\n\n".join(
        f"@{item.author}"
        + (f" on {item.path}:{item.line}" if item.path else "")
        + ":\n"
        + "\n".join(f"> {line}" for line in clean_feedback(item.body).splitlines())
        for item in batch.items
        if item.body.strip()
    )
    return RoundJob(
        run_id=ctx.run_id,
        round=number if number is not None else reads.get_run(ctx.run_id).round + 1,
        turns=spec.feedback.turns,
        first_turn=reads.turn_counts(ctx.run_id).highest + 1,
        heads=ctx.champion_heads,
        steer=steer,
        feedback_ids=tuple(item.id for item in batch.items),
        hold=hold,
        attempt=attempt,
    )


def _stay(ctx: RunContext, searched: LoopResult) -> LoopResult:
    """The hand-over of round 0 to the feedback watch: the service watches, not the round."""
    return searched


class EitherEvent(threading.Event):
    """Set when it, or any event it links, is set (the executor only asks ``is_set`` and sets it)."""

    def __init__(self, *links: threading.Event) -> None:
        super().__init__()
        self._links = links

    def is_set(self) -> bool:
        return super().is_set() or any(link.is_set() for link in self._links)

    def set(self) -> None:
        super().set()
        for link in self._links:
            link.set()


@dataclass
class _Live:
    ctx: RunContext
    hand_over: bool
    batches: dict[int, Batch] = field(default_factory=dict)
    # Why a busy or unreachable database cut the last round off (the service hands the run back or
    # retries; the round's broker report only says FAILED). Text: the error's frames hold connections.
    busy: str | None = None


class LocalRounds:
    """Executes rounds of runs whose context lives in this process (the local broker's runner).
    ``records``: where a refinement round starts and ends in the record (the composition root hands
    the store; the round environment holds only the ledger)."""

    def __init__(self, records: RefinementRecords) -> None:
        self.records = records
        self._live: dict[str, _Live] = {}
        self._lock = threading.Lock()

    def register(self, ctx: RunContext, *, hand_over: bool) -> None:
        """Make ``ctx`` the run's live context; ``hand_over``: round 0 stops at the search's end
        (budget, exhaustion, target) without finishing the run, so the feedback watch can follow."""
        with self._lock:
            self._live[ctx.run_id] = _Live(ctx, hand_over)

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._live.pop(run_id, None)

    def context(self, run_id: str) -> RunContext | None:
        live = self._live.get(run_id)
        return live.ctx if live else None

    def busy(self, run_id: str) -> str | None:
        """Why a busy database cut the run's last round off, once (None: it was not that)."""
        live = self._live.get(run_id)
        if live is None:
            return None
        busy, live.busy = live.busy, None
        return busy

    def expect_batch(self, job: RoundJob, batch: Batch) -> None:
        """The feedback ``job`` (a refinement round about to be launched) addresses."""
        self._get(job.run_id).batches[job.round] = batch

    def __call__(self, job: RoundJob, cancel: threading.Event) -> RoundOutcome:
        live = self._get(job.run_id)
        ctx = live.ctx
        run_cancel = ctx.executor.cancel
        # For the round, the executor (its commands, the loop's checks) obeys both the run's event
        # (Ctrl-C) and the broker's (a cancel of the round); a cancelled round cancels the run.
        ctx.executor.cancel = EitherEvent(run_cancel, cancel)
        try:
            if job.round == 0:
                result = run_loop(ctx, then=_stay if live.hand_over else None)
                return RoundOutcome(result.status, result.stop_reason, result.message)
            batch = live.batches.pop(job.round)
            kept = run_round(ctx, self.records, batch)
            if kept is None:  # a cancel cut the round off; the run stays in it for a resume
                return RoundOutcome(RunStatus.CANCELLED, StopReason.CANCELLED, f"round {job.round} cut off")
            return RoundOutcome(RunStatus.RUNNING, None, f"round {job.round} done", kept=kept)
        except Detached as detached:
            # SIGTERM: this process lets go of the run (the service sees ctx.hooks.detach and says so).
            return RoundOutcome(RunStatus.RUNNING, None, str(detached))
        except RetryLaterError as error:
            live.busy = str(error)  # the round fails; the service tells a busy database from a failure
            raise
        finally:
            ctx.executor.cancel = run_cancel
            if cancel.is_set():
                run_cancel.set()

    def _get(self, run_id: str) -> _Live:
        live = self._live.get(run_id)
        if live is None:
            raise NotFoundError(f"run {run_id} has no live context in this process")
        return live

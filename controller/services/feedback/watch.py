"""``--watch-feedback``: after round 0, keep the run alive for refinement rounds until the PRs close.

Feedback arrives two ways and lands in the same durable, de-duplicated store: webhook deliveries
(stored by the API edge) and a poller reading repository-wide comment lists with ETags, so a lost
webhook delays feedback by at most one poll interval. Both are the process's ``FeedbackHub``'s
business (one poller per forge client, shared by every watching run, routing by PR); the watch of
one run subscribes to it, gives each new item of its run a trust verdict, and batches trusted items
into rounds (``rounds.py``). The run's phase says where it is: a run resumed while watching goes on
watching, one resumed in a round finishes that round first.

Two ways to wait. ``crucible loop`` (one run) sleeps in the watch until news wakes it or the next look
is due. ``crucible serve`` (``Watch.park``) does not wait here at all: when a pass finds nothing to
do, the watch raises ``Parked`` with when to look again; its driver lets go of the thread and the
context, and runs the next pass (``keep_watching``) when the hub, a steer, a cancel or that timer
wakes the run (ADR-0020).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from controller.domain.enums import RunPhase, StopReason
from controller.engine.candidate import clean_feedback
from controller.forge.base import FeedbackEvent, Forge
from controller.services.execution.context import Parked, RunContext
from controller.services.execution.loop import LoopResult, budgets_of, finish
from controller.services.feedback.hub import FeedbackHub
from controller.services.feedback.rounds import (
    Batch,
    current_versions,
    next_ready_in,
    ready_batches,
    resume_round,
    run_round,
)
from controller.services.feedback.trust import TrustPolicy
from controller.store.ports import PullRecords, WatchRecords
from controller.store.records import FeedbackRecord, FeedbackSource

MIN_PAUSE = 0.05  # seconds: a due poll runs on the next pass, without spinning
STEER_TRUST = "an operator's steer, sent with the API's write token"


@dataclass
class Watch:
    """Everything the watch needs besides the run context; built once at the edge. ``records``: the
    run's record as the watch reads and writes it (the round environment holds no store)."""

    forge: Forge
    own_logins: Collection[str]
    records: WatchRecords
    poll: bool = True  # False only to prove the webhook path alone delivers (tests)
    live_steer: bool = False  # append feedback arriving mid-round to CRUCIBLE_STEER_FILE
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    sleep_until_woken: Callable[[threading.Event, float], bool] = lambda event, timeout: event.wait(timeout)
    # How a refinement round is run: the run service launches it through the broker (ADR-0003);
    # None: here, in the watch's thread (``rounds.run_round`` over ``records``).
    round_runner: Callable[[RunContext, Batch], bool | None] | None = None
    # How a round a crash or a cancel cut off is continued (the run service: through the broker too;
    # None: here, ``rounds.resume_round``).
    round_resumer: Callable[[RunContext], bool | None] | None = None
    # The process's shared intake (``hub``); None: a private one for this run alone.
    hub: FeedbackHub | None = None
    # Raise ``Parked`` instead of waiting when a pass finds nothing to do (the server; needs ``hub``
    # pumped by its own thread, since nobody waits in the watch to pump it).
    park: bool = False

    def refine(self, ctx: RunContext, batch: Batch) -> bool | None:
        """Run one refinement round for ``batch`` (``round_runner``, or here)."""
        if self.round_runner is not None:
            return self.round_runner(ctx, batch)
        return run_round(ctx, self.records, batch)

    def resume(self, ctx: RunContext) -> bool | None:
        """Continue the round a crash or a cancel cut off (``round_resumer``, or here)."""
        if self.round_resumer is not None:
            return self.round_resumer(ctx)
        return resume_round(ctx, self.records)


def _event_of(item: FeedbackRecord, repo: str) -> FeedbackEvent:
    return FeedbackEvent(
        repo=repo,
        pr_number=item.pr_number,
        source=str(item.source),
        external_id=item.external_id,
        review_id=item.review_id,
        author=item.author,
        author_type=item.author_type,
        association=item.association,
        body=item.body,
        path=item.path,
        line=item.line,
        action=item.action,
        updated_at=item.updated_at,
        url=item.url,
    )


def _judge(ctx: RunContext, records: WatchRecords, trust: TrustPolicy) -> None:
    """Give every undecided item its trust verdict; only accepted ones can steer a round."""
    repos = {p.component: p.repo for p in records.list_pulls(ctx.run_id)}
    for item in records.list_feedback(ctx.run_id, undecided_only=True):
        if item.source is FeedbackSource.STEER:  # stored only through the API's write token
            records.set_feedback_verdict(item.id, trusted=True, verdict="accepted", reason=STEER_TRUST)
            continue
        repo = repos.get(item.component)
        if repo is None:
            continue
        trusted, reason = trust.decide(_event_of(item, repo))
        if trusted and item.action in ("deleted", "dismissed"):
            trusted, reason = False, f"the {item.source} was {item.action}"
        if trusted and not item.body.strip() and item.source is FeedbackSource.REVIEW:
            trusted, reason = False, "an empty review body (its inline comments carry the feedback)"
        verdict = "accepted" if trusted else "rejected"
        # The verdict lives on the item (add_feedback already wrote its feedback_received event).
        records.set_feedback_verdict(item.id, trusted=trusted, verdict=verdict, reason=reason)


def _closed(ctx: RunContext, records: PullRecords) -> bool:
    """Whether every PR of the run is closed, as webhooks and the poller recorded it (no forge
    call: with many PRs a read per PR per loop would spend the quota the poller saves)."""
    pulls = records.list_pulls(ctx.run_id)
    return bool(pulls) and all(p.state == "closed" for p in pulls)


def watch_feedback(ctx: RunContext, searched: LoopResult, watch: Watch) -> LoopResult:
    """Take over after round 0 (``searched`` says why its search ended) until a stop."""
    pulls = watch.records.list_pulls(ctx.run_id)
    if not pulls:
        return finish(ctx, searched.stop_reason, searched.message + "; no pull request to watch")
    if watch.records.get_run(ctx.run_id).phase is not RunPhase.ROUND:
        watch.records.set_phase(ctx.run_id, RunPhase.WATCHING)
    return keep_watching(ctx, watch)


def keep_watching(ctx: RunContext, watch: Watch) -> LoopResult:
    """Watch a run already past its search (its phase WATCHING, or ROUND when a crash, a cancel or a
    busy database cut a round off: that round is finished first) until a stop; with ``watch.park``,
    ``Parked`` when a pass finds nothing to do (the run stays subscribed to the hub)."""
    feedback = ctx.spec.feedback
    assert feedback is not None
    trust = TrustPolicy(watch.forge, trusted_bots=feedback.trusted_bots, own_logins=watch.own_logins)
    if watch.records.get_run(ctx.run_id).phase is RunPhase.ROUND:
        watch.resume(ctx)  # the budget check below sees a cancel
    hub = watch.hub or FeedbackHub(
        watch.records, own_logins=watch.own_logins, clock=lambda: watch.clock().timestamp()
    )
    # The hub reads the run's PRs from the store before every poll (a round may open one more).
    hub.subscribe(
        ctx.run_id, watch.forge, interval_s=feedback.poll_interval, wakeup=ctx.hooks.wakeup, poll=watch.poll
    )
    hub.listen_access(trust.forget)  # a member/repository webhook drops cached permissions
    parked = False
    try:
        return _watch(ctx, watch, hub, trust)
    except Parked:
        parked = True  # still subscribed: the hub wakes it
        raise
    finally:
        hub.unlisten_access(trust.forget)
        if not parked:
            hub.unsubscribe(ctx.run_id)


def _watch(ctx: RunContext, watch: Watch, hub: FeedbackHub, trust: TrustPolicy) -> LoopResult:
    feedback = ctx.spec.feedback
    assert feedback is not None
    while True:
        # Cleared before looking, so whatever arrives from here on wakes the wait below.
        ctx.hooks.wakeup.clear()
        stop = _budget_stop(ctx, watch, feedback.max_rounds)
        if stop is not None:
            return finish(ctx, *stop)
        _collect(ctx, watch.records, hub, trust)
        if _closed(ctx, watch.records):
            return finish(ctx, StopReason.FEEDBACK_CLOSED, "stopped: the pull requests were closed")
        waiting = current_versions(watch.records.list_feedback(ctx.run_id))
        batches = ready_batches(waiting, watch.clock(), feedback.quiet_window)
        if batches:
            if watch.live_steer:
                with _LiveSteer(ctx, watch.records, hub, trust, batches[0].component, feedback.poll_interval):
                    watch.refine(ctx, batches[0])
            else:
                watch.refine(ctx, batches[0])
            continue
        if watch.park:
            if ctx.hooks.wakeup.is_set():
                continue  # news arrived during this pass
            raise Parked(ctx.run_id, _next_look(ctx, watch, waiting, feedback.quiet_window))
        # News for the run (a webhook, a poll), a cancel or a shutdown wakes the watch early
        # (ctx.hooks.wakeup); otherwise look again when the next poll is due, but at least every poll
        # interval (quiet windows and budgets run out meanwhile).
        pause = hub.next_poll_in() if watch.poll else feedback.poll_interval
        watch.sleep_until_woken(ctx.hooks.wakeup, max(MIN_PAUSE, min(feedback.poll_interval, pause)))


def _next_look(
    ctx: RunContext, watch: Watch, waiting: list[FeedbackRecord], quiet_window: float
) -> float | None:
    """Seconds until a parked run must look again though nothing woke it: a comment's quiet window
    or the wall-clock budget runs out (None: neither; only news wakes it)."""
    now = watch.clock()
    waits = []
    ready = next_ready_in(waiting, now, quiet_window)
    if ready is not None:
        waits.append(ready)
    wall = budgets_of(ctx).wall_clock_s
    if wall is not None:
        created = watch.records.get_run(ctx.run_id).created_at
        waits.append(max(0.0, wall - (now - created).total_seconds()))
    return min(waits, default=None)


def _collect(ctx: RunContext, records: WatchRecords, hub: FeedbackHub, trust: TrustPolicy) -> None:
    """Bring in what webhooks stored and, when a poll is due, what the poller sees (the hub routes
    it to the runs by PR); judge every new item of this run."""
    hub.pump()
    _judge(ctx, records, trust)


class _LiveSteer:
    """``--live-steer``: while a round's turns run, trusted feedback arriving for the same component
    is appended to CRUCIBLE_STEER_FILE (quoted, like CANDIDATE.md) and consumed by the running round."""

    def __init__(
        self,
        ctx: RunContext,
        records: WatchRecords,
        hub: FeedbackHub,
        trust: TrustPolicy,
        component: str,
        interval: float,
    ) -> None:
        self.ctx, self.records, self.hub, self.trust = ctx, records, hub, trust
        self.component, self.interval = component, interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="crucible-live-steer", daemon=True)

    def __enter__(self) -> _LiveSteer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                self.tick()
            except Exception as error:  # a failed poll must not kill the round; the next tick retries
                self.ctx.observer.warn(f"live steer: {error}")

    def tick(self) -> None:
        _collect(self.ctx, self.records, self.hub, self.trust)
        run = self.records.get_run(self.ctx.run_id)
        if run.phase is not RunPhase.ROUND:
            return  # the round has not started yet: its own batch is not assigned to it yet
        round_number = run.round
        fresh = [
            i
            for i in current_versions(self.records.list_feedback(self.ctx.run_id))
            if i.component == self.component
        ]
        if not fresh:
            return
        lines = []
        for item in fresh:
            where = f" on `{item.path}` line {item.line}" if item.path else ""
            lines.append(f"From @{item.author}{where}, while this turn runs, the reviewer adds:")
            lines += [f"> {line}" for line in clean_feedback(item.body).splitlines() or [""]]
            lines.append("")
        with open(self.ctx.layout.steer_file, "a", encoding="utf-8") as steer:
            steer.write("\n".join(lines) + "\n")
        self.records.assign_round([i.id for i in fresh], round_number)


def _budget_stop(ctx: RunContext, watch: Watch, max_rounds: int) -> tuple[StopReason, str] | None:
    """The budgets that still apply while watching: cancel, wall clock, cost, rounds."""
    if ctx.executor.cancel.is_set():
        return StopReason.CANCELLED, "stopped: cancelled by the user"
    budgets = budgets_of(ctx)
    run = watch.records.get_run(ctx.run_id)
    elapsed = (watch.clock() - run.created_at).total_seconds()
    if budgets.wall_clock_s is not None and elapsed >= budgets.wall_clock_s:
        return StopReason.WALL_CLOCK, "stopped: wall-clock budget spent while watching feedback"
    if budgets.cost_usd is not None and run.cost_usd >= budgets.cost_usd:
        return StopReason.COST, "stopped: cost budget spent while watching feedback"
    if run.round >= max_rounds:
        return StopReason.MAX_ROUNDS, f"stopped: {run.round} refinement rounds done (feedback.max_rounds)"
    return None

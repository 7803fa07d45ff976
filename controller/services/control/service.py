"""The run service: the one object every way of running a run goes through (ADR-0003).

``crucible loop``, ``resume``, ``cancel``, the demo and ``crucible serve`` all create, drive,
resume and cancel runs here; only the composition root (``controller.wiring``) builds it. Driving
a run means describing each round as a ``RoundJob`` and launching it through the broker, so the
same code drives rounds on this machine (``LocalBroker``) or, next issue, in loop pods. Between
rounds the service itself runs the feedback watch, which launches each refinement round through
the broker as well. The server drives a watching run one step at a time (``drive(park=True)``, then
``watch_step`` whenever the run is woken), so a run waiting for feedback holds no thread (ADR-0020).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from controller.brokers.base import Broker, RoundOutcome, RoundReport
from controller.brokers.routing import RoutedBroker
from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import Spec, parse_spec
from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.domain.errors import (
    CrucibleError,
    LeaseHeldError,
    NotFoundError,
    RefusedError,
    RetryLaterError,
    SpecError,
)
from controller.domain.jobs import RoundJob, RoundState
from controller.forge.base import Forge
from controller.services.control.reader import RunReader
from controller.services.control.recovery import cancel as cancel_stored
from controller.services.control.recovery import check_resumable, kill_leftovers
from controller.services.control.roundjobs import LocalRounds, refinement_job, search_job
from controller.services.control.signals import BeforeWatch, ForgeFor, HypothesesFor, OnWait, Signals
from controller.services.execution.context import Detached, Hooks, Observer, RunContext
from controller.services.execution.keep import notify_champion
from controller.services.execution.liveness import Heartbeat
from controller.services.execution.loop import LoopResult, finish
from controller.services.execution.runs import create_run, open_context
from controller.services.feedback.hub import FeedbackHub
from controller.services.feedback.publish import Publisher, resume_pull
from controller.services.feedback.rounds import (
    Batch,
    begin_round,
    end_round,
    resume_round,
    round_batch,
    round_result,
)
from controller.services.feedback.steer import queue_steer
from controller.services.feedback.watch import Watch, keep_watching, watch_feedback
from controller.services.remote.cutoff import fail_cut_off_turn, relaunchable
from controller.services.views import schemas
from controller.services.views.patching import accept
from controller.services.views.specs import stored_spec
from controller.store.ports import ControllerStore
from controller.store.records import PullRecord

ROUND_POLL_S = 0.2  # seconds between looks for a cancel while a round runs elsewhere (a thread, a pod)

__all__ = ["BeforeWatch", "ForgeFor", "HypothesesFor", "OnWait", "RunService", "Signals"]


class RunService:
    """Creates, drives, resumes and cancels runs; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        store: ControllerStore,
        *,
        environ: Mapping[str, str],
        forge_for: ForgeFor,
        rounds: LocalRounds,
        broker: Broker,
        hub: FeedbackHub,
        reader: RunReader,
        hypotheses: HypothesesFor | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self._environ = dict(environ)
        self._forge_for = forge_for
        # The runner of this process's rounds, which ``broker`` (built around it) launches them on.
        self.rounds = rounds
        self.broker = broker
        self._hypotheses = hypotheses
        # The process's feedback intake, shared by every run it watches (one poller per forge
        # client); the webhook endpoint wakes it (``hub.wake``).
        self.hub = hub
        # The read facade (``reader.RunReader``): the options a run is driven with, its views.
        self.reader = reader
        self._current: dict[str, int] = {}  # run id -> round being driven here
        self._attempts: dict[str, int] = {}  # run id -> which drive of the run this is (RoundJob.attempt)
        self.rounds_launched = 0  # rounds this process launched through the broker (for /metrics)

    # -- creating -----------------------------------------------------------------------------

    def create(self, spec: Spec, spec_text: str, spec_path: Path | None, options: RunOptions) -> str:
        """Validate ``options`` against ``spec`` and record a pending run with both; return its id."""
        if options.watch_feedback and spec.feedback is None:
            raise SpecError("feedback", "a [feedback] table is required with --watch-feedback")
        forge = self._forge_for(spec) if options.publish_prs else None
        return create_run(
            self.store,
            spec,
            spec_text,
            spec_path,
            turns=options.turns,
            options=options.to_json(),
            forge=forge,
        )

    def forge_for_run(self, run_id: str) -> Forge | None:
        """The run's forge client when it publishes, else None."""
        if not self.reader.options(run_id).publish_prs:
            return None
        return self._forge_for(stored_spec(self.store, run_id))

    # -- driving ------------------------------------------------------------------------------

    def drive(
        self,
        run_id: str,
        *,
        observer: Observer | None = None,
        signals: Signals | None = None,
        before_watch: BeforeWatch | None = None,
        heartbeat: Heartbeat | None = None,
        park: bool = False,
    ) -> LoopResult:
        """Drive a pending or resumed run to its stop, holding its lease throughout: round 0 through
        the broker, then (with ``watch_feedback``) the watch, whose refinement rounds go through the
        broker too. A run resumed after its search goes on watching (or continues its round).

        ``heartbeat``: a lease the caller already holds (``resume``); otherwise one is claimed here
        (LeaseHeldError if a live process drives the run). Detached when ``signals.detach`` stopped
        this process driving the run without ending it. ``park``: Parked instead of waiting in the
        watch (the caller keeps ``heartbeat`` and calls ``watch_step`` when ``signals.wakeup`` is set
        or the Parked's time is up)."""
        signals = signals or Signals()
        beat = heartbeat or Heartbeat(
            self.store, run_id, cancel=signals.cancel, ttl_s=self.settings.lease_ttl_s
        )
        beat.on_cancel = signals.wakeup.set  # a cancel request wakes the run wherever it waits
        ctx, watch = self._open(run_id, observer, signals, beat, park=park)
        if heartbeat is None:
            beat.start()
        self.rounds.register(ctx, hand_over=watch is not None)
        self._attempts[run_id] = self._attempt_number(run_id)
        try:
            searched = self._launch_search(ctx)
            if watch is None or searched.status != RunStatus.RUNNING:
                return searched
            return self._watch(ctx, searched, watch, before_watch)
        finally:
            self.rounds.forget(run_id)
            self._current.pop(run_id, None)
            self._attempts.pop(run_id, None)
            if heartbeat is None:
                beat.stop()

    def watch_step(self, run_id: str, *, signals: Signals, heartbeat: Heartbeat) -> LoopResult:
        """The next look of a parked watching run (``drive(park=True)`` raised Parked): a fresh context, the
        watch's passes (a refinement round if feedback is ready), and Parked again when there is nothing left
        to do; the run's result once it stops. ``heartbeat``: its lease, held by the caller throughout."""
        heartbeat.on_cancel = signals.wakeup.set
        ctx, watch = self._open(run_id, None, signals, heartbeat, park=True)
        if watch is None:
            raise RefusedError(f"run {run_id} does not watch feedback")
        self.rounds.register(ctx, hand_over=True)
        self._attempts[run_id] = self._attempt_number(run_id)
        try:
            return keep_watching(ctx, watch)
        finally:
            self.rounds.forget(run_id)
            self._current.pop(run_id, None)
            self._attempts.pop(run_id, None)

    def _open(
        self, run_id: str, observer: Observer | None, signals: Signals, lease: Heartbeat, *, park: bool
    ) -> tuple[RunContext, Watch | None]:
        """The run's live context, handed the driver's hooks (``signals``, the ``lease`` this process
        holds, publishing, hypothesis pods), and its watch when it watches feedback."""
        options = self.reader.options(run_id)
        spec = stored_spec(self.store, run_id)
        forge = self._forge_for(spec) if options.publish_prs else None
        url = self.settings.forge.dashboard_url
        publish = Publisher(forge, self.store, dashboard_url=url).publish if forge is not None else None
        pods = self._hypotheses(run_id) if self._hypotheses is not None else None
        hooks = Hooks(publish, lease, wakeup=signals.wakeup, detach=signals.detach, hypothesis_pods=pods)
        ctx = open_context(
            self.settings,
            self.store,
            run_id,
            spec,
            environ=self._environ,
            observer=observer,
            cancel=signals.cancel,
            hooks=hooks,
        )
        watch = None
        if options.watch_feedback and forge is not None:
            watch = Watch(
                forge=forge,
                own_logins=list(self.settings.forge.own_logins),
                records=self.store,
                live_steer=options.live_steer,
                hub=self.hub,
                round_runner=self._refine,
                round_resumer=self._resume_refinement,
                park=park,
            )
        return ctx, watch

    def _launch_search(self, ctx: RunContext) -> LoopResult:
        job = search_job(ctx, self.store, attempt=self._attempts.get(ctx.run_id, 0))
        if self._remote(job.run_id, job.round) and self.store.get_run(ctx.run_id).status != RunStatus.RUNNING:
            self.store.set_run_status(ctx.run_id, RunStatus.RUNNING)  # its worker never moves the run
        report = self._run_round(ctx, job)
        assert report.outcome is not None
        outcome = report.outcome
        reason = outcome.stop_reason or StopReason.ERROR
        if self._remote(job.run_id, job.round):
            self._take_remote_round(ctx)
            if outcome.run_status is not RunStatus.RUNNING:
                # A worker never moves the run (ADR-0031): this controller, holding the lease, records
                # the stop its outcome names (the status follows from the reason, not from its word).
                return finish(ctx, reason, outcome.message)
        return LoopResult(outcome.run_status, reason, outcome.message)

    def _watch(
        self, ctx: RunContext, searched: LoopResult, watch: Watch, before_watch: BeforeWatch | None
    ) -> LoopResult:
        try:
            if before_watch is not None:
                before_watch(ctx, searched)
            return watch_feedback(ctx, searched, watch)
        except KeyboardInterrupt:
            ctx.executor.cancel.set()
            return finish(ctx, StopReason.CANCELLED, "stopped: cancelled by the user")

    def _remote(self, run_id: str, round: int) -> bool:
        """Whether the round ran elsewhere (a routed broker answers per round, ADR-0015)."""
        if isinstance(self.broker, RoutedBroker):
            return self.broker.capabilities_for(run_id, round).remote
        return self.broker.capabilities.remote

    def _take_remote_round(self, ctx: RunContext) -> None:
        """After a round executed elsewhere (ADR-0014): its kept commits arrived as verified bundles
        in the candidate clones and the record names them; move this process's checkouts to them and
        publish as a local round would have after each keep (publishing is idempotent)."""
        heads = {c.name: c.head_sha for c in self.store.list_components(ctx.run_id)}
        if heads != ctx.champion_heads:
            ctx.ensure_arm("candidate", heads)
            ctx.ensure_arm("champion", heads)
            ctx.champion.move(heads)
        ctx.champion.measured(None)  # re-read from the record when this process measures next
        notify_champion(ctx)

    def _refine(self, ctx: RunContext, batch: Batch) -> bool | None:
        """One refinement round through the broker; True when it kept (and pushed) a turn, None
        when a cancel cut it off (as ``rounds.run_round``)."""
        number = self.store.get_run(ctx.run_id).round + 1
        if self._remote(ctx.run_id, number):
            return self._refine_remotely(ctx, batch)
        job = refinement_job(ctx, self.store, batch, attempt=self._attempts.get(ctx.run_id, 0))
        self.rounds.expect_batch(job, batch)
        report = self._run_round(ctx, job)
        if report.outcome is None or report.outcome.run_status is RunStatus.CANCELLED:
            return None
        return report.outcome.kept

    def _refine_remotely(self, ctx: RunContext, batch: Batch, number: int | None = None) -> bool | None:
        """A refinement round in a pod (ADR-0019): this controller begins the round (refreshes the PR,
        consumes the feedback), the worker plays its turns through the ledger, and this controller takes its
        kept commit (a verified bundle), pushes it onto the PR branch and ends the round (replies drafted).
        Whether it kept comes from the record, not from the worker's word. ``number``: a round begun before (a
        resume), whose decided turns stand; its pod, if one still runs, is adopted."""
        assert ctx.spec.feedback is not None
        if number is None:
            number = begin_round(ctx, self.store, batch)
        kept, detail, decided = round_result(ctx, self.store, number)
        if not kept and decided < ctx.spec.feedback.turns:
            job = refinement_job(
                ctx, self.store, batch, attempt=self._attempts.get(ctx.run_id, 0), number=number
            )
            report = self._run_round(ctx, replace(job, turns=job.turns - decided))
            self._take_remote_round(ctx)
            if report.outcome is None or report.outcome.run_status is RunStatus.CANCELLED:
                return None  # the run stays in the round; a resume continues it
            kept, detail, _ = round_result(ctx, self.store, number)
        end_round(ctx, self.store, number, batch, kept, detail)
        return kept

    def _resume_refinement(self, ctx: RunContext) -> bool | None:
        """Continue the refinement round a crash or a cancel cut off: a remote run's through its
        broker (adopting a pod that still runs it), a local run's here (``rounds.resume_round``)."""
        number = self.store.get_run(ctx.run_id).round
        if not self._remote(ctx.run_id, number):
            return resume_round(ctx, self.store)
        return self._refine_remotely(ctx, round_batch(ctx, self.store, number), number)

    def _attempt_number(self, run_id: str) -> int:
        """The attempt of the next launch of any round of the run: one more for each drive (a RESUMED
        event per resume, ADR-0012) and for each relaunch after a lost pod (a RELAUNCHED event,
        ADR-0019). Counted from the record, so every replica computes the same number."""
        return len(self.store.list_events(run_id, kinds=[EventKind.RESUMED, EventKind.RELAUNCHED]))

    def _run_round(self, ctx: RunContext, job: RoundJob) -> RoundReport:
        """Launch ``job`` and wait for its end. A remote round whose pod was lost (``cutoff.RELAUNCHABLE``)
        has its cut-off turn decided ``failed`` and its remaining turns launched again as a new attempt,
        at most ``broker.max_relaunches`` times (ADR-0019); any other failure is the run's error."""
        relaunches = 0
        limit = ctx.spec.broker.max_relaunches
        while True:
            report = self._finished(ctx, self._launch(job))
            if report.state != RoundState.FAILED:
                return report
            busy = self.rounds.busy(job.run_id)
            if busy is not None:
                # A busy database, not the run's failure: nothing half-written is decided (a turn
                # is decided in one transaction), so the driver retries or hands the run back.
                raise RetryLaterError(f"round {job.round} of run {job.run_id} was cut off: {busy}")
            error = report.error or f"round {job.round} of run {job.run_id} failed"
            remote = self._remote(job.run_id, job.round)
            if remote and report.error:
                # Its pod was lost mid-turn: that turn is decided failed, naming why (ADR-0015).
                fail_cut_off_turn(self.store, job.run_id, job.round, report.error)
            if not remote or not relaunchable(report.error):
                raise CrucibleError(error)
            if relaunches >= limit:
                raise CrucibleError(
                    f"{error} (round {job.round} was relaunched {relaunches} time(s) after lost pods; "
                    f"broker.max_relaunches = {limit})"
                )
            relaunches += 1
            job = self._relaunch(ctx, job, error, relaunches)
            if job.turns == 0 and job.round > 0:  # the lost attempt kept, or played every turn
                kept, detail, _ = round_result(ctx, self.store, job.round)
                outcome = RoundOutcome(RunStatus.RUNNING, None, detail, kept=kept)
                return RoundReport(job.run_id, job.round, RoundState.SUCCEEDED, outcome)

    def _relaunch(self, ctx: RunContext, job: RoundJob, error: str, relaunches: int) -> RoundJob:
        """The next attempt of a round whose pod was lost: what the lost attempt kept is taken over
        (heads, publishing), a RELAUNCHED event numbers the attempt, and the job covers the turns left."""
        self._take_remote_round(ctx)
        payload = {"round": job.round, "lost_attempt": job.attempt, "relaunch": relaunches, "error": error}
        self.store.append_event(job.run_id, EventKind.RELAUNCHED, payload)
        attempt = self._attempt_number(job.run_id)
        self._attempts[job.run_id] = attempt
        if job.round == 0:
            return search_job(ctx, self.store, attempt=attempt)
        assert ctx.spec.feedback is not None
        kept, _, decided = round_result(ctx, self.store, job.round)
        if kept:
            return replace(job, attempt=attempt, turns=0)  # it kept before its pod was lost: done
        return replace(
            job,
            attempt=attempt,
            turns=max(0, ctx.spec.feedback.turns - decided),
            first_turn=self.store.turn_counts(job.run_id).highest + 1,
            heads=ctx.champion_heads,
        )

    def _launch(self, job: RoundJob) -> RoundReport:
        self._current[job.run_id] = job.round
        # A remote round still running for this run (its Job, after this controller or another
        # restarted) is adopted, not launched again: its worker goes on reporting (ADR-0015).
        adopted = self._in_flight(job.run_id, job.round) if self._remote(job.run_id, job.round) else None
        if adopted is not None:
            return adopted
        self.rounds_launched += 1
        return self.broker.launch(job)

    def _in_flight(self, run_id: str, round: int) -> RoundReport | None:
        """The report of a round of this run the broker still runs (launched before this drive), or None."""
        try:
            report = self.broker.status(run_id, round)
        except NotFoundError:
            return None
        return None if report.finished else report

    def _finished(self, ctx: RunContext, report: RoundReport) -> RoundReport:
        """Wait for a launched round to end (FAILED included: ``_run_round`` decides what follows); a detached
        one (SIGTERM) stops this process driving the run. A cancel of the run (Ctrl-C, the API, the
        heartbeat's flag, a shutdown) is passed on to the broker, which stops the round wherever it runs."""
        run_id, number = report.run_id, report.round
        try:
            while not report.finished:
                if ctx.executor.cancel.is_set():
                    self.broker.cancel(run_id, number)
                    report = self.broker.wait(run_id, number)
                    break
                report = self.broker.wait(run_id, number, ROUND_POLL_S)
        except KeyboardInterrupt:
            self.broker.cancel(run_id, number)
            report = self.broker.wait(run_id, number)
        if ctx.hooks.detach.is_set() and ctx.executor.cancel.is_set():
            raise Detached(f"run {ctx.run_id} detached from this process; it goes on when resumed")
        return report

    # -- resuming and cancelling --------------------------------------------------------------

    def check_resumable(self, run_id: str, on_wait: OnWait | None = None) -> Spec:
        """RefusedError naming the mismatch unless the run may be resumed (waiting for a silent
        holder's lease to run out, ``on_wait`` told who and how long); its spec otherwise."""
        return check_resumable(self.store, run_id, self.forge_for_run(run_id), on_wait=on_wait)

    def resume(
        self,
        run_id: str,
        *,
        observer: Observer | None = None,
        signals: Signals | None = None,
        on_wait: OnWait | None = None,
        heartbeat: Heartbeat | None = None,
        park: bool = False,
    ) -> LoopResult:
        """Continue a run after a crash, a cancel or a lost holder, with every option it was
        started with: claim its lease, kill what a dead driver left on this host, then drive.

        ``heartbeat``: the run's lease, already claimed by this process (the server's scheduler
        claims runs before it drives them); the caller stops it. Otherwise it is claimed here.
        ``park``: as ``drive``'s (only with ``heartbeat``: the caller keeps the lease while parked)."""
        signals = signals or Signals()
        self.check_resumable(run_id, on_wait)
        beat = heartbeat or Heartbeat(
            self.store, run_id, cancel=signals.cancel, ttl_s=self.settings.lease_ttl_s
        )
        if heartbeat is None:
            try:
                beat.start()
            except LeaseHeldError as exc:  # someone else took it over between the check and the claim
                raise RefusedError(f"run {run_id} is still running: {exc}") from exc
        try:
            killed = kill_leftovers(self.settings, self.store, run_id)
            self.store.set_run_status(run_id, RunStatus.RUNNING)
            self.store.append_event(run_id, EventKind.RESUMED, {"killed_process_groups": killed})
            parks = park and heartbeat is not None
            return self.drive(run_id, observer=observer, signals=signals, heartbeat=beat, park=parks)
        finally:
            if heartbeat is None:
                beat.stop()

    def cancel(self, run_id: str) -> str:
        """Cancel a run: the round driven here is cancelled through the broker; a run driven by
        another process is stopped the stored way (``recovery.cancel``)."""
        current = self._current.get(run_id)
        if current is not None:
            self.broker.cancel(run_id, current)
            ctx = self.rounds.context(run_id)
            if ctx is not None:
                ctx.executor.cancel.set()
            return "cancelling"
        message = cancel_stored(self.settings, self.store, run_id)
        if message == "cancelled":  # nobody drove it: a dead controller's pod may still run its round
            message = self._cancel_orphaned_round(run_id, message)
        return message

    def _cancel_orphaned_round(self, run_id: str, message: str) -> str:
        """Stop, through the broker, the remote round a dead driver of a cancelled run left running
        (the Kubernetes broker deletes every attempt's Job of it); ``message`` with what happened."""
        number = self.store.get_run(run_id).round
        try:
            if not self._remote(run_id, number):
                return message
            self.broker.cancel(run_id, number)
        except NotFoundError:  # the round never reached the broker
            return message
        except CrucibleError as exc:
            return f"{message}; its round {number} could not be stopped: {exc}"
        return f"{message}; its round {number} was stopped"

    def steer(self, run_id: str, text: str, component: str | None = None) -> schemas.RoundRequest:
        """Queue a refinement round seeded with ``text`` for a watching run (``services.feedback.steer``)."""
        return queue_steer(self.store, run_id, text, component)

    def resume_pull(self, run_id: str, component: str) -> PullRecord:
        """Lift a pause on a PR: adopt its current head and let crucible write to it again."""
        spec = stored_spec(self.store, run_id)
        url = self.settings.forge.dashboard_url
        publisher = Publisher(self._forge_for(spec), self.store, dashboard_url=url)
        ctx = open_context(self.settings, self.store, run_id, spec, environ=self._environ)
        return resume_pull(ctx, publisher, component)

    # -- the run's result, and runs from the API ----------------------------------------------

    def accept(self, run_id: str) -> list[str]:
        """Apply the final patch to the user's checkouts; the components it was applied to."""
        return accept(self.settings, self.store, run_id)

    def submit_spec(self, spec_text: str, spec_dir: Path, options: RunOptions) -> str:
        """A run from spec text (the API's ``POST /api/runs``); SpecError naming the key if bad."""
        spec = parse_spec(spec_text, spec_dir)
        return self.create(spec, spec_text, None, options)

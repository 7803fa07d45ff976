"""The scheduler of ``crucible serve``: which runs this process drives, and how it lets go of them.

Every tick it claims up to ``max_concurrent_runs`` minus what it already drives (``Store.claim_runs``:
pending runs, and running ones whose holder stopped heart-beating; ``FOR UPDATE SKIP LOCKED`` on
PostgreSQL, so replicas on one database split the work instead of queueing on it) and drives each in
a thread of its own, holding the run's lease with a heartbeat (``services.liveness``). A pending run
starts; a run taken over is resumed like ``crucible resume`` does (process groups the dead holder left
on this host are killed, the turn it cut off runs again), so any number of replicas can share the
runs and a replica's death costs its runs one lease.

Shutting down (SIGTERM) stops claiming and *detaches* every run: the running command's process group
is killed, the cut-off turn stays undecided, and the lease is handed back, so another replica (or
this one after a restart) takes the run over at once instead of after the lease runs out.

It is also the API's ``RunControl``: cancel reaches the run wherever it is driven (the cancel flag
that heartbeats read), resume makes a cancelled run claimable again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from controller.config.settings import Settings
from controller.config.spec import Spec
from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.domain.errors import (
    ConflictError,
    CrucibleError,
    LeaseHeldError,
    LeaseLostError,
    RefusedError,
)
from controller.forge.base import Forge
from controller.services.context import Detached, Observer
from controller.services.feedback_hub import FeedbackHub
from controller.services.liveness import Heartbeat, process_owner
from controller.services.loop import Handover, LoopResult, run_loop
from controller.services.publish import Publisher
from controller.services.recovery import cancel as cancel_stored
from controller.services.recovery import resume, stored_spec
from controller.services.runs import open_context
from controller.services.submit import reopen
from controller.services.watch import Watch, watch_feedback
from controller.store.store import Store

log = logging.getLogger(__name__)

ForgeFactory = Callable[[Spec], Forge]


@dataclass
class _Driven:
    """A run this process drives: its thread and the events that stop it."""

    thread: threading.Thread
    cancel: threading.Event = field(default_factory=threading.Event)
    detach: threading.Event = field(default_factory=threading.Event)
    wakeup: threading.Event = field(default_factory=threading.Event)


class Scheduler:
    """Claims and drives runs from the store (see the module docstring); thread-safe."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        max_concurrent_runs: int,
        forge_for: ForgeFactory | None = None,
        environ: Mapping[str, str] | None = None,
        own_logins: Collection[str] = (),
        hub: FeedbackHub | None = None,
        tick_s: float = 1.0,
        owner: str | None = None,
    ) -> None:
        if max_concurrent_runs < 1:
            raise ValueError(f"max_concurrent_runs must be >= 1, got {max_concurrent_runs}")
        self.settings, self.store = settings, store
        self.max_concurrent_runs = max_concurrent_runs
        self.forge_for = forge_for
        self.environ = environ
        self.own_logins = tuple(own_logins)
        self.hub = hub
        self.tick_s = tick_s
        self.owner = owner or process_owner()
        self.rounds_launched = 0
        self._driving: dict[str, _Driven] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="crucible-scheduler", daemon=True)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 15.0) -> list[str]:
        """Stop claiming, detach every driven run (its lease handed back) and wait for the threads
        at most ``timeout_s``; the ids of runs whose thread did not end in time."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        with self._lock:
            driven = dict(self._driving)
        for run in driven.values():
            run.detach.set()
            run.cancel.set()  # kills the running command; with detach set, nothing is decided
            run.wakeup.set()
        stuck = []
        for run_id, run in driven.items():
            run.thread.join(timeout_s)
            if run.thread.is_alive():
                stuck.append(run_id)
        return stuck

    def leases_held(self) -> int:
        with self._lock:
            return len(self._driving)

    def driving(self) -> list[str]:
        with self._lock:
            return sorted(self._driving)

    # -- RunControl -----------------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def cancel(self, run_id: str) -> str:
        with self._lock:
            driven = self._driving.get(run_id)
        if driven is not None:
            self.store.request_cancel(run_id)  # recorded, should this process die before it stops
            driven.cancel.set()
            driven.wakeup.set()
            return "cancelling: the running command is stopped and its turn restored"
        return cancel_stored(self.settings, self.store, run_id)

    def resume(self, run_id: str) -> str:
        message = reopen(self.store, run_id)
        self.wake()
        return message

    def steer(self, run_id: str, text: str) -> str:
        raise RefusedError("starting a round by hand is not available in this version (see ADR-0005)")

    # -- claiming and driving -------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.tick()
            except CrucibleError as error:  # a busy or unreachable database: try again next tick
                log.warning("scheduler: %s", error)
            self._wake.wait(self.tick_s)
            self._wake.clear()

    def tick(self) -> list[str]:
        """Claim what there is room for and start driving it; the ids started."""
        with self._lock:
            room = self.max_concurrent_runs - len(self._driving)
        if room <= 0 or self._stopping.is_set():
            return []
        claimed = self.store.claim_runs(self.owner, self.settings.lease_ttl_s, limit=room)
        with self._lock:
            # A run this process drives whose renewal lagged past its expiry is claimed again: it is
            # still ours and still driven (the claim renewed its lease); never start it twice.
            claimed = [run_id for run_id in claimed if run_id not in self._driving]
        for run_id in claimed:
            driven = _Driven(
                threading.Thread(target=self._drive, args=(run_id,), name=f"crucible-run-{run_id}")
            )
            with self._lock:
                self._driving[run_id] = driven
            driven.thread.start()
        return claimed

    def _drive(self, run_id: str) -> None:
        with self._lock:
            driven = self._driving[run_id]
        try:
            result = self._drive_run(run_id, driven)
            log.info("run %s: %s", run_id, result.message)
        except Detached:
            log.info("run %s: detached; its lease is handed back", run_id)
        except LeaseHeldError as error:  # another replica claimed it between our claim and start
            log.info("run %s: driven elsewhere: %s", run_id, error)
        except RefusedError as error:
            if self.store.get_run(run_id).lease_owner not in (None, self.owner):
                log.info("run %s: driven elsewhere: %s", run_id, error)
            else:  # its spec or bases changed: no replica can resume it, so it must not be claimed again
                self._fail(run_id, f"stopped: cannot be resumed: {error}")
        except (ConflictError, LeaseLostError) as error:
            # Another driver won a race on this run (its lease expired under load and was taken
            # over): the store refused our write, the run is theirs; nothing to record.
            log.warning("run %s: lost to another driver: %s", run_id, error)
        except CrucibleError as error:
            log.exception("run %s: stopped on an error", run_id)
            self._fail(run_id, f"stopped: {error}")
        finally:
            with self._lock:
                self._driving.pop(run_id, None)
            self._wake.set()  # room for another run

    def _drive_run(self, run_id: str, driven: _Driven) -> LoopResult:
        run = self.store.get_run(run_id)
        spec = stored_spec(self.store, run_id)
        forge = self.forge_for(spec) if run.options.get("publish_prs") and self.forge_for else None
        publisher = Publisher(forge) if forge is not None else None
        then = self._watch(forge) if run.options.get("watch_feedback") and forge is not None else None
        self.rounds_launched += 1
        if run.status is RunStatus.PENDING:
            return self._start(run_id, spec, driven, publisher, then)
        # A takeover: hand our claim back so resume's own checks and claim run as for crucible resume.
        self.store.release_lease(run_id, self.owner)
        return resume(
            self.settings,
            self.store,
            run_id,
            environ=self.environ,
            observer=Observer(),
            cancel_event=driven.cancel,
            publisher=publisher,
            then=then,
            detach=driven.detach,
            wakeup=driven.wakeup,
        )

    def _start(
        self, run_id: str, spec: Spec, driven: _Driven, publisher: Publisher | None, then: Handover | None
    ) -> LoopResult:
        beat = Heartbeat(
            self.store, run_id, cancel=driven.cancel, ttl_s=self.settings.lease_ttl_s, owner=self.owner
        )
        beat.start()
        try:
            ctx = open_context(
                self.settings, self.store, run_id, spec, environ=self.environ, cancel=driven.cancel
            )
            ctx.heartbeat, ctx.detach, ctx.wakeup = beat, driven.detach, driven.wakeup
            beat.on_cancel = ctx.wakeup.set
            if publisher is not None:
                ctx.on_champion = publisher.publish
            return run_loop(ctx, then=then)
        finally:
            beat.stop()

    def _watch(self, forge: Forge) -> Handover:
        watch = Watch(forge=forge, own_logins=self.own_logins, hub=self.hub)

        def then(ctx: object, searched: LoopResult) -> LoopResult:
            return watch_feedback(ctx, searched, watch)  # type: ignore[arg-type]

        return then

    def _fail(self, run_id: str, message: str) -> None:
        """A run this process cannot drive (its spec or bases changed, an error): failed, with the
        reason, so no replica claims it again and again."""
        try:
            self.store.set_run_status(
                run_id, RunStatus.FAILED, stop_reason=StopReason.ERROR, stop_message=message
            )
            self.store.append_event(
                run_id, EventKind.COMPLETED, {"status": "failed", "stop_reason": "error", "message": message}
            )
        except CrucibleError as error:
            log.warning("run %s: could not record the failure: %s", run_id, error)

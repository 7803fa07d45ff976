"""The scheduler of ``crucible serve``: which runs this process drives, and how it lets go of them.

Every tick it claims up to ``max_concurrent_runs`` minus what it already drives (``Store.claim_runs``:
pending runs, and running ones whose holder stopped heart-beating; ``FOR UPDATE SKIP LOCKED`` on
PostgreSQL, so replicas on one database split the work instead of queueing on it) and drives each in
a thread of its own through the ``RunService`` (ADR-0012): the same service object ``crucible loop``
uses, over whatever broker the composition root gave it (a threaded ``LocalBroker`` today, the
Kubernetes broker by swapping it). A pending run is driven under the lease the claim took; a run
taken over is resumed like ``crucible resume`` does (process groups the dead holder left on this
host are killed, the turn it cut off runs again, its rounds are launched as a new attempt), so any
number of replicas can share the runs and a replica's death costs its runs one lease.

Shutting down (SIGTERM) stops claiming and *detaches* every run: the running command's process group
is killed, the cut-off turn stays undecided, and the lease is handed back, so another replica (or
this one after a restart) takes the run over at once instead of after the lease runs out.

It is also the API's ``RunControl``: cancel reaches the run wherever it is driven (the cancel flag
that heartbeats read), resume makes a cancelled run claimable again, and a steer queues a
refinement round for a watching run.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.domain.errors import (
    ConflictError,
    CrucibleError,
    LeaseHeldError,
    LeaseLostError,
    RefusedError,
    RetryLaterError,
)
from controller.services import schemas
from controller.services.context import Detached
from controller.services.liveness import Heartbeat, process_owner
from controller.services.loop import LoopResult
from controller.services.service import RunService, Signals
from controller.services.submit import reopen

log = logging.getLogger(__name__)

CLAIM_BATCH = 8  # runs claimed per tick at most (see ``tick``)


@dataclass
class _Driven:
    """A run this process drives: its thread and the signals that stop or wake it."""

    thread: threading.Thread
    signals: Signals = field(default_factory=Signals)


class Scheduler:
    """Claims runs from the store and drives them through the run service (see the module
    docstring); thread-safe."""

    def __init__(
        self,
        service: RunService,
        *,
        max_concurrent_runs: int,
        tick_s: float = 1.0,
        claim_batch: int = CLAIM_BATCH,
    ) -> None:
        if max_concurrent_runs < 1:
            raise ValueError(f"max_concurrent_runs must be >= 1, got {max_concurrent_runs}")
        if not service.broker.capabilities.concurrent:
            raise ValueError("the scheduler drives runs side by side: it needs a concurrent broker")
        self.service = service
        self.settings, self.store = service.settings, service.store
        self.max_concurrent_runs = max_concurrent_runs
        self.tick_s = tick_s
        self.claim_batch = claim_batch
        # Resume's takeover check knows this process's own claims by this owner (liveness).
        self.owner = process_owner()
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
            run.signals.detach.set()
            run.signals.cancel.set()  # kills the running command; with detach set, nothing is decided
            run.signals.wakeup.set()
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

    @property
    def rounds_launched(self) -> int:
        return self.service.rounds_launched

    # -- RunControl -----------------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def cancel(self, run_id: str) -> str:
        with self._lock:
            driven = self._driving.get(run_id)
        if driven is not None:
            self.store.request_cancel(run_id)  # recorded, should this process die before it stops
            driven.signals.cancel.set()  # the service passes it on to the broker's round
            driven.signals.wakeup.set()
            return "cancelling: the running command is stopped and its turn restored"
        return self.service.cancel(run_id)

    def resume(self, run_id: str) -> str:
        message = reopen(self.store, run_id)
        self.wake()
        return message

    def steer(self, run_id: str, text: str, component: str | None = None) -> schemas.RoundRequest:
        """Queue a refinement round seeded with ``text``; the run's watch starts it (at once when
        this process drives the run, else at its driver's next look, within a poll interval)."""
        request = self.service.steer(run_id, text, component)
        with self._lock:
            driven = self._driving.get(run_id)
        if driven is not None:
            driven.signals.wakeup.set()
        return request

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
        # At most a batch per tick: a replica that starts with a thousand claimable runs starts them a
        # batch a second rather than all at once (their checkouts and baselines would starve the
        # database pool and the disk together; bench/scheduler.py).
        limit = min(room, self.claim_batch)
        claimed = self.store.claim_runs(self.owner, self.settings.lease_ttl_s, limit=limit)
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
            result = self._drive_run(run_id, driven.signals)
            log.info("run %s: %s", run_id, result.message)
        except Detached:
            log.info("run %s: detached; its lease is handed back", run_id)
        except LeaseHeldError as error:  # another replica claimed it between our claim and start
            log.info("run %s: driven elsewhere: %s", run_id, error)
        except RetryLaterError as error:  # a busy database: hand the run back, a later tick retries
            log.warning("run %s: handed back, the database is busy: %s", run_id, error)
            self._hand_back(run_id)
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

    def _drive_run(self, run_id: str, signals: Signals) -> LoopResult:
        """Drive a claimed run under the lease the claim took: a pending run starts, any other is
        taken over (resumed)."""
        pending = self.store.get_run(run_id).status is RunStatus.PENDING
        beat = Heartbeat(
            self.store, run_id, cancel=signals.cancel, ttl_s=self.settings.lease_ttl_s, owner=self.owner
        )
        beat.start()  # ours already (the claim): this starts renewing it
        try:
            if pending:
                return self.service.drive(run_id, signals=signals, heartbeat=beat)
            return self.service.resume(run_id, signals=signals, heartbeat=beat)
        finally:
            beat.stop()

    def _hand_back(self, run_id: str) -> None:
        try:
            self.store.release_lease(run_id, self.owner)
        except CrucibleError as error:  # it runs out on its own
            log.warning("run %s: could not hand the lease back: %s", run_id, error)

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

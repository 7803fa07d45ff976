"""The scheduler of ``crucible serve``: which runs this process drives, and how it lets go of them.

Every tick it claims up to ``max_concurrent_runs`` minus the runs it keeps busy (``Store.claim_runs``:
pending runs, and running ones whose holder stopped heart-beating; ``FOR UPDATE SKIP LOCKED`` on
PostgreSQL, so replicas on one database split the work instead of queueing on it) and drives each in
a thread of its own through the ``RunService`` (ADR-0012): the same service object ``crucible loop``
uses, over whatever broker the composition root gave it (a threaded ``LocalBroker`` today, the
Kubernetes broker by swapping it). A pending run is driven under the lease the claim took; a run
taken over is resumed like ``crucible resume`` does (process groups the dead holder left on this
host are killed, the turn it cut off runs again, its rounds are launched as a new attempt), so any
number of replicas can share the runs and a replica's death costs its runs one lease.

A run watching for review feedback is *parked* while it has nothing to do (ADR-0020, ``parking``): its
thread and context are let go, its lease is renewed with every other in one statement (the lease
keeper), and it is given a thread again for one step of its watch when the feedback hub, a steer or
a cancel rings its bell, when its timer (a quiet window, the wall-clock budget) is up, or when a
tick's one read of new events (``Store.newest_events``) shows news another replica stored for it.
Steps and new runs share ``max_concurrent_runs`` threads; woken runs go first. A busy database
during a step parks the run again with a backoff; during its first drive the run is handed back.

Shutting down (SIGTERM) stops claiming and *detaches* every run: the running command's process group
is killed, the cut-off turn stays undecided, and the lease is handed back (the parked runs' in one
statement), so another replica (or this one after a restart) takes the run over at once instead of
after the lease runs out.

It is also the API's ``RunControl``: cancel reaches the run wherever it is driven (the cancel flag
that heartbeats read), resume makes a cancelled run claimable again, and a steer queues a
refinement round for a watching run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial

from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.domain.errors import (
    ConflictError,
    CrucibleError,
    LeaseHeldError,
    LeaseLostError,
    RefusedError,
    RetryLaterError,
)
from controller.services.control.parking import Bell, Held, Slot
from controller.services.control.service import RunService, Signals
from controller.services.control.submit import reopen
from controller.services.execution.context import Detached, Parked
from controller.services.execution.liveness import Heartbeat, process_owner
from controller.services.execution.loop import LoopResult
from controller.services.views import schemas

log = logging.getLogger(__name__)

CLAIM_BATCH = 8  # runs claimed per tick at most (see ``tick``)
RETRY_MAX_S = 60.0  # the longest backoff of a parked run's step after a busy database


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
        park: bool = True,
        clock: Callable[[], float] = time.monotonic,
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
        # False: a watching run keeps its thread and waits in its watch (the path before ADR-0020,
        # kept for comparison: CRUCIBLE_PARK_WATCHING=false, bench/scheduler.py).
        self.park = park
        self._clock = clock
        # Resume's takeover check knows this process's own claims by this owner (liveness).
        self.owner = process_owner()
        self._driving: dict[str, Held] = {}
        self._cursor: int | None = None  # the newest event id a tick has read (news for parked runs)
        self._owns_hub = False
        self.steps = 0  # watch steps given to parked runs (``bench/scheduler.py``, tests)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="crucible-scheduler", daemon=True)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self.park and not self.service.hub.running:
            # Parked runs wait in no watch that could pump the hub: it needs its own thread.
            self.service.hub.start()
            self._owns_hub = True
        self._thread.start()

    def stop(self, timeout_s: float = 15.0) -> list[str]:
        """Stop claiming, hand back the parked runs' leases, detach every busy run (its lease handed
        back) and wait for the threads at most ``timeout_s``; the ids of runs whose thread did not
        end in time."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        with self._lock:
            idle = {r: h for r, h in self._driving.items() if h.slot is not Slot.BUSY}
            for run_id in idle:
                del self._driving[run_id]
            busy = dict(self._driving)
        self._let_go(idle)
        for run in busy.values():
            run.signals.detach.set()
            run.signals.cancel.set()  # kills the running command; with detach set, nothing is decided
            run.signals.wakeup.set()
        stuck = []
        for run_id, run in busy.items():
            if run.thread is not None:
                run.thread.join(timeout_s)
                if run.thread.is_alive():
                    stuck.append(run_id)
        if self._owns_hub:
            self.service.hub.stop()
        return stuck

    def _let_go(self, idle: dict[str, Held]) -> None:
        """Hand back the leases of parked runs in one statement (a thousand of them within the 20 s
        a SIGTERM leaves)."""
        for run_id, held in idle.items():
            if held.beat is not None:
                held.beat.stop(release=False)
            self.service.hub.unsubscribe(run_id)
        try:
            self.store.release_leases(self.owner, list(idle))
        except CrucibleError as error:  # they run out on their own
            log.warning("could not hand back the leases of %d parked runs: %s", len(idle), error)

    def parked(self) -> list[str]:
        """The runs held without a thread (parked or woken and waiting for one)."""
        with self._lock:
            return sorted(r for r, h in self._driving.items() if h.slot is not Slot.BUSY)

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
            self._wake.wait(self._pause())
            self._wake.clear()

    def _pause(self) -> float:
        """Until the next tick: ``tick_s``, or less when a parked run's timer is up sooner."""
        now = self._clock()
        with self._lock:
            timers = [h.due_at for h in self._driving.values() if h.slot is Slot.PARKED]
        return max(0.0, min([self.tick_s, *(at - now for at in timers if at is not None)]))

    def tick(self) -> list[str]:
        """Give woken parked runs a thread, then claim what there is room for and start driving
        it; the ids claimed."""
        if self._stopping.is_set():
            return []
        self._news()
        self._start_due()
        with self._lock:
            room = self.max_concurrent_runs - sum(h.slot is not Slot.PARKED for h in self._driving.values())
        if room <= 0:
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
            held = Held(Signals(wakeup=Bell(partial(self._ring, run_id))), seen=self._cursor or 0)
            held.thread = threading.Thread(
                target=self._drive, args=(run_id, held), name=f"crucible-run-{run_id}"
            )
            with self._lock:
                self._driving[run_id] = held
            held.thread.start()
        return claimed

    # -- parked runs ----------------------------------------------------------------------------

    def _ring(self, run_id: str) -> None:
        """A parked run's wakeup was set (the hub routed news to it, a steer, a cancel): it is due."""
        with self._lock:
            held = self._driving.get(run_id)
            if held is None or held.slot is not Slot.PARKED:
                return  # a busy run sees its wakeup itself
            held.move(Slot.DUE)
        self._wake.set()

    def _news(self) -> None:
        """One read of the events written since the last tick: a parked run with an event newer than
        its last look is due (news another replica stored for it: a webhook, a steer)."""
        if self._cursor is None:
            self._cursor = self.store.newest_event_id()
        with self._lock:
            if not any(h.slot is Slot.PARKED for h in self._driving.values()):
                return
        newest = self.store.newest_events(self._cursor)
        if not newest:
            return
        self._cursor = max(self._cursor, *newest.values())
        due = False
        with self._lock:
            for run_id, event_id in newest.items():
                held = self._driving.get(run_id)
                if held is not None and held.slot is Slot.PARKED and event_id > held.seen:
                    held.move(Slot.DUE)
                    due = True
        if due:
            self._wake.set()

    def _start_due(self) -> None:
        """Give a thread to every parked run whose timer is up or that was woken, as room allows."""
        now = self._clock()
        start = []
        with self._lock:
            for held in self._driving.values():
                if held.slot is Slot.PARKED and held.due_at is not None and held.due_at <= now:
                    held.move(Slot.DUE)
            room = self.max_concurrent_runs - sum(h.slot is Slot.BUSY for h in self._driving.values())
            for run_id, held in self._driving.items():
                if room <= 0:
                    break
                if held.slot is Slot.DUE:
                    held.move(Slot.BUSY)
                    self.steps += 1
                    log.debug("run %s: woken", run_id)
                    held.seen = self._cursor or 0
                    held.thread = threading.Thread(
                        target=self._step, args=(run_id, held), name=f"crucible-run-{run_id}"
                    )
                    start.append(held.thread)
                    room -= 1
        for thread in start:
            thread.start()

    def _park(self, run_id: str, held: Held, after_s: float | None) -> bool:
        """Let go of the run's thread until it is woken or ``after_s`` is up; False when shutting
        down (the caller lets go of the run instead)."""
        with self._lock:
            if self._stopping.is_set():
                return False
            held.move(Slot.PARKED)
            held.thread, held.watched = None, True
            held.due_at = None if after_s is None else self._clock() + after_s
            if held.signals.wakeup.is_set():  # news after its last look began
                held.move(Slot.DUE)
        self._wake.set()
        return True

    # -- driving ----------------------------------------------------------------------------------

    def _drive(self, run_id: str, held: Held) -> None:
        """A claimed run's first drive: its search (or what a takeover continues), then its watch."""
        self._run(run_id, held, lambda: self._drive_run(run_id, held))

    def _step(self, run_id: str, held: Held) -> None:
        """One step of a parked run's watch."""
        assert held.beat is not None

        def step() -> LoopResult:
            assert held.beat is not None
            if held.beat.lost:  # taken over while parked: nothing to write
                raise LeaseLostError(f"run {run_id}: the lease of {self.owner} was taken over")
            return self.service.watch_step(run_id, signals=held.signals, heartbeat=held.beat)

        self._run(run_id, held, step)

    def _run(self, run_id: str, held: Held, body: Callable[[], LoopResult]) -> None:
        kept = False
        try:
            result = body()
            log.info("run %s: %s", run_id, result.message)
        except Parked as parked:
            held.retries = 0
            kept = self._park(run_id, held, parked.after_s)
        except Detached:
            log.info("run %s: detached; its lease is handed back", run_id)
        except LeaseHeldError as error:  # another replica claimed it between our claim and start
            log.info("run %s: driven elsewhere: %s", run_id, error)
        except RetryLaterError as error:
            if held.watched and not held.signals.detach.is_set():
                # A step of its watch: nothing is decided half-way (a round that was cut off is
                # finished by the next step), so look again after a backoff, lease kept.
                held.retries += 1
                wait = min(RETRY_MAX_S, 2.0**held.retries)
                log.warning("run %s: the database is busy, looking again in %.0f s: %s", run_id, wait, error)
                kept = self._park(run_id, held, wait)
            else:  # its first drive: hand the run back, a later tick takes it over
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
            if not kept:
                self._drop(run_id, held)
            self._wake.set()  # room for another run

    def _drop(self, run_id: str, held: Held) -> None:
        """The run is no longer this process's: stop renewing its lease (handed back unless lost).

        The run leaves ``_driving`` last: until then ``stop`` waits for this thread, so the lease's
        hand-back is never written after ``stop`` returned and its caller closed the store (the write
        then opened a connection in the closed store's new pool, found unclosed at exit)."""
        if held.beat is not None:
            held.beat.stop()
        if held.watched:
            self.service.hub.unsubscribe(run_id)
        with self._lock:
            if self._driving.get(run_id) is held:
                del self._driving[run_id]

    def _drive_run(self, run_id: str, held: Held) -> LoopResult:
        """Drive a claimed run under the lease the claim took: a pending run starts, any other is
        taken over (resumed). The lease's heartbeat stays with ``held`` while the run is parked."""
        run = self.store.get_run(run_id)
        pending = run.status is RunStatus.PENDING
        signals = held.signals
        held.beat = Heartbeat(
            self.store, run_id, cancel=signals.cancel, ttl_s=self.settings.lease_ttl_s, owner=self.owner
        )
        held.beat.adopt(run)  # ours already (the claim): this starts renewing it, claimed once
        if pending:
            return self.service.drive(run_id, signals=signals, heartbeat=held.beat, park=self.park)
        return self.service.resume(run_id, signals=signals, heartbeat=held.beat, park=self.park)

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

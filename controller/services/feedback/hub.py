"""The service-wide feedback intake: one poller per forge client, one forge client per credential,
shared by every run that watches its pull requests (ADR-0004).

Feedback arrives per repository (the poller reads repository-wide lists) and per service (webhooks
reach one endpoint), not per run. So a process holds one ``FeedbackHub``: runs ``subscribe`` with the
forge client they publish through (``forge`` hands out one client per credential key, so its
rate-limit pacing covers every run using it); each client gets one ``Poller`` that reads each
repository once per poll, however many runs watch PRs on it. What the poller sees and what webhooks
stored is routed to runs by PR (the store knows which run published which PR) and lands in the
store; the runs that got something are woken. Trust, batching and rounds stay with each run's watch.

``pump`` does one pass (stored deliveries, then every poll that is due) and is safe to call from any
thread: a pass already under way makes a second caller return at once. ``crucible loop`` (one run)
lets its watch call it; ``crucible serve`` runs it on its own thread (``start``), so a run busy in a
round never holds the others' feedback back. ``wake`` is what the webhook endpoint calls after it
stored a delivery.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass

from controller.forge.base import Forge
from controller.services.feedback.intake import apply_pull_state, ingest, process_deliveries
from controller.services.feedback.poller import Poller
from controller.store.ports import FeedbackIntake

log = logging.getLogger(__name__)

IDLE_WAIT_S = 30.0  # the hub thread's longest sleep when nothing is due (a subscription may arrive)


@dataclass
class _Subscriber:
    run_id: str
    forge: Forge
    interval_s: float
    wakeup: threading.Event
    poll: bool


@dataclass
class _Feed:
    """One forge client's poller and the PRs it reports (repository, number) right now."""

    poller: Poller
    watched: set[tuple[str, int]]


class FeedbackHub:
    """The intake of one process (see the module docstring). ``clock`` is monotonic seconds for the
    pollers' schedules (injectable: tests never wait)."""

    def __init__(
        self,
        store: FeedbackIntake,
        *,
        own_logins: Collection[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.own_logins = tuple(own_logins)
        self._clock = clock
        self._lock = threading.Lock()  # guards the maps below
        self._pumping = threading.Lock()  # one pass at a time
        self._forges: dict[Hashable, Forge] = {}
        self._feeds: dict[int, _Feed] = {}  # by id() of the forge client
        self._subscribers: dict[str, _Subscriber] = {}
        self._access_listeners: list[Callable[[str], None]] = []
        self._woken = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- clients and subscriptions --------------------------------------------------------------

    def forge(self, key: Hashable, make: Callable[[], Forge]) -> Forge:
        """The forge client for credential ``key`` (e.g. API URL and token identity), made once."""
        with self._lock:
            if key not in self._forges:
                self._forges[key] = make()
            return self._forges[key]

    def subscribe(
        self, run_id: str, forge: Forge, *, interval_s: float, wakeup: threading.Event, poll: bool = True
    ) -> None:
        """Watch ``run_id``'s PRs (read from the store before every poll) through ``forge``'s poller,
        every ``interval_s`` at most (the shortest interval of a client's runs wins); ``wakeup`` is
        set when something arrives for the run. ``poll=False``: webhooks only."""
        with self._lock:
            self._subscribers[run_id] = _Subscriber(run_id, forge, interval_s, wakeup, poll)
            if poll and id(forge) not in self._feeds:
                self._feeds[id(forge)] = _Feed(
                    Poller(forge.feedback_reader(), repos=(), clock=self._clock), set()
                )
        self._woken.set()

    def unsubscribe(self, run_id: str) -> None:
        """Stop watching ``run_id``'s PRs (its PRs leave the poller at its next poll)."""
        with self._lock:
            self._subscribers.pop(run_id, None)

    def listen_access(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(repo)`` when a delivery says permissions on ``repo`` may have changed
        (``"*"``: any repository); a run's trust policy drops its cached answers then."""
        with self._lock:
            self._access_listeners.append(listener)

    def unlisten_access(self, listener: Callable[[str], None]) -> None:
        with self._lock:
            if listener in self._access_listeners:
                self._access_listeners.remove(listener)

    def _access_changed(self, repo: str) -> None:
        with self._lock:
            listeners = list(self._access_listeners)
        for listener in listeners:
            listener(repo)

    def subscribed(self) -> list[str]:
        with self._lock:
            return sorted(self._subscribers)

    # -- intake ---------------------------------------------------------------------------------

    def wake(self) -> None:
        """A webhook delivery was stored: process it soon. Returns at once (it runs on the web
        server's event loop). Without a hub thread, the subscribed runs are woken to pump."""
        self._woken.set()
        if self._thread is None:
            with self._lock:
                subscribers = list(self._subscribers.values())
            for subscriber in subscribers:
                subscriber.wakeup.set()

    def pump(self) -> bool:
        """One pass: process stored deliveries, then poll every client whose poll is due, routing
        what arrives to the runs by PR and waking them. False if another thread's pass was under way
        (its result serves this caller too)."""
        if not self._pumping.acquire(blocking=False):
            return False
        try:
            self._woken.clear()
            touched: set[str] = set()
            process_deliveries(
                self.store, own_logins=self.own_logins, touched=touched, on_access_change=self._access_changed
            )
            for forge_id, feed, interval in self._due_feeds():
                touched |= self._poll(forge_id, feed, interval)
            with self._lock:
                woken = [self._subscribers[r].wakeup for r in touched if r in self._subscribers]
            for wakeup in woken:
                wakeup.set()
            return True
        finally:
            self._pumping.release()

    def next_poll_in(self) -> float:
        """Seconds until a client's poll is due (0: now); IDLE_WAIT_S when nothing polls."""
        waits = [feed.poller.wait(interval) for _, feed, interval in self._feeds_with_intervals()]
        return min(waits, default=IDLE_WAIT_S)

    def _feeds_with_intervals(self) -> list[tuple[int, _Feed, float]]:
        with self._lock:
            out = []
            for forge_id, feed in self._feeds.items():
                intervals = [
                    s.interval_s for s in self._subscribers.values() if s.poll and id(s.forge) == forge_id
                ]
                if intervals:
                    out.append((forge_id, feed, min(intervals)))
            return out

    def _due_feeds(self) -> list[tuple[int, _Feed, float]]:
        return [
            (i, feed, interval)
            for i, feed, interval in self._feeds_with_intervals()
            if feed.poller.due(interval)
        ]

    def _poll(self, forge_id: int, feed: _Feed, interval: float) -> set[str]:
        with self._lock:
            runs = [s.run_id for s in self._subscribers.values() if s.poll and id(s.forge) == forge_id]
        wanted = {(p.repo, p.number) for p in self.store.pulls_of(runs)}
        for repo, number in wanted - feed.watched:
            feed.poller.watch(repo, number)
        for repo, number in feed.watched - wanted:
            feed.poller.unwatch(repo, number)
        feed.watched = wanted
        touched: set[str] = set()
        for event in feed.poller.poll():
            owner = self.store.pull_by_number(event.repo, event.pr_number)
            if owner is not None and ingest(
                self.store, owner.run_id, owner.component, [event], self.own_logins
            ):
                touched.add(owner.run_id)
        for repo, pull in feed.poller.pull_changes():
            run = apply_pull_state(self.store, repo, pull.number, pull.state, pull.merged, delivery_id=None)
            if run is not None:
                touched.add(run)
        return touched

    # -- the hub thread (the server) ------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the hub pumps on a thread of its own (``start``)."""
        return self._thread is not None

    def start(self) -> None:
        """Pump on a thread of its own from now on: on every ``wake`` and whenever a poll is due."""
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="crucible-feedback-hub", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread (the pass under way finishes first)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping.set()
        self._woken.set()
        thread.join(timeout=timeout_s)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.pump()
            except Exception:  # a failed pass must not end the intake; the next one retries
                log.exception("feedback intake pass failed")
            self._woken.wait(max(0.05, min(IDLE_WAIT_S, self.next_poll_in())))

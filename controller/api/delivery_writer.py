"""One thread that hands webhook deliveries to a sink in batches, for the webhook route (``webhooks.py``).

The sink parses each raw body and stores the JSON objects in one transaction: ``StoreSink`` in this
process, or ``writer_process.ProcessSink`` in a child process (ADR-0002 decision 12).

Why one writer: a database takes one write transaction at a time (SQLite serialises writers
outright), and each transaction has a fixed cost (session, BEGIN, COMMIT) besides its rows. When
every request stored its own delivery from the threadpool, up to 40 of them raced for the write
lock; SQLite's busy handler put the losers to sleep with growing back-offs while the database sat
idle (p99 over 300 ms), and the thread handoffs cost more CPU than the insert.

How: the route hands the delivery over with an asyncio future and awaits it. Deliveries handed
over during one turn of the event loop are *released* to the writer together when that turn ends
(one ``call_soon`` per turn), so requests that arrived together are stored together instead of the
thread waking for the first and committing it alone. The writer takes everything released (up to
``max_batch``), hands it to the sink (one transaction), and resolves
the futures with one ``call_soon_threadsafe`` per batch. While it commits, the next batch
gathers: batches grow with the load, with no timer and no added wait when the load is light.

Durability is unchanged: a future resolves only after the commit, so a 202 still means stored.
A batch fails as a whole (nothing of it stored): RetryLaterError (database busy or unreachable)
reaches every request of the batch. Any other error is retried one delivery at a time, so a
delivery the database refuses fails alone instead of taking its batch-mates with it.

Bounded: when more than ``max_waiting`` deliveries (or ``max_waiting_bytes`` of payload) wait,
``save`` raises ``Overloaded`` (a RetryLaterError) at once instead of letting memory grow; so it
does before ``start`` and after ``stop``. ``stop`` refuses new deliveries, stores every waiting
one, and joins the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from controller.api.payloads import json_object
from controller.domain.errors import RetryLaterError
from controller.store import NewDelivery
from controller.store.ports import DeliveryQueue

log = logging.getLogger(__name__)

MAX_WAITING = 4096  # deliveries; 16 busy clients keep at most 16 waiting
MAX_WAITING_BYTES = 256 * 1024 * 1024  # payload text; ten GitHub-sized (25 MB) bodies
MAX_BATCH = 256  # deliveries per transaction, so one commit stays short under a flood
THREAD_NAME = "crucible-webhook-writer"


class Overloaded(RetryLaterError):
    """The writer takes no delivery now: too many are waiting, or it is not running."""


class Outcome(StrEnum):
    """What became of one delivery handed to the writer."""

    STORED = "stored"  # newly stored: 202 queued
    DUPLICATE = "duplicate"  # its id was stored before: 202 duplicate
    MALFORMED = "malformed"  # not a JSON object: 400, nothing stored


@dataclass(frozen=True)
class RawDelivery:
    """A verified delivery as it arrived: its id, event and body bytes (parsed by the sink)."""

    id: str
    event: str
    body: bytes


class Sink(Protocol):
    """Where batches go: parse each body, store the JSON objects in one transaction, say what
    became of each (in order). RetryLaterError when the database is busy (nothing stored)."""

    def __call__(self, batch: Sequence[RawDelivery]) -> list[Outcome]: ...

    def start(self) -> None: ...

    def close(self) -> None: ...


class StoreSink:
    """The sink in this process: ``json_object`` then ``save_deliveries`` (the ``DeliveryQueue`` port)."""

    def __init__(self, store: DeliveryQueue) -> None:
        self.store = store

    def __call__(self, batch: Sequence[RawDelivery]) -> list[Outcome]:
        parsed = [json_object(d.body) for d in batch]
        valid = [
            NewDelivery(d.id, d.event, _action(found[0]), found[1])
            for d, found in zip(batch, parsed, strict=True)
            if found is not None
        ]
        stored = iter(self.store.save_deliveries(valid))
        return [
            Outcome.MALFORMED if found is None else (Outcome.STORED if next(stored) else Outcome.DUPLICATE)
            for found in parsed
        ]

    def start(self) -> None:
        """Nothing to start: the store is open."""

    def close(self) -> None:
        """The store belongs to the caller."""


def _action(payload: Mapping[str, object]) -> str | None:
    action = payload.get("action")
    return action if isinstance(action, str) else None


@dataclass(frozen=True)
class _Waiting:
    delivery: RawDelivery
    future: asyncio.Future[Outcome]
    loop: asyncio.AbstractEventLoop


class DeliveryWriter:
    """Stores deliveries handed to ``save`` in batches from one thread (see the module docstring)."""

    def __init__(
        self,
        sink: Sink,
        *,
        max_waiting: int = MAX_WAITING,
        max_waiting_bytes: int = MAX_WAITING_BYTES,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._sink = sink
        self._max_waiting = max_waiting
        self._max_bytes = max_waiting_bytes
        self._max_batch = max_batch
        self._changed = threading.Condition()
        self._waiting: list[_Waiting] = []
        self._waiting_bytes = 0
        self._accepting = False
        self._release_pending: set[asyncio.AbstractEventLoop] = set()  # a ``_release`` is scheduled
        self._released = False  # the writer may take what is waiting
        self._writing = 0
        self._thread: threading.Thread | None = None

    @property
    def waiting(self) -> int:
        """Deliveries handed to ``save`` and not yet taken into a batch."""
        with self._changed:
            return len(self._waiting)

    @property
    def writing(self) -> int:
        """Deliveries in the batch being stored now (their requests are not answered yet)."""
        with self._changed:
            return self._writing

    def start(self) -> None:
        """Start the thread (once; a stopped writer stays stopped)."""
        with self._changed:
            if self._thread is not None:
                raise RuntimeError("a DeliveryWriter starts once")
            self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
            self._accepting = True
        self._sink.start()
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Refuse new deliveries, store the waiting ones, and wait (up to ``timeout``) for the thread."""
        with self._changed:
            self._accepting = False
            self._changed.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    async def save(self, delivery: RawDelivery) -> Outcome:
        """Parse and store ``delivery``: STORED, DUPLICATE (a known id) or MALFORMED (not stored).

        Returns only after the commit. Overloaded (at once) when the writer takes nothing now;
        RetryLaterError when the database was busy; other store errors as they were raised.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        size = len(delivery.body)
        with self._changed:
            if not self._accepting:
                raise Overloaded("the webhook writer is not running (starting or shutting down)")
            if len(self._waiting) >= self._max_waiting or self._waiting_bytes + size > self._max_bytes:
                raise Overloaded(f"{len(self._waiting)} deliveries are waiting to be stored")
            self._waiting.append(_Waiting(delivery, future, loop))
            self._waiting_bytes += size
            if loop not in self._release_pending:
                self._release_pending.add(loop)
                loop.call_soon(self._release, loop)
        return await future

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let the writer take what is waiting: run on ``loop`` after the requests it is handling
        now, so those that arrived together are stored together."""
        with self._changed:
            self._release_pending.discard(loop)
            if self._waiting:
                self._released = True
                self._changed.notify()

    def _run(self) -> None:
        try:
            while batch := self._next_batch():
                self._write(batch)
                with self._changed:
                    self._writing = 0
        finally:
            self._sink.close()

    def _next_batch(self) -> list[_Waiting]:
        """The oldest waiting deliveries (up to ``max_batch``), once there are any; [] to stop."""
        with self._changed:
            self._changed.wait_for(lambda: self._released or not self._accepting)
            batch, self._waiting = self._waiting[: self._max_batch], self._waiting[self._max_batch :]
            self._released = bool(self._waiting)
            self._waiting_bytes -= sum(len(w.delivery.body) for w in batch)
            self._writing = len(batch)
            return batch

    def _write(self, batch: Sequence[_Waiting]) -> None:
        outcomes: list[Outcome | BaseException]
        try:
            outcomes = list(self._sink([w.delivery for w in batch]))
        except RetryLaterError as exc:
            log.warning("webhook deliveries not stored (%d answered 503): %s", len(batch), exc)
            outcomes = [RetryLaterError(str(exc)) for _ in batch]  # one exception object per request
        except Exception as exc:
            if len(batch) == 1:
                log.exception("webhook delivery %s not stored", batch[0].delivery.id)
                outcomes = [exc]
            else:  # find the delivery the database refuses: each alone
                for waiting in batch:
                    self._write([waiting])
                return
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Waiting, Outcome | BaseException]]] = {}
        for waiting, outcome in zip(batch, outcomes, strict=True):
            by_loop.setdefault(waiting.loop, []).append((waiting, outcome))
        for loop, settled in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for these answers
                loop.call_soon_threadsafe(_settle, settled)


def _settle(settled: Sequence[tuple[_Waiting, Outcome | BaseException]]) -> None:
    """Resolve the futures (on their loop); a request that went away has cancelled its own."""
    for waiting, outcome in settled:
        if waiting.future.done():
            continue
        if isinstance(outcome, BaseException):
            waiting.future.set_exception(outcome)
        else:
            waiting.future.set_result(outcome)

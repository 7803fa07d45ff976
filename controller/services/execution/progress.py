"""The running turn's progress as events: its step and each measured sample as it arrives.

A decision event says what a turn came to; a person watching a run (the dashboard, ``--events``)
also wants to see where a turn of several minutes is and how its samples are falling. These events
are written through the ledger like every other, so a local loop, ``crucible serve`` and a worker
report them alike, at modest volume: one per step and one per measured sample (warmups are not
reported), each a few fields. They are progress only: nothing decides or recovers from them. A
parallel turn's hypotheses (ADR-0016) each report their own, with ``parallel_index`` added; a turn of
one leaves it out, so its events keep the shape ``docs/cli.md`` documents.

They are grouped (ADR-0046): an event waits up to ``FLUSH_AFTER_S`` for the ones after it and they are
written together, in one transaction (``Ledger.append_events``), by a timer, or by the turn's decision
(``take``, ADR-0048: in the decision's own transaction, before its event), so they still come before
it. A turn of a few hundred milliseconds wrote
five transactions of progress (three steps, a sample per arm): now one. A person watching sees a step at
most ``FLUSH_AFTER_S`` late; a crash loses at most that much progress, which nothing recovers from.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from controller.domain import events
from controller.domain.enums import EventKind, SampleArm, TurnStep
from controller.store.ledger import Ledger

P = TypeVar("P", bound=events.EventPayload)

FLUSH_AFTER_S = 1.0
"""How long a progress event may wait for the next ones before it is written anyway."""


class TurnProgress:
    """Writes ``turn_step`` and ``sample`` events for turn ``turn`` of round ``round`` (of its
    hypothesis ``parallel_index`` when the turn runs several)."""

    def __init__(
        self,
        ledger: Ledger,
        run_id: str,
        turn: int,
        round: int,
        metric: str,
        parallel_index: int | None = None,
        flush_after: float = FLUSH_AFTER_S,
    ) -> None:
        self.ledger, self.run_id, self.metric = ledger, run_id, metric
        self.turn, self.round, self.parallel_index = turn, round, parallel_index
        self.flush_after = flush_after
        self._pending: list[tuple[EventKind, Mapping[str, Any]]] = []
        # Held while an event is queued and while pending events are written, so a write by the timer
        # and the turn's own flush never interleave (ids follow the order of the events).
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def _of_hypothesis(self, payload: P) -> P:
        """The payload with the hypothesis it is of; a turn of one leaves the field out."""
        if self.parallel_index is None:
            return payload
        return payload.model_copy(update={"parallel_index": self.parallel_index})

    def step(self, step: TurnStep, arms: Sequence[SampleArm] = ()) -> None:
        payload = events.TurnStepPayload(turn=self.turn, round=self.round, step=step)
        if arms:
            payload = payload.model_copy(update={"arms": list(arms)})
        self._queue(EventKind.TURN_STEP, self._of_hypothesis(payload).dump())

    def sample(self, arm: SampleArm, index: int, values: dict[str, float], valid: bool) -> None:
        """One measured sample (``measure``'s ``on_sample``): the primary metric's value, or null
        when the sample is invalid."""
        value = values.get(self.metric) if valid else None
        finite = value if value is not None and math.isfinite(value) else None
        payload = events.SamplePayload(
            turn=self.turn, round=self.round, arm=arm, index=index, value=finite, valid=valid
        )
        self._queue(EventKind.SAMPLE, self._of_hypothesis(payload).dump())

    def flush(self) -> None:
        """Write the pending events now: before the turn's decision (or a hypothesis's report), so they
        come first. Ledger errors propagate and the events stay pending."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._write()

    def take(self) -> list[tuple[EventKind, Mapping[str, Any]]]:
        """The pending events, handed to the caller to write with the turn's decision
        (``Ledger.decide_turn(progress=...)``, ADR-0048): one transaction instead of two. The timer is
        stopped and the events are forgotten here: a decision that fails loses them with it (the turn
        is run again from its start, with progress of its own), as a crash does."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            taken, self._pending = self._pending, []
            return taken

    def flush_after_error(self) -> None:
        """``flush`` for a turn an exception cut off: that exception is the one to report, so a ledger
        error here is dropped with the pending events (progress only)."""
        with contextlib.suppress(Exception):
            self.flush()

    def _queue(self, kind: EventKind, payload: Mapping[str, Any]) -> None:
        with self._lock:
            self._pending.append((kind, payload))
            if self._timer is None:
                timer = threading.Timer(self.flush_after, self._flush_late)
                timer.args = (timer,)
                timer.daemon = True
                self._timer = timer
                timer.start()

    def _flush_late(self, timer: threading.Timer) -> None:
        """The timer's flush, in its own thread. A ledger error leaves the events pending for the turn's
        own ``flush``, which reports it (a thread has nobody to tell)."""
        with self._lock:
            if self._timer is not timer:  # flushed (and maybe queued again) meanwhile
                return
            self._timer = None
            try:
                self._write()
            except Exception:  # the turn's own flush raises it again
                return

    def _write(self) -> None:
        """The pending events in one write (the caller holds the lock)."""
        if not self._pending:
            return
        self.ledger.append_events(self.run_id, self._pending)
        self._pending.clear()

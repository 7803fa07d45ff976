"""The runs a server holds, and where each is: driven by a thread, or parked without one (ADR-0020).

A run watching its PRs for review feedback spends nearly all its life waiting. ``crucible serve``
therefore parks it: no thread and no ``RunContext`` while it waits, only this small record (its
signals, its lease's heartbeat, when to look again) and its subscription in the feedback hub. What
wakes a parked run rings its ``Bell`` (the ``Signals.wakeup`` event the hub, a steer, a cancel and the
lease keeper already set), which makes it due; the scheduler then gives it a thread for one step of
its watch. A run moves BUSY -> PARKED -> DUE -> BUSY (``SLOT_TRANSITIONS``); the scheduler's lock
guards every move.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from controller.domain.errors import ConflictError
from controller.services.control.service import Signals
from controller.services.execution.liveness import Heartbeat


class Slot(StrEnum):
    """Where a run this process holds is. BUSY: a thread drives it (its search, a round, a look at
    its feedback); PARKED: it waits for news or its timer; DUE: woken, waiting for a thread."""

    BUSY = "busy"
    PARKED = "parked"
    DUE = "due"


SLOT_TRANSITIONS: dict[Slot, frozenset[Slot]] = {
    Slot.BUSY: frozenset({Slot.PARKED}),
    Slot.PARKED: frozenset({Slot.DUE}),
    Slot.DUE: frozenset({Slot.BUSY}),
}


class Bell(threading.Event):
    """An event that also calls ``ring`` when set: what sets a run's wakeup while the run is parked
    (nobody waits on the event then) reaches the scheduler."""

    def __init__(self, ring: Callable[[], None]) -> None:
        super().__init__()
        self._ring = ring

    def set(self) -> None:
        super().set()
        self._ring()


@dataclass
class Held:
    """A run this process holds the lease of.

    seen: the newest event id (of any run) the scheduler knew of when the run last looked; an event
        of the run beyond it, written by another replica (a webhook it stored, a steer it took), makes
        a parked run due. due_at: monotonic seconds when a parked run looks again though nothing woke
        it (None: only news). retries: busy-database retries in a row (the backoff grows with them).
    """

    signals: Signals
    thread: threading.Thread | None = None
    beat: Heartbeat | None = None
    slot: Slot = Slot.BUSY
    due_at: float | None = None
    seen: int = 0
    retries: int = 0
    watched: bool = False  # it has parked at least once: its search is done, each step is a look

    def move(self, slot: Slot) -> None:
        if slot not in SLOT_TRANSITIONS[self.slot]:
            raise ConflictError(f"a held run cannot move from {self.slot} to {slot}")
        self.slot = slot

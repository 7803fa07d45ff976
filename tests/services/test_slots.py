"""The held runs' slots (ADR-0020): BUSY -> PARKED -> DUE -> BUSY and nothing else, and the bell
that reaches the scheduler when a parked run's wakeup is set."""

from __future__ import annotations

import pytest

from controller.domain.errors import ConflictError
from controller.services.control.parking import SLOT_TRANSITIONS, Bell, Held, Slot
from controller.services.control.service import Signals


def test_a_held_run_moves_only_along_the_table() -> None:
    held = Held(Signals())
    for slot in (Slot.PARKED, Slot.DUE, Slot.BUSY):
        held.move(slot)
    assert held.slot is Slot.BUSY
    for start in Slot:
        for target in set(Slot) - SLOT_TRANSITIONS[start]:
            held.slot = start
            with pytest.raises(ConflictError, match=f"from {start} to {target}"):
                held.move(target)


def test_a_bell_is_an_event_that_rings() -> None:
    rung: list[int] = []
    bell = Bell(lambda: rung.append(1))
    assert not bell.is_set() and not bell.wait(0)
    bell.set()
    assert bell.is_set() and rung == [1]
    bell.clear()
    assert not bell.is_set() and rung == [1], "clearing rings nothing"

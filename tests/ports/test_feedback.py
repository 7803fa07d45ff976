"""The ``PullRecords``, ``FeedbackRecords``, ``DeliveryQueue`` and ``RoundRecords`` contracts
(``controller.store.ports.feedback``) for every implementation: a run's PRs, the feedback on them,
the webhook deliveries it arrives in, and the refinement rounds that consume it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.domain.enums import EventKind, RunPhase
from controller.domain.errors import ConflictError, NotFoundError
from controller.forge.base import FeedbackEvent
from controller.store import NewDelivery, PullRecord
from controller.store.ports import DeliveryQueue, FeedbackRecords, PullRecords, RoundRecords
from tests.ports.conftest import SHA_A, SHA_B, PortHarness


def pull(run_id: str = "r1", component: str = "app", number: int = 7, **changes: object) -> PullRecord:
    rec = PullRecord(
        run_id=run_id,
        component=component,
        repo=f"acme/{component}",
        number=number,
        url=f"https://forge.test/acme/{component}/pull/{number}",
        branch=f"crucible/{run_id}",
        head_sha=SHA_B,
        pushed_sha=SHA_B,
        base_sha=SHA_A,
    )
    return replace(rec, **changes)  # type: ignore[arg-type]


def comment(external_id: int = 1001, **changes: object) -> FeedbackEvent:
    fields: dict[str, object] = dict(
        repo="acme/app",
        pr_number=7,
        source="review_comment",
        external_id=external_id,
        review_id=77,
        author="alice",
        author_type="User",
        association="OWNER",
        body="use a smaller buffer",
        path="src/a.py",
        line=3,
        action="created",
        updated_at="2026-01-01T00:00:00Z",
        url="https://forge.test/acme/app/pull/7#discussion_r1001",
    )
    fields.update(changes)
    return FeedbackEvent(**fields)  # type: ignore[arg-type]


def test_a_pull_is_saved_once_per_run_and_component_and_found_by_number(harness: PortHarness) -> None:
    pulls: PullRecords = harness.impl
    harness.seed_run("r1", components=("app", "lib"))
    harness.seed_run("r2")
    pulls.save_pull(pull("r1", "lib", 8))
    pulls.save_pull(pull("r1", "app", 7))
    pulls.save_pull(pull("r1", "app", 7, pushed_sha=SHA_A, note="paused"))  # an update, not a second PR
    pulls.save_pull(pull("r2", "app", 9))
    assert [(p.component, p.number) for p in pulls.list_pulls("r1")] == [("app", 7), ("lib", 8)]
    assert pulls.list_pulls("r1")[0].note == "paused"
    assert sorted(p.number for p in pulls.pulls_of(["r1", "r2", "nope"])) == [7, 8, 9]
    assert pulls.pulls_of([]) == []
    found = pulls.pull_by_number("acme/app", 9)
    assert found is not None and found.run_id == "r2"
    assert pulls.pull_by_number("acme/app", 99) is None


def test_a_pull_state_changes_once_with_its_event(harness: PortHarness) -> None:
    pulls: PullRecords = harness.impl
    harness.seed_run("r1")
    pulls.save_pull(pull())
    closed = (EventKind.PR_CLOSED, {"number": 7})
    assert pulls.set_pull_state("r1", "app", "closed", event=closed) is True
    assert pulls.set_pull_state("r1", "app", "closed", event=closed) is False, "already closed"
    assert pulls.list_pulls("r1")[0].state == "closed"
    assert len(harness.impl.list_events("r1", kinds=[EventKind.PR_CLOSED])) == 1
    with pytest.raises(NotFoundError):
        pulls.set_pull_state("r1", "nope", "closed")


def test_feedback_is_stored_once_per_version_judged_and_consumed(harness: PortHarness) -> None:
    feedback: FeedbackRecords = harness.impl
    harness.seed_run("r1")
    first = feedback.add_feedback("r1", "app", comment())
    assert first is not None and first.verdict is None and first.round is None
    assert feedback.add_feedback("r1", "app", comment()) is None, "the same version twice is one item"
    edited = feedback.add_feedback("r1", "app", comment(action="edited", body="smaller still"))
    assert edited is not None and edited.id != first.id
    assert [f.id for f in feedback.list_feedback("r1")] == [first.id, edited.id]
    assert len(harness.impl.list_events("r1", kinds=[EventKind.FEEDBACK_RECEIVED])) == 2

    judged = feedback.set_feedback_verdict(first.id, trusted=True, verdict="accepted", reason="owner")
    assert (judged.trusted, judged.verdict, judged.reason) == (True, "accepted", "owner")
    assert [f.id for f in feedback.list_feedback("r1", undecided_only=True)] == [edited.id]
    feedback.assign_round([first.id], 1)
    assert [f.id for f in feedback.list_feedback("r1", round=1)] == [first.id]
    with pytest.raises(NotFoundError):
        feedback.assign_round([first.id, 999_999], 2)
    assert feedback.list_feedback("r1", round=2) == [], "all or nothing"
    with pytest.raises(NotFoundError):
        feedback.add_feedback("nope", "app", comment())
    with pytest.raises(ValueError):
        feedback.set_feedback_verdict(first.id, trusted=True, verdict="maybe", reason="")


def test_deliveries_are_stored_first_once_per_id_and_processed_later(harness: PortHarness) -> None:
    queue: DeliveryQueue = harness.impl
    assert queue.save_delivery("d1", "issue_comment", "created", {"n": 1}) is True
    assert queue.save_delivery("d1", "issue_comment", "created", {"n": 1}) is False, "a redelivery"
    batch = [NewDelivery("d2", "pull_request", "closed", '{"n": 2}'), NewDelivery("d2", "ping", None, "{}")]
    assert queue.save_deliveries([*batch, NewDelivery("d1", "ping", None, "{}")]) == [True, False, False]
    assert [(d.id, d.payload) for d in queue.pending_deliveries()] == [("d1", {"n": 1}), ("d2", {"n": 2})]
    assert [d.id for d in queue.pending_deliveries(limit=1)] == ["d1"]
    queue.mark_delivery_processed("d1")
    queue.mark_delivery_processed("d1")  # idempotent
    assert [d.id for d in queue.pending_deliveries()] == ["d2"]
    with pytest.raises(NotFoundError):
        queue.mark_delivery_processed("nope")
    with pytest.raises(ValueError):
        queue.save_delivery("d3", "ping", None, {"x": float("nan")})


def test_a_round_starts_from_watching_consumes_its_feedback_and_ends_watching(harness: PortHarness) -> None:
    rounds: RoundRecords = harness.impl
    harness.seed_run("r1")
    item = harness.impl.add_feedback("r1", "app", comment())
    assert item is not None
    with pytest.raises(ConflictError):
        rounds.start_round("r1", 1, [item.id], {"round": 1})  # still searching: not watching yet
    rounds.set_phase("r1", RunPhase.WATCHING)
    rounds.set_phase("r1", RunPhase.WATCHING)  # already there: a no-op
    with pytest.raises(ConflictError):
        rounds.start_round("r1", 2, [item.id], {"round": 2})  # not the next round
    with pytest.raises(NotFoundError):
        rounds.start_round("r1", 1, [999_999], {"round": 1})
    assert harness.impl.get_run("r1").round == 0, "a refused start wrote nothing"
    rounds.start_round("r1", 1, [item.id], {"round": 1})
    run = harness.impl.get_run("r1")
    assert (run.round, run.phase) == (1, RunPhase.ROUND)
    assert [f.round for f in harness.impl.list_feedback("r1")] == [1]
    with pytest.raises(ConflictError):
        rounds.finish_round("r1", 2, [])
    rounds.finish_round("r1", 1, [(EventKind.ROUND_FINISHED, {"round": 1})])
    assert harness.impl.get_run("r1").phase == RunPhase.WATCHING
    kinds = [
        e.kind
        for e in harness.impl.list_events("r1", kinds=[EventKind.ROUND_STARTED, EventKind.ROUND_FINISHED])
    ]
    assert kinds == [EventKind.ROUND_STARTED, EventKind.ROUND_FINISHED]

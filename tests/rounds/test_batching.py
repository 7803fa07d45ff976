"""Pure batching rules: reviews batch at once, lone comments after the quiet window, edits replace,
deletions drop, consumed feedback never triggers again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controller.services.feedback.rounds import current_versions, next_ready_in, ready_batches
from controller.store.records import FeedbackRecord, FeedbackSource, FeedbackVerdict

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _item(id: int, **changes: Any) -> FeedbackRecord:
    fields: dict[str, Any] = dict(
        id=id,
        run_id="r1",
        component="app",
        pr_number=1,
        source=FeedbackSource.REVIEW_COMMENT,
        external_id=100 + id,
        review_id=None,
        author="bob",
        author_type="User",
        association="COLLABORATOR",
        body=f"comment {id}",
        path="a.py",
        line=1,
        action="created",
        updated_at=f"2026-01-01T00:00:{id:02d}Z",
        url="",
        received_at=T0 + timedelta(seconds=id),
        trusted=True,
        verdict=FeedbackVerdict.ACCEPTED,
        reason="write access",
        round=None,
    )
    fields.update(changes)
    return FeedbackRecord(**fields)


def test_a_review_is_one_batch_at_once_and_lone_comments_wait_for_quiet() -> None:
    review = [_item(1, review_id=7), _item(2, review_id=7), _item(3, review_id=7)]
    lone = [_item(4)]
    batches = ready_batches([*review, *lone], T0 + timedelta(seconds=5), quiet_window_s=90)
    assert [[i.id for i in b.items] for b in batches] == [[1, 2, 3]]
    later = ready_batches([*review, *lone], T0 + timedelta(seconds=200), quiet_window_s=90)
    assert [[i.id for i in b.items] for b in later] == [[1, 2, 3], [4]]


def test_edits_replace_deletions_drop_and_consumed_never_returns() -> None:
    original = _item(1, external_id=500, body="use 4")
    edited = _item(2, external_id=500, body="use 8", action="edited", updated_at="2026-01-01T00:01:00Z")
    deleted_first = _item(3, external_id=600)
    deleted = _item(4, external_id=600, action="deleted", updated_at="2026-01-01T00:02:00Z")
    consumed = _item(5, external_id=700, round=1)
    edit_after_consumed = _item(6, external_id=700, action="edited", updated_at="2026-01-01T00:03:00Z")
    untrusted = _item(7, verdict=FeedbackVerdict.REJECTED, trusted=False)
    current = current_versions(
        [original, edited, deleted_first, deleted, consumed, edit_after_consumed, untrusted]
    )
    assert [(i.id, i.body) for i in current] == [(2, "use 8")]


def test_an_operators_steer_is_a_batch_of_its_own_at_once() -> None:
    """A steer (``POST /api/runs/{id}/rounds``) needs no quiet window and joins no comment's batch."""
    steer = _item(2, source=FeedbackSource.STEER, external_id=7, path=None, line=None, author="operator")
    lone = _item(1)
    batches = ready_batches([lone, steer], T0 + timedelta(seconds=5), quiet_window_s=90)
    assert [[i.id for i in b.items] for b in batches] == [[2]]


def test_a_parked_run_looks_again_when_the_oldest_waiting_window_runs_out() -> None:
    """``next_ready_in`` says when ``ready_batches`` would first give more: per component, the
    newest lone comment's quiet window; reviews and steers never wait."""
    assert next_ready_in([_item(1, review_id=7), _item(2, source=FeedbackSource.STEER)], T0, 90) is None
    lone = [_item(4), _item(10), _item(6, component="lib")]
    now = T0 + timedelta(seconds=20)
    assert next_ready_in(lone, now, 90) == 76.0  # lib: 6 + 90 - 20; app waits for 10 + 90 - 20
    assert next_ready_in(lone, T0 + timedelta(seconds=500), 90) == 0.0
    soon = next_ready_in(lone, now, 90)
    assert soon is not None
    later = now + timedelta(seconds=soon)
    assert [b.component for b in ready_batches(lone, later, 90)] == ["lib"]
    assert ready_batches(lone, later - timedelta(seconds=1), 90) == []

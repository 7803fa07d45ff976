"""The store half of the intake, on SQLite and PostgreSQL: deliveries, feedback, the 0003 upgrade."""

from __future__ import annotations

import threading

import pytest
from alembic import command

from controller.domain.enums import EventKind
from controller.domain.errors import NotFoundError
from controller.forge.github_json import review_comment_event
from controller.services.feedback.intake import process_deliveries
from controller.store import FeedbackSource, FeedbackVerdict, Store, migrate
from tests.store.old_rows import insert_old_run
from tests.webhooks.helpers import PR, REPO, comment_event, publish


def test_a_delivery_is_stored_once_and_processed_once(store: Store) -> None:
    assert store.save_delivery("d-1", "issue_comment", "created", {"n": 1})
    assert not store.save_delivery("d-1", "issue_comment", "created", {"n": 2})
    assert store.save_delivery("d-2", "ping", None, {})
    pending = store.pending_deliveries()
    assert [(d.id, d.event, d.action, d.payload) for d in pending] == [
        ("d-1", "issue_comment", "created", {"n": 1}),
        ("d-2", "ping", None, {}),
    ]
    store.mark_delivery_processed("d-1")
    store.mark_delivery_processed("d-1")
    assert [d.id for d in store.pending_deliveries()] == ["d-2"]
    assert [d.id for d in store.pending_deliveries(limit=0)] == []
    with pytest.raises(NotFoundError):
        store.mark_delivery_processed("nope")


def test_racing_saves_of_one_delivery_store_it_once(store: Store) -> None:
    results: list[bool] = []
    lock = threading.Lock()

    def save() -> None:
        stored = store.save_delivery("same", "issue_comment", "created", {})
        with lock:
            results.append(stored)

    threads = [threading.Thread(target=save) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 7 + [True]


def test_feedback_is_one_item_per_version(store: Store) -> None:
    publish(store)
    first = store.add_feedback("r1", "router", comment_event())
    assert first is not None
    assert (first.source, first.external_id, first.line, first.verdict, first.round) == (
        FeedbackSource.REVIEW_COMMENT,
        1001,
        3,
        None,
        None,
    )
    assert store.add_feedback("r1", "router", comment_event()) is None
    edited = store.add_feedback("r1", "router", comment_event(action="edited", body="v2"))
    deleted = store.add_feedback("r1", "router", comment_event(action="deleted", body="v2"))
    assert edited is not None and deleted is not None
    assert len({first.id, edited.id, deleted.id}) == 3
    assert [f.action for f in store.list_feedback("r1")] == ["created", "edited", "deleted"]
    kinds = [e.kind for e in store.list_events("r1")]
    assert kinds.count(EventKind.FEEDBACK_RECEIVED) == 3


def test_feedback_needs_a_run_and_a_known_source(store: Store) -> None:
    with pytest.raises(NotFoundError):
        store.add_feedback("nope", "router", comment_event())
    publish(store)
    with pytest.raises(ValueError):
        store.add_feedback("r1", "router", comment_event(source="commit_comment"))
    assert store.list_feedback("r1") == []


def test_verdicts_and_rounds(store: Store) -> None:
    publish(store)
    a = store.add_feedback("r1", "router", comment_event(external_id=1))
    b = store.add_feedback("r1", "router", comment_event(external_id=2))
    assert a is not None and b is not None
    store.set_feedback_verdict(a.id, trusted=True, verdict="accepted", reason="owner")
    assert [f.id for f in store.list_feedback("r1", undecided_only=True)] == [b.id]
    (decided,) = [f for f in store.list_feedback("r1") if f.id == a.id]
    assert (decided.trusted, decided.verdict, decided.reason) == (True, FeedbackVerdict.ACCEPTED, "owner")
    with pytest.raises(ValueError):
        store.set_feedback_verdict(b.id, trusted=False, verdict="maybe", reason="x")
    with pytest.raises(NotFoundError):
        store.set_feedback_verdict(999_999, trusted=False, verdict="rejected", reason="x")
    store.assign_round([a.id], 1)
    assert [f.id for f in store.list_feedback("r1", round=1)] == [a.id]
    with pytest.raises(NotFoundError):
        store.assign_round([b.id, 999_999], 2)
    assert store.list_feedback("r1", round=2) == []  # all or nothing


def test_pull_by_number_finds_the_newest_run(store: Store) -> None:
    assert store.pull_by_number(REPO, PR) is None
    publish(store, "r1")
    publish(store, "r2")
    found = store.pull_by_number(REPO.lower(), PR)
    assert found is not None and found.run_id == "r2"
    assert store.pull_by_number(REPO, PR + 1) is None


def test_set_pull_state_changes_once_with_its_event(store: Store) -> None:
    publish(store)
    event = (EventKind.PR_CLOSED, {"number": PR})
    assert store.set_pull_state("r1", "router", "closed", event=event)
    assert not store.set_pull_state("r1", "router", "closed", event=event)
    assert store.list_pulls("r1")[0].state == "closed"
    assert [e.kind for e in store.list_events("r1")] == [EventKind.PR_CLOSED]
    with pytest.raises(NotFoundError):
        store.set_pull_state("r1", "other", "closed")


def test_the_check_constraint_refuses_an_unknown_verdict_in_the_database(database_url: str) -> None:
    import sqlalchemy as sa

    with Store.open(database_url, upgrade=True) as s:
        publish(s)
        item = s.add_feedback("r1", "router", comment_event())
        assert item is not None
    engine = migrate.make_engine(database_url)
    try:
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(sa.text("UPDATE feedback SET verdict = 'maybe' WHERE id = :id"), {"id": item.id})
    finally:
        engine.dispose()


def test_upgrade_from_0002_keeps_the_data_and_matches_the_models(database_url: str) -> None:
    engine = migrate.make_engine(database_url)
    migrate.ensure_sqlite_dir(engine.url)
    with engine.begin() as conn:
        command.upgrade(migrate._config(conn), "0002")
    engine.dispose()
    assert migrate.current_revision(database_url) == "0002"
    # Rows as crucible at 0002 wrote them, then upgrade.
    engine = migrate.make_engine(database_url)
    try:
        with engine.begin() as conn:
            insert_old_run(conn)
    finally:
        engine.dispose()
    with Store.open(database_url, upgrade=True) as s:
        assert s.current_revision() == migrate.head_revision()
        assert s.get_run("r1").objective == "Cut latency"
        assert s.save_delivery("d", "ping", None, {})
        assert s.add_feedback("r1", "router", comment_event()) is not None
    assert migrate.schema_drift(database_url) == []


def test_an_edit_seen_by_a_webhook_and_by_the_poller_is_one_item(store: Store) -> None:
    # issue 11 §3: the webhook says "edited", a list cannot; with the same updated_at it is one version.
    publish(store)
    edited = comment_event(action="edited", body="v2", updated_at="2026-01-02T00:00:00Z")
    listed = {
        "id": edited.external_id,
        "pull_request_url": f"https://api.github.com/repos/{REPO}/pulls/{PR}",
        "pull_request_review_id": edited.review_id,
        "user": {"login": edited.author, "type": "User"},
        "author_association": edited.association,
        "body": "v2",
        "path": edited.path,
        "line": edited.line,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-02T00:00:00Z",
    }
    polled = review_comment_event(REPO, listed)
    assert polled.action == "edited"
    assert store.add_feedback("r1", "router", edited) is not None
    assert store.add_feedback("r1", "router", polled) is None
    unedited = review_comment_event(REPO, {**listed, "updated_at": listed["created_at"]})
    assert unedited.action == "created"
    assert [f.action for f in store.list_feedback("r1")] == ["edited"]


def test_access_webhooks_drop_cached_permissions(store: Store) -> None:
    store.save_delivery("d-1", "member", "edited", {"action": "edited", "repository": {"full_name": REPO}})
    store.save_delivery("d-2", "organization", "member_removed", {"action": "member_removed"})
    store.save_delivery("d-3", "issue_comment", "created", {"action": "created"})
    forgotten: list[str] = []

    assert process_deliveries(store, on_access_change=forgotten.append) == 3
    assert forgotten == [REPO, "*"]

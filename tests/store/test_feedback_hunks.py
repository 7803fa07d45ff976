"""The diff hunk of an inline comment in the store (revision 0004), on SQLite and PostgreSQL.

The steer quotes the hunk a reviewer saw, so the store must keep it per version (an edit brings its
own), leave it None where the forge sent none, and upgrade databases whose rows predate it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command

from controller.store import Store, migrate
from tests.store.old_rows import insert_old_run
from tests.webhooks.helpers import comment_event, publish

HUNK = "@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 3"
EDITED_HUNK = "@@ -1,4 +1,4 @@\n a = 1\n b = 3\n-c = 4\n+c = 5"


def test_each_version_keeps_its_own_hunk(store: Store) -> None:
    publish(store)
    first = store.add_feedback("r1", "router", comment_event(diff_hunk=HUNK))
    edited = store.add_feedback(
        "r1",
        "router",
        comment_event(action="edited", updated_at="2026-01-02T00:00:00Z", diff_hunk=EDITED_HUNK),
    )
    lone = store.add_feedback("r1", "router", comment_event(source="issue_comment", external_id=5, path=None))
    assert first is not None and edited is not None and lone is not None
    assert (first.diff_hunk, edited.diff_hunk, lone.diff_hunk) == (HUNK, EDITED_HUNK, None)
    stored = {(item.action, item.source): item.diff_hunk for item in store.list_feedback("r1")}
    assert stored == {
        ("created", "review_comment"): HUNK,
        ("edited", "review_comment"): EDITED_HUNK,
        ("created", "issue_comment"): None,
    }


def test_a_large_hunk_is_stored_whole(store: Store) -> None:
    """The store keeps what the forge sent; bounding it is the renderer's job (it may change)."""
    publish(store)
    hunk = "@@ -1,5000 +1,5000 @@\n" + "\n".join(f"+line {n} " + "x" * 80 for n in range(5000))
    item = store.add_feedback("r1", "router", comment_event(diff_hunk=hunk))
    assert item is not None
    assert store.list_feedback("r1")[0].diff_hunk == hunk


def test_upgrade_from_0003_keeps_old_rows_without_a_hunk(database_url: str) -> None:
    engine = migrate.make_engine(database_url)
    migrate.ensure_sqlite_dir(engine.url)
    with engine.begin() as conn:
        command.upgrade(migrate._config(conn), "0003")
    engine.dispose()
    engine = migrate.make_engine(database_url)
    try:
        with engine.begin() as conn:  # rows as crucible at 0003 wrote them (no diff_hunk column)
            insert_old_run(conn)
            conn.execute(
                sa.text(
                    "INSERT INTO feedback (run_id, component, pr_number, source, external_id, author,"
                    " author_type, association, body, path, line, action, updated_at, url, received_at)"
                    " VALUES ('r1', 'router', 2, 'review_comment', 1001, 'alice', 'User', 'OWNER',"
                    " 'old text', 'src/a.py', 3, 'created', '2026-01-01T00:00:00Z', '', :now)"
                ),
                {"now": "2026-01-01 00:00:00+00:00"},
            )
    finally:
        engine.dispose()
    with Store.open(database_url, upgrade=True) as s:
        assert s.current_revision() == migrate.head_revision()
        (before,) = s.list_feedback("r1")
        assert (before.body, before.diff_hunk) == ("old text", None)
        edit = comment_event(action="edited", updated_at="2026-01-02T00:00:00Z", diff_hunk=HUNK)
        after = s.add_feedback("r1", "router", edit)
        assert after is not None and after.diff_hunk == HUNK
    assert migrate.schema_drift(database_url) == []


def test_downgrade_to_0003_and_back_keeps_the_items(database_url: str) -> None:
    with Store.open(database_url, upgrade=True) as s:
        publish(s)
        assert s.add_feedback("r1", "router", comment_event(diff_hunk=HUNK)) is not None
    engine = migrate.make_engine(database_url)
    try:
        with engine.begin() as conn:
            command.downgrade(migrate._config(conn), "0003")
        assert migrate.current_revision(database_url) == "0003"
        with engine.connect() as conn:
            assert "diff_hunk" not in {c["name"] for c in sa.inspect(conn).get_columns("feedback")}
    finally:
        engine.dispose()
    with Store.open(database_url, upgrade=True) as s:
        (item,) = s.list_feedback("r1")
        assert (item.body, item.diff_hunk) == ("use a smaller buffer", None)
    assert migrate.schema_drift(database_url) == []

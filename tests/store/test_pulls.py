"""Pull-request records, and upgrading a database created by the previous schema revision."""

from __future__ import annotations

import pytest
from alembic import command

from controller.domain.errors import NotFoundError, SchemaOutdatedError
from controller.store import PullRecord, Store, migrate
from tests.support import component, new_run


def _pull(**changes: object) -> PullRecord:
    fields: dict[str, object] = dict(
        run_id="r1",
        component="router",
        repo="acme/router",
        number=7,
        url="http://forge/acme/router/pull/7",
        branch="crucible/r1",
        head_sha="a" * 40,
        pushed_sha="a" * 40,
        base_sha="b" * 40,
    )
    fields.update(changes)
    return PullRecord(**fields)  # type: ignore[arg-type]


def test_save_pull_inserts_then_updates(store: Store) -> None:
    store.create_run(new_run())
    store.add_component(component())
    store.save_pull(_pull())
    store.save_pull(_pull(head_sha="c" * 40, pushed_sha="c" * 40, paused=True))
    pulls = store.list_pulls("r1")
    assert pulls == [_pull(head_sha="c" * 40, pushed_sha="c" * 40, paused=True)]


def test_the_published_value_and_the_note_are_kept_and_cleared(store: Store) -> None:
    store.create_run(new_run())
    store.add_component(component())
    store.save_pull(_pull(published_value=43.0, note="needs merge: src/a.py: nothing was pushed"))
    [held] = store.list_pulls("r1")
    assert (held.published_value, held.note) == (43.0, "needs merge: src/a.py: nothing was pushed")
    store.save_pull(_pull(pushed_sha="c" * 40))
    [caught_up] = store.list_pulls("r1")
    assert (caught_up.published_value, caught_up.note) == (None, None)


def test_list_pulls_follows_component_order_and_needs_a_run(store: Store) -> None:
    store.create_run(new_run())
    store.add_component(component("b"))
    store.add_component(component("a"))
    store.save_pull(_pull(component="a", number=2))
    store.save_pull(_pull(component="b", number=1))
    assert [p.component for p in store.list_pulls("r1")] == ["b", "a"]
    with pytest.raises(NotFoundError):
        store.list_pulls("nope")


def test_a_database_at_the_previous_revision_is_refused_then_upgraded(database_url: str) -> None:
    engine = migrate.make_engine(database_url)
    migrate.ensure_sqlite_dir(engine.url)
    with engine.begin() as conn:
        command.upgrade(migrate._config(conn), "0001")
    engine.dispose()
    assert migrate.current_revision(database_url) == "0001"
    with pytest.raises(SchemaOutdatedError):
        Store.open(database_url)
    s = Store.open(database_url, upgrade=True)
    try:
        assert s.current_revision() == migrate.head_revision()
        s.create_run(new_run())
        s.add_component(component())
        s.save_pull(_pull())
        assert s.list_pulls("r1")[0].number == 7
        assert migrate.schema_drift(database_url) == []
    finally:
        s.close()


def test_start_turn_appends_its_event_in_the_same_transaction(store: Store) -> None:
    from controller.domain.enums import EventKind, RunStatus

    store.create_run(new_run())
    store.add_component(component())
    store.set_run_status("r1", RunStatus.RUNNING)
    store.start_turn("r1", 1, 0, event=(EventKind.TURN_STARTED, {"turn": 1}))
    store.start_turn("r1", 1, 0, event=(EventKind.TURN_STARTED, {"turn": 1}))  # a re-run after a crash
    kinds = [(e.kind, e.payload["turn"]) for e in store.list_events("r1")]
    assert kinds == [(EventKind.TURN_STARTED, 1), (EventKind.TURN_STARTED, 1)]

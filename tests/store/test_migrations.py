"""Migrations and the startup check, on SQLite and PostgreSQL.

The migrated schema must equal the models (alembic's compare_metadata plus the CHECK constraints),
and ``Store.open`` must refuse any database that is not at the head revision.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from controller.domain.enums import RunPhase
from controller.domain.errors import SchemaOutdatedError
from controller.store import NewRun, Store, migrate
from tests.store.old_rows import insert_old_run


def stamp(url: str, revision: str) -> None:
    """Make the database look as if an (older, foreign) crucible had migrated it to ``revision``."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)"))
            conn.execute(sa.text("INSERT INTO alembic_version VALUES (:rev)"), {"rev": revision})
    finally:
        engine.dispose()


def test_migrated_schema_matches_the_models(database_url: str) -> None:
    migrate.upgrade(database_url)
    assert migrate.current_revision(database_url) == migrate.head_revision()
    assert migrate.schema_drift(database_url) == []


def test_schema_drift_sees_a_check_constraint_that_disagrees(postgres_url: str) -> None:
    migrate.upgrade(postgres_url)
    engine = sa.create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE turns DROP CONSTRAINT ck_turns_reason"))
            narrower = "ALTER TABLE turns ADD CONSTRAINT ck_turns_reason CHECK (reason IN ('improved'))"
            conn.execute(sa.text(narrower))
            conn.execute(sa.text("ALTER TABLE samples DROP CONSTRAINT ck_samples_arm"))
    finally:
        engine.dispose()
    drift = migrate.schema_drift(postgres_url)
    assert len(drift) == 2
    assert "missing CHECK samples.ck_samples_arm" in drift
    assert any(line.startswith("CHECK turns.ck_turns_reason allows") for line in drift)


def test_open_refuses_a_database_at_base_and_accepts_it_after_upgrade(database_url: str) -> None:
    if database_url.startswith("sqlite"):
        sqlite3.connect(database_url.removeprefix("sqlite:///")).close()  # an empty database file
    with pytest.raises(SchemaOutdatedError, match="crucible db upgrade"):
        Store.open(database_url)
    with Store.open(database_url, upgrade=True) as store:
        assert store.current_revision() == migrate.head_revision()
        store.create_run(NewRun("r1", "s", "fp", None, "o", "m", "maximize", 1, {}))
    with Store.open(database_url) as store:
        assert store.get_run("r1").direction == "maximize"


def test_open_refuses_a_database_stamped_with_an_unknown_revision(database_url: str) -> None:
    stamp(database_url, "0000_old")
    with pytest.raises(SchemaOutdatedError, match="0000_old"):
        Store.open(database_url)
    # Upgrading cannot start from a revision this crucible does not ship.
    with pytest.raises(SchemaOutdatedError, match="0000_old"):
        Store.open(database_url, upgrade=True)
    assert migrate.current_revision(database_url) == "0000_old"


def test_upgrade_is_idempotent(database_url: str) -> None:
    migrate.upgrade(database_url)
    migrate.upgrade(database_url)
    with Store.open(database_url) as store:
        assert store.current_revision() == migrate.head_revision()


def test_open_without_upgrade_does_not_create_a_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "crucible.db"
    with pytest.raises(SchemaOutdatedError, match="crucible db upgrade"):
        Store.open(f"sqlite:///{path}")
    assert not path.parent.exists()
    assert migrate.current_revision(f"sqlite:///{path}") is None


def test_upgrade_creates_the_sqlite_directory_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "home" / "deep" / "crucible.db"
    with Store.open(f"sqlite:///{path}", upgrade=True) as store:
        store.create_run(NewRun("r1", "s", "fp", None, "o", "m", "minimize", 1, {}))
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


def test_in_memory_sqlite_works_for_one_store() -> None:
    with Store.open("sqlite://", upgrade=True) as store:
        store.create_run(NewRun("r1", "s", "fp", None, "o", "m", "minimize", 1, {}))
        assert [run.id for run in store.list_runs()] == ["r1"]


def test_a_bare_postgresql_url_uses_psycopg(postgres_url: str) -> None:
    bare = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    assert bare != postgres_url
    with Store.open(bare, upgrade=True) as store:
        assert store.current_revision() == migrate.head_revision()


def test_migrations_ship_inside_the_package() -> None:
    # setuptools packages.find only sees directories with __init__.py; package-data adds the .mako.
    package = Path(migrate.__file__).parent
    assert package / "migrations" == migrate.MIGRATIONS_DIR
    for name in ("__init__.py", "env.py", "script.py.mako", "versions/__init__.py"):
        assert (migrate.MIGRATIONS_DIR / name).is_file(), name
    assert {"0001", migrate.head_revision()} <= migrate.known_revisions()


def test_upgrade_to_0005_gives_old_runs_a_phase_and_no_lease(database_url: str) -> None:
    engine = migrate.make_engine(database_url)
    migrate.ensure_sqlite_dir(engine.url)
    try:
        with engine.begin() as conn:
            command.upgrade(migrate._config(conn), "0004")
            insert_old_run(conn, "searching")
            insert_old_run(conn, "watching", round=2)
            insert_old_run(conn, "done", status="completed", round=1)
            insert_old_run(conn, "stopped", status="cancelled", round=1)
    finally:
        engine.dispose()
    with Store.open(database_url, upgrade=True) as store:
        phases = {run: store.get_run(run).phase for run in ("searching", "watching", "done", "stopped")}
        assert phases == {
            "searching": RunPhase.SEARCH,
            "watching": RunPhase.WATCHING,
            "done": RunPhase.FINISHED,
            "stopped": RunPhase.WATCHING,
        }
        run = store.get_run("watching")
        assert (run.lease_owner, run.lease_expires_at, run.cancel_requested) == (None, None, False)
        assert len(store.list_components("watching")) == 1, "the upgrade kept the runs' children"
    assert migrate.schema_drift(database_url) == []
    engine = migrate.make_engine(database_url)
    try:
        with engine.begin() as conn:
            command.downgrade(migrate._config(conn), "0004")
        with engine.connect() as conn:
            columns = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
        assert "controller_pid" in columns and not columns & {"phase", "lease_owner", "cancel_requested"}
    finally:
        engine.dispose()


def test_the_revision_graph_read_without_alembic_is_alembics() -> None:
    from alembic.script import ScriptDirectory

    from controller.store import migrate

    scripts = ScriptDirectory.from_config(migrate._config())
    assert migrate.revision_graph() == {s.revision: s.down_revision for s in scripts.walk_revisions()}
    assert migrate.head_revision() == scripts.get_current_head()


def test_0012_adds_the_hypotheses_table_and_downgrades_cleanly(database_url: str) -> None:
    with Store.open(database_url, upgrade=True):
        pass
    engine = migrate.make_engine(database_url)
    try:
        with engine.begin() as conn:
            command.downgrade(migrate._config(conn), "0009")
        with engine.connect() as conn:
            assert "hypotheses" not in sa.inspect(conn).get_table_names()
    finally:
        engine.dispose()
    with Store.open(database_url, upgrade=True) as store:
        assert store.current_revision() == migrate.head_revision()
    assert migrate.schema_drift(database_url) == []

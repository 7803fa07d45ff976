"""Upgrading the database a released crucible left behind (as Optuna tests its storage upgrades).

``tests/store/test_migrations.py`` migrates empty databases and rows written by hand for one old
revision; a user's database was written by the released code, through all its paths (a loop's turns,
samples and events, a pull request, feedback). ``tests/testdata/databases`` keeps one such file per
release, written by that release's own code (``generate.py`` there says how), with what it holds in a
JSON file beside it. Each is copied, refused as outdated, upgraded to the head revision, checked against
the models, read back through today's ``Store``, and written to once more.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from controller.domain.enums import EventKind
from controller.domain.errors import SchemaOutdatedError
from controller.store import NewRun, Store, migrate

DATABASES = Path(__file__).resolve().parents[1] / "testdata" / "databases"
CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
RELEASES = sorted(path.stem for path in DATABASES.glob("*.sqlite3"))


def expected(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATABASES / f"{version}.json").read_text(encoding="utf-8"))
    return data


def test_every_release_has_its_database() -> None:
    released = re.findall(r"^## (\d+\.\d+\.\d+) - ", CHANGELOG.read_text(encoding="utf-8"), re.MULTILINE)
    assert released, "the changelog names no release"
    missing = sorted(set(released) - set(RELEASES))
    assert not missing, f"no database under tests/testdata/databases for {missing}: run generate.py there"


@pytest.mark.parametrize("version", RELEASES)
def test_a_released_database_upgrades_and_keeps_its_runs(version: str, tmp_path: Path) -> None:
    facts = expected(version)
    path = tmp_path / "crucible.db"
    shutil.copyfile(DATABASES / f"{version}.sqlite3", path)
    url = f"sqlite:///{path}"
    old = migrate.current_revision(url)
    assert old is not None and old != migrate.head_revision()
    with pytest.raises(SchemaOutdatedError, match="crucible db upgrade"):
        Store.open(url)

    check_upgraded(url, facts)


def check_upgraded(url: str, facts: dict[str, Any]) -> None:
    """Upgrade ``url`` to the head and check the release's run reads back and today's writes go in."""
    with Store.open(url, upgrade=True) as store:
        assert store.current_revision() == migrate.head_revision()
        run = store.get_run(facts["run_id"])
        assert (run.status, run.stop_reason) == (facts["status"], facts["stop_reason"])
        assert run.baseline_value == facts["baseline"]
        assert (run.champion_value, run.champion_turn) == (facts["best"]["value"], facts["best"]["turn"])
        turns = store.list_turns(run.id)
        assert [(t.number, t.outcome, t.value) for t in turns] == [
            (t["turn"], t["outcome"], t["value"]) for t in facts["turns"]
        ]
        assert len(store.list_samples(run.id, 0)) > 0  # the baseline's samples
        assert all(store.list_samples(run.id, t.number) for t in turns)
        assert [p.number for p in store.list_pulls(run.id)] == [facts["pull_request"]]
        assert [f.author for f in store.list_feedback(run.id)] == facts["feedback_authors"]
        kinds = [event.kind for event in store.list_events(run.id)]
        assert kinds[0] == "baseline" and "completed" in kinds and "feedback_received" in kinds
        # the upgraded database takes today's writes too
        store.create_run(NewRun("after", "s", "fp", None, "o", "m", "minimize", 1, {}))
        assert store.get_run("after").status == "pending"
        appended = store.append_event("after", EventKind.RESUMED, {})
        assert appended.id > max(e.id for e in store.list_events(run.id)), "ids go on past the release's"
    assert migrate.schema_drift(url) == []


@pytest.mark.postgres
@pytest.mark.parametrize("version", RELEASES)
def test_a_released_database_upgrades_on_postgresql(version: str, postgres_url: str, tmp_path: Path) -> None:
    """The same rows on PostgreSQL: the schema migrated to the release's revision, the release's file
    copied into it table by table, then upgraded to the head. PostgreSQL's migrations differ from
    SQLite's (no batch table copies, real enum checks, sequences), and a user's server database went
    through exactly them."""
    copy = tmp_path / "released.db"  # read from a copy: the committed file stays as the release left it
    shutil.copyfile(DATABASES / f"{version}.sqlite3", copy)
    source = sa.create_engine(f"sqlite:///{copy}")
    old = migrate.current_revision(source)
    assert old is not None and old != migrate.head_revision()
    target = migrate.make_engine(postgres_url)
    try:
        with target.begin() as conn:
            command.upgrade(migrate._config(conn), old)
        tables, written = sa.MetaData(), sa.MetaData()
        tables.reflect(source)
        written.reflect(target)
        with source.connect() as read, target.begin() as write:
            for table in tables.sorted_tables:
                rows = [dict(row._mapping) for row in read.execute(table.select())]
                if rows and table.name != "alembic_version":
                    write.execute(written.tables[table.name].insert(), rows)
            # The copied ids are past where the sequences stand: move each on past its column's maximum.
            owned = write.execute(
                sa.text(
                    "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = "
                    "'public' AND pg_get_serial_sequence(table_name, column_name) IS NOT NULL"
                )
            )
            for table_name, column in owned.all():
                write.execute(
                    sa.text(
                        f"SELECT setval(pg_get_serial_sequence('{table_name}', '{column}'), "
                        f"COALESCE((SELECT max({column}) FROM {table_name}), 0) + 1, false)"
                    )
                )
    finally:
        source.dispose()
        target.dispose()
    check_upgraded(postgres_url, expected(version))

"""``store.listing``: the runs list read with ``sqlite3`` answers exactly as the ``Store`` does, and
only where it can (a SQLite file at the schema head); elsewhere it says None and the Store answers."""

from __future__ import annotations

from pathlib import Path

from controller.domain.enums import RunStatus, StopReason
from controller.store import Store
from controller.store.listing import sqlite_file, sqlite_run_summaries
from controller.store.migrate import VERSION_TABLE
from tests.support import new_run


def test_it_reads_what_the_store_reads(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crucible.db'}"
    with Store.open(url, upgrade=True) as store:
        assert sqlite_run_summaries(url, limit=10) == []
        for i in range(5):
            store.create_run(new_run(f"r{i}", objective=f"goal {i}"))
        store.set_run_status("r1", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)
        store.set_baseline("r2", 12.5, {})
        for limit, offset in ((50, 0), (2, 0), (2, 3)):
            expected = store.run_summaries(limit=limit, offset=offset)
            assert sqlite_run_summaries(url, limit=limit, offset=offset) == expected
        assert [r.id for r in expected] == ["r1", "r0"]


def test_it_answers_only_for_a_sqlite_file_at_the_head(tmp_path: Path) -> None:
    db = tmp_path / "crucible.db"
    url = f"sqlite:///{db}"
    assert sqlite_file(url) == db
    for other in ("postgresql+psycopg://u@h/db", "sqlite://", "sqlite:///:memory:", f"{url}?mode=ro"):
        assert sqlite_file(other) is None and sqlite_run_summaries(other, limit=5) is None
    assert sqlite_run_summaries(url, limit=5) is None and not db.exists(), "a missing file is not created"
    db.write_text("")
    assert sqlite_run_summaries(url, limit=5) is None, "no schema yet"
    db.unlink()
    with Store.open(url, upgrade=True) as store:
        store.create_run(new_run("r1"))
        with store._connection() as conn:  # an older schema, as a previous crucible left it
            conn.exec_driver_sql(f"UPDATE {VERSION_TABLE} SET version_num = '0001'")
    assert sqlite_run_summaries(url, limit=5) is None

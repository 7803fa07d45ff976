"""The runs list read from a SQLite database with the standard library's ``sqlite3``: what
``crucible runs list`` needs, without SQLAlchemy.

Importing SQLAlchemy alone takes several times as long as starting Python (``bench/cli_start.py``),
and the list is one query. So on the default database, a SQLite file, the command reads it here; it
answers only for a file that exists and is at this crucible's schema head (``revisions.py``), and
says ``None`` otherwise, so the caller opens the ``Store``, which creates, upgrades or refuses the
database with the usual message. PostgreSQL always goes through the ``Store`` (its driver alone costs
about as much as SQLAlchemy). The query is ``PagedReads.run_summaries``'s, and
``tests/store/test_listing.py`` holds the two to the same answers (ADR-0013).
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from controller.domain.enums import RunStatus, StopReason
from controller.store.revisions import head_revision
from controller.store.summary import RunSummaryRecord

_PREFIX = "sqlite:///"
_QUERY = (
    "SELECT id, status, stop_reason, objective, baseline_value, champion_value, created_at FROM runs "
    "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"
)


def sqlite_file(url: str) -> Path | None:
    """The file of a plain ``sqlite:///PATH`` URL (the default database); None for anything else."""
    if not url.startswith(_PREFIX) or "?" in url:
        return None
    path = url[len(_PREFIX) :]
    return Path(path).expanduser() if path and path != ":memory:" else None


def sqlite_run_summaries(url: str, *, limit: int, offset: int = 0) -> list[RunSummaryRecord] | None:
    """Runs newest first, as ``Store.run_summaries`` reads them; None when this read cannot answer (not
    a SQLite file, no such file, or a schema other than the head)."""
    path = sqlite_file(url)
    if path is None or not path.is_file():
        return None
    conn = sqlite3.connect(path, timeout=30)
    try:
        try:
            stamped = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.DatabaseError:
            return None
        if stamped != [(head_revision(),)]:
            return None
        rows = conn.execute(_QUERY, (limit, offset)).fetchall()
    finally:
        conn.close()
    return [
        RunSummaryRecord(
            id=run_id,
            status=RunStatus(status),
            stop_reason=None if reason is None else StopReason(reason),
            objective=objective,
            baseline_value=baseline,
            champion_value=champion,
            created_at=_utc(created),
        )
        for run_id, status, reason, objective, baseline, champion, created in rows
    ]


def _utc(text: str) -> datetime:
    """A stored timestamp as the store's ``UTCDateTime`` reads it: naive text is UTC."""
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

"""The forge's SQLite connection and transactions, shared by the typed table accessors.

One connection guarded by a lock serves all threads (uvicorn runs sync routes in a thread pool);
every write commits before the call returns, so the state survives a restart. All ids (users,
repos, pulls, comments, reviews, hooks, labels, statuses, check runs) come from one sequence, so
no two objects of different kinds ever share an id. The accessors for each group of tables are
separate classes over this base (``storage``, ``store_issues``, ``store_checks``), combined into
one ``Storage`` so a module never grows past what fits in a head.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from controller.localforge import schema

Clock = Callable[[], datetime]
T = TypeVar("T")


def utc_now() -> datetime:
    """The default clock."""
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """GitHub's timestamp format: UTC, second precision, ``Z`` suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build(cls: type[T], row: sqlite3.Row) -> T:
    """A record of ``cls`` from the row's columns that ``cls`` has."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    data = dict(zip(row.keys(), tuple(row), strict=True))
    return cls(**{k: v for k, v in data.items() if k in names})


def _schema_version(c: sqlite3.Connection) -> int | None:
    """The version an existing file was written with (None: a new file)."""
    if c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
        return None
    row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else None


class Database:
    """The connection, its lock and the clock; opening a file creates or upgrades its schema."""

    def __init__(self, path: Path, *, clock: Clock = utc_now) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self.clock = clock
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA busy_timeout=10000")
        with self.tx() as c:
            found = _schema_version(c) or schema.SCHEMA_VERSION  # a new file is created current
            for statement in schema.statements():
                c.execute(statement)
            for version in range(found + 1, schema.SCHEMA_VERSION + 1):
                for statement in schema.UPGRADES.get(version, []):
                    c.execute(statement)
            current = str(schema.SCHEMA_VERSION)
            c.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (current,))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def now(self) -> str:
        return iso(self.clock())

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """Run statements under the lock in one transaction (committed on success)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.rollback()
                raise
            self._conn.commit()

    def _one(self, sql: str, args: tuple[Any, ...] | dict[str, Any]) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self._conn.execute(sql, args).fetchone()
            return row

    def _all(self, sql: str, args: tuple[Any, ...] | dict[str, Any]) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._conn.execute(sql, args).fetchall())

    def _new_id(self, c: sqlite3.Connection, kind: str) -> int:
        cur = c.execute("INSERT INTO ids (kind) VALUES (?)", (kind,))
        assert cur.lastrowid is not None
        return cur.lastrowid

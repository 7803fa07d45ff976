"""The two reads on the operator API's hot path, awaited on the event loop instead of a worker thread.

``GET /api/runs`` and a page of ``GET /api/runs/{id}/turns`` are what dashboards and scripts repeat;
the API answers them from already-serialised bytes after one query each (``api/hotpath.py``,
ADR-0021). Through SQLAlchemy and a thread-pool hop that query cost about 1 ms of CPU (pool checkout
with its pre-ping, isolation juggling, statement cache keys, result wrapping: ``bench/api_load.py``);
straight through psycopg's async connection it costs about 0.15 ms and holds no thread while
PostgreSQL answers. The statements are ``reads.TURNS_VERSION`` and ``reads.summaries_query``,
compiled once for PostgreSQL, and rows become records through ``reads.summary_record``, so both
paths read the same thing.

On SQLite the same calls run ``Store``'s own reads in a thread: a file read needs no connection of
its own, and the API behaves the same on both.

Errors: NotFoundError for an unknown run; RetryLaterError when PostgreSQL fails or when every
connection is busy (``max_connections``): the caller then takes the ordinary path, which has a pool
of its own and waits there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from controller.domain.enums import RunStatus
from controller.domain.errors import NotFoundError, RetryLaterError
from controller.store.reads import SUMMARIES, TURNS_VERSION, summaries_query, summary_record
from controller.store.summary import RunSummaryRecord

if TYPE_CHECKING:
    import psycopg

    from controller.store.store import Store

# Connections kept for the hot path per process: as many as requests a replica's event loop has
# waiting on PostgreSQL at once under the benchmark's 16 clients; beyond that a request takes the
# ordinary path (ADR-0021).
MAX_CONNECTIONS = 16

# A page of the runs list as the database gave it (rows of ``reads.summaries_query`` or records):
# opaque, compared with ``==``.
SummaryRows = tuple[object, ...]


class HotReads(Protocol):
    """What ``api/hotpath.py`` reads; both awaitable without holding a thread on PostgreSQL."""

    async def turns_version(self, run_id: str) -> int:
        """``Store.turns_version``: the id of the run's newest event (0: none)."""
        ...

    async def run_summaries(self, *, limit: int, offset: int, status: RunStatus | None) -> SummaryRows:
        """The rows ``Store.run_summaries`` reads, as they come: equal rows make equal records, and
        comparing them costs less than converting them (``summary_records`` does that)."""
        ...

    def summary_records(self, rows: SummaryRows) -> list[RunSummaryRecord]:
        """The records of rows ``run_summaries`` returned."""
        ...

    async def close(self) -> None:
        """Close what is kept open (the app's lifespan calls this on shutdown)."""
        ...


def hot_reads(store: Store) -> HotReads:
    """The hot-path reads of ``store``'s database: psycopg's async connections on PostgreSQL, the
    store's own reads in a thread elsewhere."""
    url = sa.make_url(store.url)
    if url.get_backend_name() == "postgresql":
        return PgHotReads(url.set(drivername="postgresql").render_as_string(hide_password=False))
    return ThreadedHotReads(store)


class ThreadedHotReads:
    """``Store``'s reads in the loop's default executor (SQLite: cheap, and there is no async driver)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def turns_version(self, run_id: str) -> int:
        return await asyncio.to_thread(self._store.turns_version, run_id)

    async def run_summaries(self, *, limit: int, offset: int, status: RunStatus | None) -> SummaryRows:
        records = await asyncio.to_thread(
            lambda: self._store.run_summaries(limit=limit, offset=offset, status=status)
        )
        return tuple(records)

    def summary_records(self, rows: SummaryRows) -> list[RunSummaryRecord]:
        return [row for row in rows if isinstance(row, RunSummaryRecord)]

    async def close(self) -> None:
        pass


def _pg_sql(statement: sa.Select[Any]) -> str:
    """``statement`` as PostgreSQL text with ``%(name)s`` parameters, as psycopg takes them."""
    return str(statement.compile(dialect=postgresql.psycopg.dialect()))  # type: ignore[no-untyped-call]


_TURNS_VERSION_SQL = _pg_sql(TURNS_VERSION)
_SUMMARIES_SQL = {by_status: _pg_sql(query) for by_status, query in SUMMARIES.items()}


class PgHotReads:
    """Up to ``max_connections`` psycopg async connections in autocommit (every statement stands alone,
    as ``migrate.page_reader``'s), opened on first use and kept; statements are prepared once per
    connection. Not tied to one event loop: a connection is used by one request at a time, and a
    plain list under a lock keeps the idle ones."""

    def __init__(self, conninfo: str, *, max_connections: int = MAX_CONNECTIONS) -> None:
        self._conninfo = conninfo
        self._max = max_connections
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._open = 0
        self._closed = False
        self._lock = threading.Lock()

    async def turns_version(self, run_id: str) -> int:
        rows = await self._rows(_TURNS_VERSION_SQL, {"run_id": run_id})
        if not rows:
            raise NotFoundError(f"no run {run_id}")
        return int(rows[0][1] or 0)

    async def run_summaries(self, *, limit: int, offset: int, status: RunStatus | None) -> SummaryRows:
        _query, params = summaries_query(limit=limit, offset=offset, status=status)
        return tuple(await self._rows(_SUMMARIES_SQL[status is not None], params))

    def summary_records(self, rows: SummaryRows) -> list[RunSummaryRecord]:
        return [summary_record(row) for row in rows if isinstance(row, tuple)]

    async def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for conn in idle:
            await conn.close()

    async def _rows(self, sql: str, params: Mapping[str, object]) -> list[tuple[Any, ...]]:
        import psycopg

        conn = await self._acquire()
        try:
            cursor = await conn.execute(sql, params, prepare=True)
            rows = await cursor.fetchall()
        except psycopg.Error as exc:
            await self._release(conn, broken=True)
            raise RetryLaterError(f"database read failed: {exc}") from exc
        except BaseException:  # cancelled mid-query: the connection's state is unknown
            await self._release(conn, broken=True)
            raise
        await self._release(conn, broken=False)
        return rows

    async def _acquire(self) -> psycopg.AsyncConnection[Any]:
        import psycopg

        with self._lock:
            if self._closed:
                raise RetryLaterError("the hot-path reads are closed")
            if self._idle:
                return self._idle.pop()
            if self._open >= self._max:
                raise RetryLaterError(f"all {self._max} hot-path connections are busy")
            self._open += 1
        try:
            return await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        except BaseException as exc:
            with self._lock:
                self._open -= 1
            if isinstance(exc, psycopg.Error):
                raise RetryLaterError(f"database unreachable: {exc}") from exc
            raise

    async def _release(self, conn: psycopg.AsyncConnection[Any], *, broken: bool) -> None:
        with self._lock:
            keep = not broken and not self._closed and not conn.closed
            if keep:
                self._idle.append(conn)
            else:
                self._open -= 1
        if not keep:
            await conn.close()

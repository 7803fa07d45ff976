"""``store/hot_reads.py``: the API's hot-path reads awaited on the event loop read what ``Store`` reads,
on SQLite (the store's reads in a thread) and PostgreSQL (psycopg's async connections)."""

from __future__ import annotations

import asyncio

import pytest

from controller.domain.enums import RunStatus, StopReason
from controller.domain.errors import NotFoundError, RetryLaterError
from controller.store import Store
from controller.store.hot_reads import PgHotReads, hot_reads
from tests.store.test_page_reads import _decide
from tests.support import new_run


@pytest.fixture
def store(store: Store) -> Store:
    """The shared store (``tests/support``) with four runs: r1 running, r2 cancelled, r0 and r3 pending."""
    for i in range(4):
        store.create_run(new_run(f"r{i}", objective=f"objective {i}"))
    store.set_run_status("r1", RunStatus.RUNNING)
    store.set_run_status("r2", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)
    return store


def test_the_hot_reads_read_what_the_store_reads(store: Store) -> None:
    async def check() -> None:
        reads = hot_reads(store)
        try:
            for limit, offset, status in ((50, 0, None), (2, 1, None), (50, 0, RunStatus.CANCELLED)):
                rows = await reads.run_summaries(limit=limit, offset=offset, status=status)
                expected = store.run_summaries(limit=limit, offset=offset, status=status)
                assert reads.summary_records(rows) == expected
                assert expected, (limit, offset, status)
            assert await reads.turns_version("r1") == store.turns_version("r1")
            store.start_turn("r1", 1, 0)
            _decide(store, 1)
            assert await reads.turns_version("r1") == store.turns_version("r1") > 0
            with pytest.raises(NotFoundError):
                await reads.turns_version("nope")
        finally:
            await reads.close()

    asyncio.run(check())


@pytest.mark.postgres
def test_postgresql_rows_are_equal_exactly_when_the_page_is(postgres_url: str) -> None:
    with Store.open(postgres_url, upgrade=True) as store:
        store.create_run(new_run("r1"))

        async def check() -> None:
            reads = hot_reads(store)
            try:
                before = await reads.run_summaries(limit=10, offset=0, status=None)
                assert await reads.run_summaries(limit=10, offset=0, status=None) == before
                store.set_run_status("r1", RunStatus.RUNNING)
                moved = await reads.run_summaries(limit=10, offset=0, status=None)
                assert moved != before
                assert [r.status for r in reads.summary_records(moved)] == [RunStatus.RUNNING]
            finally:
                await reads.close()

        asyncio.run(check())


@pytest.mark.postgres
def test_no_connection_left_or_a_database_gone_is_retry_later(postgres_url: str) -> None:
    async def check() -> None:
        with Store.open(postgres_url, upgrade=True) as store:
            conninfo = postgres_url.replace("+psycopg", "")
            busy = PgHotReads(conninfo, max_connections=0)
            with pytest.raises(RetryLaterError, match="busy"):
                await busy.turns_version("r1")
            gone = PgHotReads(conninfo.rsplit("/", 1)[0] + "/no_such_database_here")
            with pytest.raises(RetryLaterError, match="unreachable"):
                await gone.turns_version("r1")
            reads = hot_reads(store)
            await reads.close()
            with pytest.raises(RetryLaterError, match="closed"):
                await reads.turns_version("r1")

    asyncio.run(check())

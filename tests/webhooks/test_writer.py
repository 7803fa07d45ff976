"""The webhook endpoint's batched writer (``controller/api/delivery_writer.py``) over real HTTP into
real databases: concurrent deliveries stored once each, no 202 before the commit, busy and refusing
databases, the bound on waiting deliveries, and the writer's thread living exactly as long as the
server. Batches are made deterministic by holding the database's write lock from a second
connection while requests queue up, never by timing."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from controller.api.delivery_writer import (
    THREAD_NAME,
    DeliveryWriter,
    Outcome,
    Overloaded,
    RawDelivery,
    StoreSink,
)
from controller.api.webhooks import webhook_router
from controller.localforge.server import serve_in_thread
from controller.store import Store
from tests.support import Ticker, wait_until
from tests.support.fixtures import migrated_sqlite_url
from tests.webhooks.helpers import ORACLE_FILES, SECRET, Client, Wakeups, encode, event_of, post

EVENT = "issue_comment"


def in_background(
    pool: ThreadPoolExecutor, client: httpx.Client, delivery: str, body: bytes
) -> Future[httpx.Response]:
    return pool.submit(post, client, EVENT, body, delivery=delivery)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[tuple[Store, Path]]:
    path = tmp_path / "crucible.db"
    s = Store.open(migrated_sqlite_url(path), upgrade=True)
    yield s, path
    s.close()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=50) as executor:
        yield executor


def test_fifty_concurrent_posts_store_each_delivery_once(
    client_for: Client, store: Store, pool: ThreadPoolExecutor
) -> None:
    """25 deliveries, each sent twice at once (GitHub's redelivery racing the original): one
    "queued" and one "duplicate" per id, 25 rows with their own payloads, 25 wake-ups."""
    wakeups = Wakeups()
    url = str(client_for(store, on_delivery=wakeups).base_url)

    def send(n: int) -> tuple[str, str]:
        with httpx.Client(base_url=url, timeout=30) as client:
            response = post(client, EVENT, encode({"action": "created", "n": n % 25}), delivery=f"d-{n % 25}")
        assert response.status_code == 202
        return f"d-{n % 25}", response.json()["status"]

    answers = list(pool.map(send, range(50)))
    for n in range(25):
        assert sorted(status for delivery, status in answers if delivery == f"d-{n}") == [
            "duplicate",
            "queued",
        ]
    stored = {d.id: d.payload for d in store.pending_deliveries(limit=100)}
    assert stored == {f"d-{n}": {"action": "created", "n": n} for n in range(25)}
    assert wakeups.settled(25) == 25


def test_no_202_before_the_commit_and_too_many_waiting_get_503(
    client_for: Client, sqlite_store: tuple[Store, Path], pool: ThreadPoolExecutor
) -> None:
    """With SQLite's write lock held elsewhere the writer cannot commit: its delivery stays
    unanswered, two more wait, and the next one is refused at once with 503 and never stored."""
    store, path = sqlite_store
    writer = DeliveryWriter(StoreSink(store), max_waiting=2)
    client = client_for(store, writer=writer)
    body = encode({"action": "created"})
    locker = sqlite3.connect(path, isolation_level=None)
    try:
        locker.execute("BEGIN IMMEDIATE")
        first = in_background(pool, client, "d-1", body)
        wait_until(lambda: writer.writing == 1, "the writer holds d-1")
        queued = [in_background(pool, client, f"d-{n}", body) for n in (2, 3)]
        wait_until(lambda: writer.waiting == 2, "d-2 and d-3 wait")
        refused = post(client, EVENT, body, delivery="d-4")
        assert refused.status_code == 503
        assert "waiting" in refused.json()["detail"]
        assert not first.done()  # not answered: nothing is committed yet
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    for future in [first, *queued]:
        assert (future.result().status_code, future.result().json()) == (202, {"status": "queued"})
    assert sorted(d.id for d in store.pending_deliveries()) == ["d-1", "d-2", "d-3"]


@pytest.mark.postgres
def test_a_busy_database_answers_503_and_stores_nothing(
    client_for: Client, postgres_url: str, pool: ThreadPoolExecutor
) -> None:
    """PostgreSQL gives up on a lock after ``lock_timeout``: every delivery of the failed batches
    gets 503 and none of them is stored, so GitHub's "redeliver" stores them all later."""
    admin = sa.create_engine(postgres_url)
    with admin.connect() as conn:  # for the store's connections, all opened after this
        conn.exec_driver_sql(f"ALTER DATABASE \"{admin.url.database}\" SET lock_timeout = '100ms'")
        conn.commit()
    try:
        with Store.open(postgres_url, upgrade=True) as store:
            client = client_for(store)
            body = encode({"action": "created"})
            with admin.connect() as locker, locker.begin():
                locker.exec_driver_sql("LOCK TABLE deliveries IN EXCLUSIVE MODE")
                answers = [
                    f.result() for f in [in_background(pool, client, f"d-{n}", body) for n in range(6)]
                ]
                assert [a.status_code for a in answers] == [503] * 6
                assert {a.json()["detail"] for a in answers} == {"database busy; delivery not stored"}
            assert store.pending_deliveries() == []
            again = [post(client, EVENT, body, delivery=f"d-{n}").json() for n in range(6)]
            assert again == [{"status": "queued"}] * 6
    finally:
        admin.dispose()


@pytest.mark.postgres
def test_a_delivery_the_database_refuses_fails_alone(
    client_for: Client, postgres_url: str, pool: ThreadPoolExecutor
) -> None:
    """A batch that fails for another reason than a busy database is stored one by one, so only
    the delivery PostgreSQL refuses (an ``action`` longer than its column) gets an error."""
    admin = sa.create_engine(postgres_url)
    try:
        with Store.open(postgres_url, upgrade=True) as store:
            writer = DeliveryWriter(StoreSink(store))
            client = client_for(store, writer=writer)
            with admin.connect() as locker, locker.begin():
                locker.exec_driver_sql("LOCK TABLE deliveries IN EXCLUSIVE MODE")
                first = in_background(pool, client, "first", encode({"action": "created"}))
                wait_until(lambda: writer.writing == 1, "the writer holds the first delivery")
                bad = in_background(pool, client, "bad", encode({"action": "x" * 100}))
                good = in_background(pool, client, "good", encode({"action": "created"}))
                wait_until(lambda: writer.waiting == 2, "both wait, to be one batch")
            assert first.result().status_code == 202
            assert bad.result().status_code == 500
            assert good.result().json() == {"status": "queued"}
            assert sorted(d.id for d in store.pending_deliveries()) == ["first", "good"]
    finally:
        admin.dispose()


def test_an_unreachable_database_answers_503(client_for: Client) -> None:
    store = Store("postgresql://postgres@127.0.0.1:1/nothing")
    try:
        response = post(client_for(store), EVENT, encode({"action": "created"}))
        assert (response.status_code, response.json()) == (
            503,
            {"detail": "database busy; delivery not stored"},
        )
    finally:
        store.close()


def test_every_oracle_body_reads_back_as_sent(client_for: Client, store: Store) -> None:
    """GitHub's examples as the files hold them (indented, non-ASCII), plus bodies ``json`` reads
    but the writer must re-encode (UTF-16, a byte order mark, a UTF-8-encoded surrogate)."""
    client = client_for(store)
    bodies = {
        f"oracle-{n}": path.read_bytes() for n, path in enumerate(ORACLE_FILES) if event_of(path) != "ping"
    }
    bodies["utf-16"] = '{"action": "created", "text": "héllo"}'.encode("utf-16")
    bodies["bom"] = b'\xef\xbb\xbf{"action": "created"}'
    bodies["surrogate"] = b'{"action": "created", "s": "\xed\xa0\x80"}'
    for delivery, body in bodies.items():
        assert post(client, EVENT, body, delivery=delivery).status_code == 202, delivery
    stored = {d.id: d.payload for d in store.pending_deliveries(limit=1000)}
    assert stored == {delivery: json.loads(body) for delivery, body in bodies.items()}


def test_the_writer_thread_lives_as_long_as_the_server(tmp_path: Path) -> None:
    def writers() -> int:
        return sum(1 for t in threading.enumerate() if t.name == THREAD_NAME)

    before = writers()
    with Store.open(migrated_sqlite_url(tmp_path / "crucible.db"), upgrade=True) as store:
        app = FastAPI()
        app.include_router(webhook_router(store, SECRET))
        with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            assert writers() == before + 1
            assert post(client, EVENT, encode({"action": "created"})).status_code == 202
        assert writers() == before
        assert [d.id for d in store.pending_deliveries()] == ["d-1"]


def test_deliveries_arriving_together_share_a_transaction(tmp_path: Path) -> None:
    """Saves handed over in one event-loop turn are released to the writer only when the turn ends,
    and then stored in one batch: with a clock that moves at every reading, they share one
    ``received_at``."""
    with Store.open(migrated_sqlite_url(tmp_path / "crucible.db"), upgrade=True, clock=Ticker()) as store:
        writer = DeliveryWriter(StoreSink(store))

        async def main() -> list[Outcome]:
            deliveries = [RawDelivery(f"d-{n}", EVENT, b"{}") for n in range(10)]
            saves = [asyncio.ensure_future(writer.save(d)) for d in deliveries]
            await asyncio.sleep(0)  # the ten are handed over; the turn has not ended
            time.sleep(0.05)  # the GIL is free: a writer taking them early would have them now
            assert writer.waiting == 10
            return list(await asyncio.gather(*saves))

        writer.start()
        try:
            assert asyncio.run(main()) == [Outcome.STORED] * 10
        finally:
            writer.stop()
        assert len({d.received_at for d in store.pending_deliveries()}) == 1


def test_stop_stores_what_waits_then_refuses(tmp_path: Path) -> None:
    with Store.open(migrated_sqlite_url(tmp_path / "crucible.db"), upgrade=True) as store:
        writer = DeliveryWriter(StoreSink(store))

        async def main() -> list[Outcome]:
            saves = [
                asyncio.ensure_future(writer.save(RawDelivery(f"d-{n}", EVENT, b"{}"))) for n in range(3)
            ]
            await asyncio.sleep(0)  # the three are handed over, not yet released to the writer
            assert writer.waiting == 3
            writer.stop()  # stores them before it returns
            with pytest.raises(Overloaded):
                await writer.save(RawDelivery("late", EVENT, b"{}"))
            return list(await asyncio.gather(*saves))

        with pytest.raises(Overloaded):  # not started yet
            asyncio.run(writer.save(RawDelivery("early", EVENT, b"{}")))
        writer.start()
        assert asyncio.run(main()) == [Outcome.STORED] * 3
        assert sorted(d.id for d in store.pending_deliveries()) == ["d-0", "d-1", "d-2"]

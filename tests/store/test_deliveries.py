"""``Store.save_deliveries``, the webhook edge's batch write, on SQLite and PostgreSQL alike.

A batch must answer per delivery exactly as one ``save_delivery`` call each would have, in order
(the first of a repeated id wins, a stored id is False), be one transaction, and store the
payload text it is given so that it reads back as the object that text encodes.
"""

from __future__ import annotations

import json
import random
import re
import threading
from datetime import timedelta
from typing import cast

import pytest

from controller.domain.errors import ConflictError
from controller.store import NewDelivery, Store
from tests.support import Ticker


@pytest.fixture
def store_clock() -> Ticker:
    """A second per reading: rows written one after another have times in that order."""
    return Ticker()


def delivery(delivery_id: str, payload: object, action: str | None = "created") -> NewDelivery:
    return NewDelivery(delivery_id, "issue_comment", action, json.dumps(payload))


def test_duplicates_in_the_batch_and_in_the_store_are_false_and_keep_the_first(store: Store) -> None:
    assert store.save_delivery("old", "issue_comment", "created", {"v": "stored"})
    batch = [
        delivery("a", {"v": "a1"}),
        delivery("old", {"v": "again"}),
        delivery("a", {"v": "a2"}),
        delivery("b", {"v": "b1"}, action=None),
        delivery("b", {"v": "b2"}),
    ]
    assert store.save_deliveries(batch) == [True, False, False, True, False]
    stored = {d.id: (d.action, d.payload) for d in store.pending_deliveries()}
    assert stored == {
        "old": ("created", {"v": "stored"}),
        "a": ("created", {"v": "a1"}),
        "b": (None, {"v": "b1"}),
    }
    assert store.save_deliveries(batch) == [False] * 5


def test_a_batch_is_one_transaction_with_one_received_at(store: Store) -> None:
    """The Ticker clock moves at every reading: equal times mean one reading for the batch."""
    store.save_deliveries([delivery(f"d-{n}", {"n": n}) for n in range(5)])
    store.save_delivery("later", "ping", None, {})
    pending = store.pending_deliveries()
    assert len({d.received_at for d in pending if d.id != "later"}) == 1
    assert pending[-1].id == "later" and pending[-1].received_at > pending[0].received_at


def test_a_batch_the_database_refuses_stores_nothing(store: Store) -> None:
    refused = NewDelivery("bad", cast(str, None), None, "{}")  # event is NOT NULL
    with pytest.raises(ConflictError):
        store.save_deliveries([delivery("good", {}), refused])
    assert store.pending_deliveries() == []
    assert store.save_deliveries([delivery("good", {})]) == [True]


def test_an_empty_batch_writes_nothing(store: Store) -> None:
    assert store.save_deliveries([]) == []
    assert store.pending_deliveries() == []


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        ' {\n  "nested": {"list": [1, 2.5, -0, true, null]},\n  "s": "tab\\tquote\\"" }\n',
        '{"unicode": "héllo ✓ \\u00e9 \\ud83d\\ude00", "nul": "\\u0000"}',
        '{"lone": "\\ud800", "big": 123456789012345678901234567890, "huge": 1e400}',
        '{"dup": 1, "dup": 2}',
    ],
)
def test_the_payload_text_is_stored_as_given_and_reads_back_as_parsed(store: Store, text: str) -> None:
    """The text is the verified body; whatever ``json`` parsed from it is what a reader gets back,
    including what re-encoding could not have stored (an infinity) or would have changed."""
    assert store.save_deliveries([NewDelivery("d", "issue_comment", None, text)]) == [True]
    (stored,) = store.pending_deliveries()
    assert stored.payload == json.loads(text)


def test_save_delivery_still_refuses_what_is_not_json(store: Store) -> None:
    with pytest.raises(ValueError):
        store.save_delivery("nan", "issue_comment", None, {"x": float("nan")})
    with pytest.raises(ValueError):
        store.save_delivery("set", "issue_comment", None, {"x": {1, 2}})
    assert store.pending_deliveries() == []


def test_racing_batches_store_each_id_once(store: Store) -> None:
    """Eight writers with overlapping batches (another process's writer, say): each id is True
    for exactly one of them, and stored once."""
    ids = [f"d-{n}" for n in range(30)]
    results: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def save(seed: int) -> None:
        mine = random.Random(seed).sample(ids, 20)
        answers = store.save_deliveries([delivery(i, {"by": seed}) for i in mine])
        with lock:
            results.extend(zip(mine, answers, strict=True))

    threads = [threading.Thread(target=save, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = sorted(i for i, stored in results if stored)
    assert winners == sorted({i for i, _ in results})
    assert len(store.pending_deliveries(limit=100)) == len(winners)


def test_received_at_is_stored_as_every_other_timestamp(store: Store) -> None:
    """SQLite takes the batch through the driver: its timestamps must still be written exactly as
    SQLAlchemy writes them (naive UTC text with microseconds), or ordering would mix formats."""
    store.save_deliveries([delivery("first", {"n": 1})])
    store.save_deliveries([delivery("second", {"n": 2}), delivery("third", {"n": 3})])
    pending = store.pending_deliveries()
    assert [d.id for d in pending] == ["first", "second", "third"]
    stamps = [d.received_at for d in pending]
    assert all(s.utcoffset() == timedelta(0) for s in stamps)
    assert stamps[0] < stamps[1] == stamps[2]
    engine = store._engine
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            raw = [r[0] for r in connection.exec_driver_sql("SELECT received_at FROM deliveries")]
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", text) for text in raw), raw

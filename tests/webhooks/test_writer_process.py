"""``ProcessSink``: parsing and storing webhook deliveries in a child process, on a real SQLite file.

What the HTTP tests cannot show: the child's answers (stored, duplicate, malformed) are the same as
the in-process sink's, a child that died is replaced by the next batch, and closing ends the child.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.api.delivery_writer import Outcome, RawDelivery, StoreSink
from controller.api.writer_process import ProcessSink
from controller.store import Store

EVENT = "issue_comment"


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """One SQLite file: the shared ``store`` fixture (``tests/support``) over it, not over both backends."""
    return f"sqlite:///{tmp_path / 'crucible.db'}"


@pytest.fixture
def sink(store: Store) -> Iterator[ProcessSink]:
    process_sink = ProcessSink(store.url)
    process_sink.start()
    yield process_sink
    process_sink.close()


def raw(delivery_id: str, body: bytes) -> RawDelivery:
    return RawDelivery(delivery_id, EVENT, body)


def test_the_child_answers_as_the_sink_in_this_process(store: Store, sink: ProcessSink) -> None:
    batch = [
        raw("a", b'{"action": "created", "n": 1}'),
        raw("b", b"[1, 2]"),  # JSON, but not an object
        raw("a", b'{"action": "edited"}'),  # the same id again: the first wins
        raw("c", b"not json"),
        raw("d", b'{"n": NaN}'),
    ]
    assert sink(batch) == [
        Outcome.STORED,
        Outcome.MALFORMED,
        Outcome.DUPLICATE,
        Outcome.MALFORMED,
        Outcome.MALFORMED,
    ]
    assert sink([raw("a", b"{}"), raw("e", b'{"action": "deleted"}')]) == [Outcome.DUPLICATE, Outcome.STORED]
    stored = {d.id: (d.action, d.payload) for d in store.pending_deliveries()}
    assert stored == {
        "a": ("created", {"action": "created", "n": 1}),
        "e": ("deleted", {"action": "deleted"}),
    }
    local = StoreSink(store)
    assert local([raw("e", b"{}"), raw("f", b"{}")]) == [Outcome.DUPLICATE, Outcome.STORED]


def test_a_dead_child_is_replaced_by_the_next_batch(store: Store, sink: ProcessSink) -> None:
    assert sink([raw("before", b"{}")]) == [Outcome.STORED]
    child = sink._process  # the test's one look inside: which process to kill
    assert child is not None and child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join(10)
    assert sink([raw("after", b"{}")]) == [Outcome.STORED]
    assert sink._process is not None and sink._process.pid != child.pid
    assert sorted(d.id for d in store.pending_deliveries()) == ["after", "before"]


def test_close_ends_the_child(store: Store) -> None:
    process_sink = ProcessSink(store.url)
    assert process_sink([raw("x", b"{}")]) == [Outcome.STORED]
    child = process_sink._process
    assert child is not None and child.is_alive()
    process_sink.close()
    assert not child.is_alive() and child.exitcode == 0

"""The delivery sink in a child process: the webhook server's event loop keeps its CPU for HTTP.

Why a process: the webhook server is CPU-bound on one interpreter lock. Measured with
``bench/webhooks.py`` (16 clients, 23 kB payloads, SQLite): the endpoint that only verifies and
answers ran at 1.1x the bare FastAPI floor, but parsing and storing in a thread of the same process
brought it to 0.43x, because the parse and SQLAlchemy's Python work share the lock with the
request handling. In a child process they run on the other core; the parent only pickles the raw
bodies into a pipe (a memory copy) and waits for the answers with the lock released.

Protocol (parent -> child, one message a batch): a pickled list of ``(id, event, body)``; child ->
parent: a list of ``Outcome`` values, or ``("retry", message)`` when the database was busy (nothing
stored), or ``("error", message)`` for anything else (the writer then retries each delivery alone).
The child opens its own ``Store`` on the same database URL and exits when the pipe closes. If it
dies, the batch in flight answers RetryLaterError (503: GitHub's "redeliver" stores it later) and
the next batch starts a new child.
"""

from __future__ import annotations

import multiprocessing
import pickle
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from controller.api.delivery_writer import Outcome, RawDelivery, StoreSink
from controller.domain.errors import RetryLaterError
from controller.store import Store

JOIN_TIMEOUT = 10.0  # seconds for the child to finish its batch and exit once the pipe closes


class ProcessSink:
    """A ``Sink`` that parses and stores in a child process (see the module docstring)."""

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._process: BaseProcess | None = None

    def start(self) -> None:
        """Start the child now (it takes a moment to import), instead of with the first batch."""
        with self._lock:
            self._ensure()

    def __call__(self, batch: Sequence[RawDelivery]) -> list[Outcome]:
        message = pickle.dumps([(d.id, d.event, d.body) for d in batch], protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            conn = self._ensure()
            try:
                conn.send_bytes(message)
                reply = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError) as exc:
                self._reset()
                raise RetryLaterError(f"the webhook store process stopped ({type(exc).__name__})") from exc
        if isinstance(reply, tuple):
            kind, text = reply
            if kind == "retry":
                raise RetryLaterError(text)
            raise RuntimeError(f"the webhook store process failed: {text}")
        return [Outcome(value) for value in reply]

    def close(self) -> None:
        with self._lock:
            self._reset()

    def _ensure(self) -> Connection:
        if self._conn is not None and self._process is not None and self._process.is_alive():
            return self._conn
        self._reset()
        context = multiprocessing.get_context("spawn")  # no fork of a threaded server
        parent, child = context.Pipe()
        process = context.Process(
            target=serve, args=(self._url, child), name="crucible-webhook-store", daemon=True
        )
        process.start()
        child.close()
        self._conn, self._process = parent, process
        return parent

    def _reset(self) -> None:
        conn, process = self._conn, self._process
        self._conn = self._process = None
        if conn is not None:
            conn.close()  # the child sees the end of the pipe and exits
        if process is not None:
            process.join(JOIN_TIMEOUT)
            if process.is_alive():
                process.kill()
                process.join()


def serve(database_url: str, conn: Connection) -> None:
    """The child: store what arrives until the pipe closes."""
    with Store.open(database_url) as store:
        sink = StoreSink(store)
        while True:
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):
                return
            batch = [RawDelivery(*item) for item in pickle.loads(data)]
            reply: object
            try:
                reply = [outcome.value for outcome in sink(batch)]
            except RetryLaterError as exc:
                reply = ("retry", str(exc))
            except Exception as exc:  # reported to the parent, which retries each delivery alone
                reply = ("error", f"{type(exc).__name__}: {exc}")
            conn.send_bytes(pickle.dumps(reply))

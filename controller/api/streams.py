"""A cap on live event streams, per credential and per server (issue 21): 429 beyond it.

Each open stream polls the database every half second; 150 streams opened with the read-only token took
the server from 8% to 75% CPU. ``StreamSlots`` counts open streams by the credential that opened them (a
bearer token or a dashboard session, hashed: no secret is kept) and in total; a stream past either cap is
refused with 429 and ``Retry-After`` before it starts. The slot is held by the response itself
(``LimitedStream``) and given back however the stream ends: finished, failed, or the client gone.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Callable

from fastapi import HTTPException
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

RETRY_AFTER_S = 5


class StreamSlots:
    """Open streams per credential and in total, under ``per_credential`` and ``total``."""

    def __init__(self, *, per_credential: int, total: int) -> None:
        self.per_credential = per_credential
        self.total = total
        self._open: Counter[str] = Counter()
        self._lock = threading.Lock()

    def take(self, credential: str) -> Callable[[], None]:
        """A slot for a stream opened with ``credential`` (the function that gives it back); 429 when
        the credential or the server has no slot left."""
        key = hashlib.sha256(credential.encode()).hexdigest()
        with self._lock:
            if sum(self._open.values()) >= self.total:
                raise _busy(f"this server has {self.total} event streams open, its limit")
            if self._open[key] >= self.per_credential:
                raise _busy(f"{self.per_credential} event streams are open with this credential, its limit")
            self._open[key] += 1
        released = threading.Event()

        def give_back() -> None:
            if released.is_set():
                return
            released.set()
            with self._lock:
                self._open[key] -= 1
                if self._open[key] <= 0:
                    del self._open[key]

        return give_back

    def open_streams(self) -> int:
        with self._lock:
            return sum(self._open.values())


def _busy(why: str) -> HTTPException:
    detail = f"too many event streams: {why}; close one or retry later"
    return HTTPException(status_code=429, detail=detail, headers={"Retry-After": str(RETRY_AFTER_S)})


class LimitedStream(StreamingResponse):
    """A streaming answer that gives its slot back when it ends, whatever ends it."""

    def __init__(self, *args: object, release: Callable[[], None], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()

"""Signed webhook delivery, like GitHub's: one background worker POSTs each payload in order.

A delivery carries ``X-GitHub-Event``, ``X-GitHub-Delivery`` (a uuid) and, when the target has a
secret, ``X-Hub-Signature-256`` (HMAC-SHA256 of the exact body bytes). Deliveries never block or
fail the API call that caused them: the worker uses a short timeout and logs failures.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    """Where to deliver: ``events`` are event names or ``*`` for all."""

    url: str
    secret: str | None
    events: tuple[str, ...] = ("*",)
    hook_id: int = 0
    repo_id: int = 0

    def wants(self, event: str) -> bool:
        return "*" in self.events or event in self.events


@dataclass(frozen=True)
class Delivery:
    """One attempted POST and its outcome (``status`` 0 when the connection failed).

    ``id`` is GitHub's numeric delivery id, ``guid`` the ``X-GitHub-Delivery`` header; the request
    is kept so ``GET /hooks/{id}/deliveries/{delivery_id}`` can show it, as GitHub does.
    """

    id: int
    guid: str
    event: str
    url: str
    status: int
    error: str | None
    hook_id: int = 0
    repo_id: int = 0
    delivered_at: float = 0.0
    duration: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


def signature(secret: str, body: bytes) -> str:
    """The value of ``X-Hub-Signature-256`` for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _headers(target: Target, event: str, delivery: str, body: bytes) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/localforge",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Hook-ID": str(target.hook_id),
        "X-GitHub-Hook-Installation-Target-Type": "repository",
        "X-GitHub-Hook-Installation-Target-ID": str(target.repo_id),
    }
    if target.secret:
        headers["X-Hub-Signature-256"] = signature(target.secret, body)
        headers["X-Hub-Signature"] = (
            "sha1=" + hmac.new(target.secret.encode(), body, hashlib.sha1).hexdigest()
        )
    return headers


class Dispatcher:
    """Queues deliveries and sends them from one daemon thread, in the order they were queued."""

    def __init__(self, *, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self.recent: deque[Delivery] = deque(maxlen=500)
        self._queue: queue.Queue[tuple[Target, str, bytes] | None] = queue.Queue()
        self._pending = 0
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._ids = itertools.count(1)

    def send(self, targets: list[Target], event: str, payload: dict[str, Any]) -> None:
        """Queue ``payload`` for every target that subscribes to ``event``."""
        body = json.dumps(payload, separators=(",", ":")).encode()
        chosen = [t for t in targets if t.wants(event)]
        if not chosen:
            return
        self._ensure_worker()
        with self._idle:
            self._pending += len(chosen)
        for target in chosen:
            self._queue.put((target, event, body))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued delivery was attempted; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        """Stop the worker after the queued deliveries."""
        thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=self.timeout + 1)
            self._thread = None

    def _ensure_worker(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="forge-webhooks", daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self.recent.append(self._deliver(*item))
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def deliveries(self, hook_id: int) -> list[Delivery]:
        """The recent deliveries of one hook, newest first (as GitHub lists them)."""
        return [d for d in reversed(self.recent) if d.hook_id == hook_id]

    def _deliver(self, target: Target, event: str, body: bytes) -> Delivery:
        guid = str(uuid.uuid4())
        headers = _headers(target, event, guid, body)
        request = urllib.request.Request(target.url, data=body, method="POST", headers=headers)
        started = time.time()
        status, error = 0, None
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            log.warning("webhook %s to %s answered %s", event, target.url, exc.code)
            status, error = exc.code, str(exc)
        except (OSError, ValueError) as exc:
            log.warning("webhook %s to %s failed: %s", event, target.url, exc)
            error = str(exc)
        return Delivery(
            next(self._ids),
            guid,
            event,
            target.url,
            status,
            error,
            hook_id=target.hook_id,
            repo_id=target.repo_id,
            delivered_at=started,
            duration=time.time() - started,
            headers=tuple(headers.items()),
            body=body,
        )

"""Fault injection for tests of clients: make chosen requests fail the way GitHub sometimes does.

A ``FaultPlan`` holds rules (method + path regex + kind + how many times). The ``FaultInjector``
middleware applies the first matching rule:

- ``error_before``: answer ``status`` without running the request;
- ``error_after``: run the request (so e.g. the PR *is* created), then answer ``status`` instead;
- ``drop_before`` / ``drop_after``: cut the connection without a complete answer;
- ``rate_limit``: answer 403 with ``Retry-After`` (GitHub's secondary rate limit), not running it.

Tests in the same process add rules through ``ForgeHandle.faults``; other processes can use
``POST /_forge/faults`` with a site-admin token.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

KINDS = ("error_before", "error_after", "drop_before", "drop_after", "rate_limit")


@dataclass
class Fault:
    """One rule; ``times`` counts down to 0, then the rule stops matching."""

    method: str
    path: str
    kind: str
    status: int = 502
    retry_after: int = 1
    times: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {', '.join(KINDS)}")
        re.compile(self.path)


@dataclass
class FaultPlan:
    """The active rules and the ones that fired, in order."""

    rules: list[Fault] = field(default_factory=list)
    fired: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, fault: Fault) -> None:
        with self._lock:
            self.rules.append(fault)

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def take(self, method: str, path: str) -> Fault | None:
        """The first live rule matching this request, consuming one of its ``times``."""
        with self._lock:
            for rule in self.rules:
                if rule.times > 0 and rule.method.upper() == method and re.search(rule.path, path):
                    rule.times -= 1
                    self.fired.append(rule)
                    return rule
        return None


class _Dropped(Exception):
    """Raised after a partial response so the server closes the connection mid-answer."""


class FaultInjector:
    """Pure ASGI middleware applying a ``FaultPlan``."""

    def __init__(self, app: ASGIApp, plan: FaultPlan) -> None:
        self.app = app
        self.plan = plan

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fault = self.plan.take(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if fault is None:
            await self.app(scope, receive, send)
            return
        if fault.kind.endswith("_after"):
            await self.app(scope, receive, _discard)
        if fault.kind.startswith("drop"):
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"1000")],
                }
            )
            await send({"type": "http.response.body", "body": b'{"partial', "more_body": True})
            raise _Dropped(f"fault injected: {fault.kind} on {scope['method']} {scope['path']}")
        await _answer(send, fault)


async def _discard(message: Message) -> None:
    return None


async def _answer(send: Send, fault: Fault) -> None:
    headers = [(b"content-type", b"application/json")]
    if fault.kind == "rate_limit":
        status = 403
        body = {
            "message": "You have exceeded a secondary rate limit. Please wait before trying again.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        }
        headers.append((b"retry-after", str(fault.retry_after).encode()))
    else:
        status = fault.status
        message = "Server Error" if status >= 500 else "Injected fault"
        body = {
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
            "status": str(status),
        }
    raw = json.dumps(body).encode()
    headers.append((b"content-length", str(len(raw)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": raw})

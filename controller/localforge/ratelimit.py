"""GitHub-style rate limiting: a fixed hourly window per caller, counted per request.

Authenticated callers get 5000 requests an hour, anonymous ones 60, as on GitHub. A conditional
request answered ``304 Not Modified`` costs nothing (GitHub's rule), which is why pollers send
``If-None-Match``. The window state is in memory: a restart starts a fresh window.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Quota:
    """The values of the ``X-RateLimit-*`` headers after a request."""

    limit: int
    remaining: int
    reset: int
    used: int
    resource: str

    def headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset),
            "X-RateLimit-Used": str(self.used),
            "X-RateLimit-Resource": self.resource,
        }


class RateLimiter:
    """Counts requests per ``(caller key, resource)`` in hourly windows."""

    WINDOW = 3600

    def __init__(
        self, *, authenticated: int = 5000, anonymous: int = 60, clock: Callable[[], float] = time.time
    ):
        self.limits = {True: authenticated, False: anonymous}
        self.clock = clock
        self._windows: dict[tuple[str, str], tuple[int, int]] = {}
        self._lock = threading.Lock()

    def peek(self, key: str, resource: str, *, authenticated: bool) -> Quota:
        """The caller's quota without counting a request."""
        return self._update(key, resource, authenticated, 0)

    def hit(self, key: str, resource: str, *, authenticated: bool) -> Quota:
        """Count one request (callers refuse requests once ``peek`` shows nothing remaining)."""
        return self._update(key, resource, authenticated, 1)

    def _update(self, key: str, resource: str, authenticated: bool, cost: int) -> Quota:
        limit = self.limits[authenticated]
        now = int(self.clock())
        with self._lock:
            reset, used = self._windows.get((key, resource), (now + self.WINDOW, 0))
            if now >= reset:
                reset, used = now + self.WINDOW, 0
            used = min(used + cost, limit)
            self._windows[(key, resource)] = (reset, used)
        return Quota(limit, limit - used, reset, used, resource)

"""Pages kept serialised and served again while what they show has not moved.

A dashboard follows a live run by asking for the same turn pages again and again, and a page of
100 turns costs three queries and a few hundred row conversions (``bench/api_load.py``, ADR-0013).
A decided turn never changes, so a page is current for as long as the run's version
(``Store.turns_version``, the id of its newest event) stays the same: checking that is one indexed
lookup. The version is read *before* the page, so a page is never stored under a version newer
than what it shows (at worst it is stored under an older one and read again once).

A page of the runs list has no such version (creating a run appends no event), so its "version" is
the page's rows themselves: the body is a function of them, and comparing them with the rows a
request just read costs far less than rendering them again (ADR-0021). Versions are compared with
``==``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

CAPACITY = 256  # pages; a page of 100 turns is about 40 kB of JSON, so at most about 10 MB


class PageCache(Generic[V]):
    """A bounded, thread-safe map from a page's key to its body and the version it was read under;
    the least recently used page goes first."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity: at least one page")
        self._capacity = capacity
        self._pages: OrderedDict[Hashable, tuple[V, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def page(self, key: Hashable, version: V, render: Callable[[], bytes]) -> bytes:
        """The body stored for ``key`` if it was read under ``version``, else ``render()``, stored."""
        found = self.current(key, version)
        if found is not None:
            return found
        body = render()  # outside the lock: a slow page must not hold up the others
        self.store(key, version, body)
        return body

    def has(self, key: Hashable) -> bool:
        """Whether a body is stored for ``key`` (under any version)."""
        with self._lock:
            return key in self._pages

    def current(self, key: Hashable, version: V) -> bytes | None:
        """The body stored for ``key`` if it was read under ``version``, else None."""
        with self._lock:
            found = self._pages.get(key)
            if found is None or found[0] != version:
                return None
            self._pages.move_to_end(key)
            return found[1]

    def store(self, key: Hashable, version: V, body: bytes) -> None:
        """Keep ``body`` for ``key`` as read under ``version`` (the least recently used page goes)."""
        with self._lock:
            self._pages[key] = (version, body)
            self._pages.move_to_end(key)
            while len(self._pages) > self._capacity:
                self._pages.popitem(last=False)

    def __len__(self) -> int:
        return len(self._pages)

"""Pages of decided turns, kept serialised and served again while the run has not moved.

A dashboard follows a live run by asking for the same turn pages again and again, and a page of
100 turns costs three queries and a few hundred row conversions (``bench/api_load.py``, ADR-0013).
A decided turn never changes, so a page is current for as long as the run's version
(``Store.turns_version``, the id of its newest event) stays the same: checking that is one indexed
lookup. The version is read *before* the page, so a page is never stored under a version newer
than what it shows (at worst it is stored under an older one and read again once).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

CAPACITY = 256  # pages; a page of 100 turns is about 40 kB of JSON, so at most about 10 MB


class PageCache:
    """A bounded, thread-safe map from a page's key to its body and the version it was read under;
    the least recently used page goes first."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity: at least one page")
        self._capacity = capacity
        self._pages: OrderedDict[Hashable, tuple[int, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def page(self, key: Hashable, version: int, render: Callable[[], bytes]) -> bytes:
        """The body stored for ``key`` if it was read under ``version``, else ``render()``, stored."""
        with self._lock:
            found = self._pages.get(key)
            if found is not None and found[0] == version:
                self._pages.move_to_end(key)
                return found[1]
        body = render()  # outside the lock: a slow page must not hold up the others
        with self._lock:
            self._pages[key] = (version, body)
            self._pages.move_to_end(key)
            while len(self._pages) > self._capacity:
                self._pages.popitem(last=False)
        return body

    def __len__(self) -> int:
        return len(self._pages)

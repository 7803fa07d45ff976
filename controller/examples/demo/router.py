"""A toy request router: an LRU cache in front of a slow backend, with batching."""

from __future__ import annotations

import tomllib
from collections import OrderedDict
from pathlib import Path


def load_config(root: Path) -> dict:
    return tomllib.loads((root / "config.toml").read_text())


class LruCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self.items: OrderedDict[int, int] = OrderedDict()

    def get(self, key: int) -> int | None:
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key]
        return None

    def put(self, key: int, value: int) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.capacity:
            self.items.popitem(last=False)


def route(cache: LruCache, key: int) -> tuple[int, bool]:
    """Return (shard, hit): the shard a key routes to, and whether the cache answered."""
    found = cache.get(key)
    if found is not None:
        return found, True
    shard = (key * 2654435761) % 97
    cache.put(key, shard)
    return shard, False

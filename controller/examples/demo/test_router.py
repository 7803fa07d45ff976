"""Validation: the router must keep routing every key to the same shard."""

from pathlib import Path

from router import LruCache, load_config, route

config = load_config(Path(__file__).parent)
cache = LruCache(int(config["cache"]["size_mb"]) * 8)
for key in range(2000):
    first, _ = route(cache, key % 300)
    again, _ = route(cache, key % 300)
    assert first == again == ((key % 300) * 2654435761) % 97
print("ok")

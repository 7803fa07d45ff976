"""Benchmark: modelled p50 latency of the router on a fixed, skewed request stream (hot keys first).

The cache hit rate is measured for real on a seeded Zipf-like stream; the latency model adds what a
backend round trip, batching and worker contention cost, plus measurement jitter (unseeded, so every
run is a new noisy sample, as on a real machine).
"""

import random
from pathlib import Path

from router import LruCache, load_config, route

config = load_config(Path(__file__).parent)
cache_mb = int(config["cache"]["size_mb"])
batch = int(config["batch"]["size"])
workers = int(config["workers"]["count"])

stream = random.Random(42)
cache = LruCache(cache_mb * 8)
hits = 0
total = 20000
for _ in range(total):
    key = int(stream.expovariate(1 / 600))
    _, hit = route(cache, key)
    hits += hit
miss_rate = 1 - hits / total

p50 = 2.0 + 40.0 * miss_rate + 6.0 / batch + 0.35 * batch + (0.8 if workers == 1 else 0.5 + 0.3 * workers)
p50 += random.gauss(0.0, 0.15)
rss = 50 + cache_mb * 0.5 + workers * 10
print(f"METRIC p50_ms={p50:.4f}")
print(f"METRIC rss_mb={rss:.1f}")

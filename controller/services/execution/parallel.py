"""Run a few independent blocking calls (git in different checkouts) at the same time.

A turn's git work on two arms is independent: the status scans after measurement, the restore of
the candidate and the cleanup of the champion. On a large repository each is hundreds of
milliseconds of mostly system time, so doing them side by side nearly halves the wall time.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def run_all(calls: list[Callable[[], T]]) -> list[T]:
    """Results in the order of ``calls``; the first exception is re-raised after all finished."""
    if len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=min(4, len(calls))) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]

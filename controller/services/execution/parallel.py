"""Run a few independent blocking calls (git in different checkouts) at the same time.

A turn's git work on two arms is independent: the status scans after measurement, the restore of
the candidate and the cleanup of the champion. On a large repository each is hundreds of
milliseconds of mostly system time, so doing them side by side nearly halves the wall time.

The threads are kept between calls (starting threads for every pair of git commands cost a few
milliseconds a turn on a busy machine), and the first call runs in the caller's own thread, so a call
never waits for a free worker to make progress, however many runs share the pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
_WORKERS = 8


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="crucible-arms")
        return _POOL


def run_all(calls: list[Callable[[], T]]) -> list[T]:
    """Results in the order of ``calls``; the first exception is re-raised after all finished."""
    if len(calls) <= 1:
        return [call() for call in calls]
    futures: list[Future[T]] = [_pool().submit(call) for call in calls[1:]]
    first: Future[T] = Future()
    try:
        first.set_result(calls[0]())
    except BaseException as exc:  # re-raised below, after the others finished
        first.set_exception(exc)
    done = [first, *futures]
    for future in done:
        future.exception()  # wait for every call before raising any error
    return [future.result() for future in done]

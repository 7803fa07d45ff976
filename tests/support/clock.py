"""Clocks for the code that takes one (the store, leases, the scheduler): time moves only when a test
says so, so a lease expires, or a quiet window closes, without a test sleeping for it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


class Clock:
    """A clock that reads ``now`` and moves only by ``advance``."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def sleep(self, seconds: float) -> None:
        """For code that takes a ``sleep``: returns at once, the time moved by ``seconds``."""
        self.advance(seconds)


class Sleeps:
    """A monotonic clock in seconds (``time.monotonic``'s kind), moved only by hand (``now``) or by its
    ``sleep``, which records each wait: for code that takes a ``sleep`` and a float ``clock`` (the forge
    client's back-offs, the poller, the trust cache's expiry)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.calls: list[float] = []
        self.now = now

    def sleep(self, seconds: float) -> None:
        self.calls.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def __call__(self) -> float:
        return self.now


class Ahead:
    """The real clock, moved ahead by hand: time passes as usual, and ``advance`` skips some of it.

    For a server whose timestamps have one-second resolution (the local forge's ``updated_at``): a
    test that must be past the second of the last write advances this instead of sleeping 1.1 s, and
    everything the server does between two of its calls still happens in the order it happened."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


class Ticker(Clock):
    """A clock that advances one second per reading, so rows written in order have distinct times."""

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now

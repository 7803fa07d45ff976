"""A hypothesis pod's long poll for the start of its turn (ADR-0051's addendum).

A warm pod that took a hypothesis ahead of its turn (ADR-0051) sends it only once its turn started,
and drops it when the controller withdraws it (its token revoked) or the run stops. It used to look
every 0.5 s (``ledger/snapshot?last=1``): a held hypothesis then reported 0-0.5 s after its turn
started, a voided one kept measuring 0-0.5 s into the replanned turn, and a turn of four waits for
the last of them. Now its look waits here, in the request, until one of those happened: the turn's
start and a withdrawal are both news of this process's ``Slots`` (the controller offers a started
turn's unreported hypotheses, the held ones included, right after starting it; ``withdraw`` revokes),
which wakes the wait at once; a start or withdrawal through another replica is seen at the next
re-read (every ``POLL_S``, as before). The answer is the snapshot the look got before, so the pod
decides exactly as it did; a revoked token answers 401, as the look's next request did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from controller.domain.enums import RunStatus
from controller.domain.errors import UnauthenticatedError
from controller.store.records import TurnSnapshot, WorkerRoundRecord

WAIT_S = 10.0  # how long one look waits for news before it answers what it read
POLL_S = 0.5  # between re-reads while it waits (news through another replica)


class TurnStore(Protocol):
    """What the wait reads: the grant (revoked meanwhile?) and the run's newest turn."""

    def worker_round_by_token(self, token_hash: str) -> WorkerRoundRecord | None: ...

    def turn_snapshot(self, run_id: str, *, last: int) -> TurnSnapshot: ...


class News(Protocol):
    """``Slots.news`` / ``Slots.wait_news``: offers and withdrawals made in this process."""

    def news(self) -> int: ...

    def wait_news(self, seen: int, timeout: float) -> bool: ...


def await_turn(
    store: TurnStore,
    news: News,
    grant: WorkerRoundRecord,
    turn: int,
    *,
    last: int = 1,
    wait_s: float = WAIT_S,
    poll_s: float = POLL_S,
    clock: Callable[[], float] = time.monotonic,
) -> TurnSnapshot:
    """The run's snapshot (its ``last`` turns) once its highest turn is at least ``turn`` or it no longer
    runs, or after ``wait_s`` (or at once when the server is stopping) whatever it shows;
    UnauthenticatedError once ``grant`` is revoked (withdrawn, ADR-0051; or its round is over). The
    route authenticated the grant before; this re-reads it at every wake-up."""
    deadline = clock() + wait_s
    stopping = False
    while True:
        seen = news.news()
        current = store.worker_round_by_token(grant.token_hash)
        if current is None or current.revoked_at is not None:
            raise UnauthenticatedError("the worker token is revoked (withdrawn, or its round is over)")
        snapshot = store.turn_snapshot(grant.run_id, last=last)
        if snapshot.counts.highest >= turn or snapshot.run.status is not RunStatus.RUNNING:
            return snapshot
        left = deadline - clock()
        if left <= 0 or stopping:
            return snapshot
        stopping = not news.wait_news(seen, min(left, poll_s))

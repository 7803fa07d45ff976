"""The slots of warm hypothesis pods (ADR-0034): which hypothesis each pod of a parallel round takes next.

With ``broker.parallel = N`` on Kubernetes a round's N pods live for the round, not the turn (ADR-0018
started one per hypothesis per turn, and its start cost most of a turn). Pod ``i`` holds slot ``i``
of its round: a token good only for asking ``next`` (``RemoteRounds.next_hypothesis``). The
controller's turn offers hypothesis ``i`` of turn ``t`` to slot ``i`` (``offer``); the pod's waiting
request takes it (``take``) and gets a token of its own for that one hypothesis, scoped to ``(t, i)``
exactly as a one-shot hypothesis pod's (so the worker routes' checks are unchanged); the pod runs it,
reports it with that token, and asks again with ``after = t``.

The table is the database, not this process: an offer is a hypothesis grant whose token nobody holds
(``mint`` with the token thrown away), and taking it mints the hypothesis a fresh token, which
revokes the offer's (``add_worker_round`` revokes earlier grants of the same turn and index). So
any replica's worker routes can answer a pod, and a restarted controller needs nothing from the dead
one:

- it offers the turn's unreported hypotheses again; an offer finds the live grant of that
  hypothesis and adds none, so a pod still busy with it keeps a good token and reports;
- a pod that asked and never got its answer asks again with the same ``after`` and gets a fresh
  token for the same hypothesis (it was working on nothing, so revoking the lost token is safe);
- a hypothesis already reported (a pod that died between its report and its token's end, or one the
  controller reported lost) is never handed out again.

Waiting: ``take`` re-reads the grants every ``poll_s`` until ``wait_s`` passed; an offer made in the
same process wakes it at once, and so does ``close`` (the server is stopping: a long poll must not hold
its shutdown for up to ``WAIT_S``; the pod asks again, reaching whichever replica serves next). The
pods only wait between turns, while the controller decides. The controller's turn waits for its
reports the same way (``wait_for_reports``): woken by a report that arrives here, re-reading otherwise
only every ``hypothesis_pods.POLL_S``.

A pod holding a hypothesis taken ahead of its turn (ADR-0051) waits for that turn to start the same
way (``turn_wait.await_turn``, a long poll with its hypothesis token): every offer and withdrawal made
here is news for it (``news`` / ``wait_news``). The controller starts a turn and then offers each of its
unreported hypotheses (``hypothesis_pods.try_in_pods``), the held ones included, so a turn's start is
news here at once; so is a withdrawal (a voided hypothesis, or the run's stop: ``withdraw_ahead``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from controller.domain.errors import ConflictError
from controller.domain.jobs import RoundJob
from controller.store.records import HypothesisRecord, WorkerRoundRecord
from controller.store.worker_rounds import hypothesis_scope

WAIT_S = 10.0  # how long one ``next`` request waits for an offer before answering "nothing yet"
POLL_S = 1.0  # between reads of the grants while a ``next`` waits (offers of other processes)


class MintHypothesisEnv(Protocol):
    """``RemoteRounds.mint_hypothesis_env``: a hypothesis grant and its worker environment."""

    def __call__(
        self,
        job: RoundJob,
        turn: int,
        index: int,
        proposal: Mapping[str, Any] | None,
        *,
        replacing: str | None = None,
    ) -> dict[str, str]: ...


class SlotStore(Protocol):
    """What the slots read: the live hypothesis grants of an index, and the turn's reports; and how
    they withdraw an offer (its grant ended, which revokes it)."""

    def live_hypotheses(self, run_id: str, round: int, index: int) -> list[WorkerRoundRecord]: ...

    def list_hypotheses(self, run_id: str, turn: int | None = None) -> list[HypothesisRecord]: ...

    def finish_worker_round(self, token_hash: str, outcome: Mapping[str, Any]) -> WorkerRoundRecord: ...


@dataclass(frozen=True)
class Taken:
    """What a slot's ``next`` got: ``done`` (exit), or hypothesis ``index`` of ``turn`` with its own
    worker environment (``env``, its token included), or neither (nothing offered yet: ask again)."""

    done: bool = False
    turn: int | None = None
    index: int | None = None
    env: Mapping[str, str] | None = None


class Slots:
    """See the module docstring. ``mint``: ``RemoteRounds.mint_hypothesis_env``."""

    def __init__(
        self,
        store: SlotStore,
        mint: MintHypothesisEnv,
        *,
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._mint = mint
        self.poll_s = poll_s
        self._clock = clock
        self._offered = threading.Condition()
        # Counts offers and withdrawals made in this process: a waiter waits only if none came since
        # it last looked, so news between its look and its wait is not slept through (a lost wake-up).
        self._offers = 0
        self._closed = False
        self._reports = threading.Condition()
        # Counts the reports that arrived here; each waiting thread remembers the count it last
        # returned with, so a report that came while it was reading the record is not slept through.
        self._arrived = 0
        self._seen = threading.local()

    def offer(self, job: RoundJob, turn: int, index: int, proposal: Mapping[str, Any] | None) -> None:
        """Hypothesis ``index`` of ``turn`` (from ``job.heads``) for slot ``index`` of ``job``'s round,
        unless it is on offer or taken already (a restarted controller offers it again)."""
        live = self._store.live_hypotheses(job.run_id, job.round, index)
        if not any(hypothesis_scope(g.job) == (turn, index) for g in live):
            self._mint(job, turn, index, proposal)  # its token is thrown away: ``take`` mints the pod's
        self._news()

    def take(
        self,
        run_id: str,
        round: int,
        index: int,
        after: int,
        wait_s: float = WAIT_S,
        stopped: Callable[[], bool] | None = None,
    ) -> Taken:
        """The hypothesis on offer to the slot for a turn after ``after``, waiting up to ``wait_s`` for
        one (module docstring), with a token minted for the asking pod. ``stopped`` is asked at every
        re-read: True (the run no longer runs) answers ``done`` then, so a pod whose run ended while
        it waited exits at once instead of after the rest of the wait and one more request."""
        deadline = self._clock() + wait_s
        while True:
            with self._offered:
                seen = self._offers
            grant = self._next(run_id, round, index, after)
            if grant is not None:
                scope = grant.job["hypothesis"]
                job = RoundJob.from_json({k: v for k, v in grant.job.items() if k != "hypothesis"})
                turn = int(scope["turn"])
                try:  # only while the offer is live: one withdrawn meanwhile is not handed out
                    env = self._mint(job, turn, index, scope.get("proposal"), replacing=grant.token_hash)
                except ConflictError:
                    continue
                return Taken(turn=turn, index=index, env=env)
            left = deadline - self._clock()
            if left <= 0 or self._closed:
                return Taken()
            with self._offered:
                if self._offers == seen and not self._closed:
                    self._offered.wait(min(left, self.poll_s))
            if stopped is not None and stopped():
                return Taken(done=True)

    def withdraw(
        self, job: RoundJob, turn: int, count: int, wanted: Mapping[int, Mapping[str, Any] | None]
    ) -> int:
        """Revoke every live grant of ``turn`` (indices ``0..count-1``) that is not what the turn will
        be played as: its index not in ``wanted``, its heads not ``job.heads`` (the champion moved),
        or its proposal not ``wanted[index]`` (ADR-0051: a speculative hypothesis offered before the
        previous turn was decided, and voided by that decision). The caller withdraws before it starts
        the turn, so no voided hypothesis can report into it; a pod measuring one sees its token
        revoked and stops. ``take`` mints only while the offer it replaces is live, so re-reading
        until nothing stale is live leaves none behind. How many were revoked."""
        revoked = 0
        while True:
            stale = [
                grant
                for index in range(count)
                for grant in self._store.live_hypotheses(job.run_id, job.round, index)
                if (hypothesis_scope(grant.job) or (None, None))[0] == turn
                and not _wanted(grant, job, wanted)
            ]
            if not stale:
                if revoked:
                    self._news()  # a pod holding one stops now, not at its next re-read
                return revoked
            for grant in stale:
                try:
                    self._store.finish_worker_round(grant.token_hash, {"withdrawn": f"turn {turn} replanned"})
                except ConflictError:  # taken or ended meanwhile: the next read finds what replaced it
                    continue
                revoked += 1

    def close(self) -> None:
        """The server is stopping: every waiting ``take`` answers "nothing yet" now, and every later one
        without waiting. uvicorn waits for open requests before the app's shutdown runs, so a pod's
        long poll would otherwise hold the shutdown for the rest of its ``wait_s``."""
        with self._offered:
            self._closed = True
            self._offered.notify_all()

    def news(self) -> int:
        """How many offers and withdrawals this process made so far: a waiter reads it before it
        looks at the record, then waits with it (``wait_news``)."""
        with self._offered:
            return self._offers

    def wait_news(self, seen: int, timeout: float) -> bool:
        """Until an offer or a withdrawal made here after ``seen`` (``news``), the server's stop or
        ``timeout`` (news through another replica is seen by the caller's next read). False once the
        server is stopping: a long poll answers then."""
        with self._offered:
            if self._offers == seen and not self._closed:
                self._offered.wait(timeout)
            return not self._closed

    def _news(self) -> None:
        with self._offered:
            self._offers += 1
            self._offered.notify_all()

    def reported(self) -> None:
        """A hypothesis report arrived through this process's worker routes: wake the waiters."""
        with self._reports:
            self._arrived += 1
            self._reports.notify_all()

    def wait_for_reports(self, timeout: float) -> None:
        """Until a report arrives through this process's worker routes, or ``timeout`` passed (a
        report through another replica's routes is seen by the caller's next read). It returns at
        once when a report arrived since this thread's previous call returned: the caller read the
        record after that return, and a report stored after its read would otherwise wait for the
        ``timeout`` (the turn's decision, or a free slot's next offer, up to a second late)."""
        with self._reports:
            if getattr(self._seen, "arrived", None) == self._arrived:
                self._reports.wait(timeout)
            self._seen.arrived = self._arrived

    def _next(self, run_id: str, round: int, index: int, after: int) -> WorkerRoundRecord | None:
        """The newest live grant of the index for a turn after ``after`` that has no report yet."""
        for grant in reversed(self._store.live_hypotheses(run_id, round, index)):
            scope = hypothesis_scope(grant.job)
            if scope is None or scope[0] <= after:
                continue
            reported = {h.index for h in self._store.list_hypotheses(run_id, scope[0])}
            if index not in reported:
                return grant
        return None


def _wanted(grant: WorkerRoundRecord, job: RoundJob, wanted: Mapping[int, Mapping[str, Any] | None]) -> bool:
    """Whether a live hypothesis grant is the one the turn will be played with (``Slots.withdraw``)."""
    scope = grant.job["hypothesis"]
    index = int(scope["index"])
    if index not in wanted or dict(grant.job.get("heads") or {}) != dict(job.heads):
        return False
    want = wanted[index]
    return bool(scope.get("proposal") == (None if want is None else dict(want)))

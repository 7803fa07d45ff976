"""Who drives a run, as a lease in the database, and the run's phase (ADR-0004).

A process id says nothing on another host, and a server replica that dies cannot send anything.
So the process driving a run holds a lease (owner id, expiry) that its heartbeat renews; anyone may
take a run over once its lease has expired, and ``cancel`` is a flag in the run row that the holder
reads with each renewal. A mixin of ``Store`` in its own module; the session scope, the clock and the
transaction rules are ``Store``'s.

Claims are single-writer per run: PostgreSQL locks the candidate rows ``FOR UPDATE SKIP LOCKED`` (two
schedulers never wait for each other and never claim one run twice), SQLite serialises every writer
with ``BEGIN IMMEDIATE``. The expiry is computed with the store's clock, so replicas' clocks must
agree to well within a lease (NTP does); tests inject the clock.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from controller.domain.enums import EventKind, RunPhase, RunStatus, check_phase_transition
from controller.domain.errors import ConflictError, LeaseHeldError, LeaseLostError, NotFoundError
from controller.store.models import FeedbackRow, RunRow
from controller.store.queries import append_event_row, lock_run
from controller.store.records import Renewal

# Statuses a scheduler may pick up: a new run, or a running one whose driver stopped heart-beating.
CLAIMABLE = (RunStatus.PENDING.value, RunStatus.RUNNING.value)


class Leases:
    """Lease, cancel flag and phase of a run; mixed into ``Store`` (see the module docstring).

    Errors: NotFoundError for an unknown run; LeaseHeldError (a ConflictError) when a live lease of
    another owner is in the way; LeaseLostError when the caller's lease was taken over; ConflictError
    for a finished run or an illegal phase transition (``enums.PHASE_TRANSITIONS``).
    """

    def _now(self) -> datetime:
        raise NotImplementedError

    def _session(self, *, read_only: bool = False) -> AbstractContextManager[Session]:
        raise NotImplementedError

    # -- leases -------------------------------------------------------------------------------

    def claim_run(self, run_id: str, owner: str, ttl_s: float) -> datetime:
        """Take (or renew) the lease of one run for ``ttl_s`` seconds; returns the expiry.

        Succeeds when nobody holds the lease, ``owner`` already does, or the holder's lease has
        expired (a takeover). LeaseHeldError otherwise; ConflictError for a completed or failed run.
        """
        with self._session() as s:
            row = lock_run(s, run_id)
            if row.status in (RunStatus.COMPLETED.value, RunStatus.FAILED.value):
                raise ConflictError(f"run {run_id} already finished ({row.status})")
            now = self._now()
            if row.lease_owner not in (None, owner) and not _expired(row, now):
                assert row.lease_owner is not None and row.lease_expires_at is not None
                left = (row.lease_expires_at - now).total_seconds()
                raise LeaseHeldError(run_id, row.lease_owner, left)
            return _grant(row, owner, now, ttl_s)

    def claim_runs(self, owner: str, ttl_s: float, *, limit: int) -> list[str]:
        """Claim up to ``limit`` runs nobody drives (pending, or running with an expired or no
        lease), oldest first; returns their ids. Rows another claimer has locked are skipped, not
        waited for, so concurrent schedulers split the work instead of queueing on it."""
        if limit < 1:
            return []
        with self._session() as s:
            now = self._now()
            query = (
                sa.select(RunRow)
                .where(
                    RunRow.status.in_(CLAIMABLE),
                    sa.or_(RunRow.lease_owner.is_(None), RunRow.lease_expires_at <= now),
                )
                .order_by(RunRow.created_at, RunRow.id)
                .limit(limit)
                .with_for_update(skip_locked=True, key_share=True)
            )
            rows = list(s.scalars(query.execution_options(populate_existing=True)))
            for row in rows:
                _grant(row, owner, now, ttl_s)
            return [row.id for row in rows]

    def renew_lease(self, run_id: str, owner: str, ttl_s: float) -> Renewal:
        """Extend ``owner``'s lease by ``ttl_s`` from now and read the cancel flag (the heartbeat).

        LeaseLostError when another owner holds the lease or nobody does (it was handed back or
        taken over): the caller must stop driving the run without writing to it.
        """
        with self._session() as s:
            row = lock_run(s, run_id)
            if row.lease_owner != owner:
                holder = row.lease_owner or "nobody"
                raise LeaseLostError(f"run {run_id}: the lease of {owner} is gone (held by {holder})")
            expires = _grant(row, owner, self._now(), ttl_s)
            return Renewal(expires_at=expires, cancel_requested=row.cancel_requested)

    def renew_leases(self, owner: str, ttl_s: float, run_ids: Collection[str]) -> dict[str, Renewal]:
        """``renew_lease`` for many runs of one owner in one statement (a process's heartbeat for
        every run it drives); the runs missing from the answer were lost (taken over or handed
        back). Runs that do not exist count as lost too."""
        if not run_ids:
            return {}
        if not ttl_s > 0:
            raise ValueError(f"a lease lasts a positive number of seconds, got {ttl_s!r}")
        with self._session() as s:
            expires = self._now() + timedelta(seconds=ttl_s)
            renewed = s.execute(
                sa.update(RunRow)
                .where(RunRow.id.in_(sorted(run_ids)), RunRow.lease_owner == owner)
                .values(lease_expires_at=expires)
                .returning(RunRow.id, RunRow.cancel_requested)
                .execution_options(synchronize_session=False)
            )
            return {run_id: Renewal(expires, bool(cancel)) for run_id, cancel in renewed}

    def release_lease(self, run_id: str, owner: str) -> bool:
        """Hand the lease back (so the run can be taken over at once); False if ``owner`` did not
        hold it, which is not an error (a takeover may have happened)."""
        with self._session() as s:
            row = lock_run(s, run_id)
            if row.lease_owner != owner:
                return False
            row.lease_owner = None
            row.lease_expires_at = None
            return True

    def release_leases(self, owner: str, run_ids: Collection[str]) -> int:
        """``release_lease`` for many runs of one owner in one statement (a server shutting down
        hands back every run it holds); how many it held."""
        if not run_ids:
            return 0
        with self._session() as s:
            released = s.execute(
                sa.update(RunRow)
                .where(RunRow.id.in_(sorted(run_ids)), RunRow.lease_owner == owner)
                .values(lease_owner=None, lease_expires_at=None)
                .returning(RunRow.id)
                .execution_options(synchronize_session=False)
            )
            return len(released.all())

    def request_cancel(self, run_id: str) -> None:
        """Ask whoever drives the run to stop (they read the flag when they renew their lease).

        ConflictError for a run that already finished or is cancelled."""
        with self._session() as s:
            row = lock_run(s, run_id)
            if row.status not in CLAIMABLE:
                raise ConflictError(f"run {run_id} already finished ({row.status})")
            row.cancel_requested = True
            row.updated_at = self._now()

    # -- phase --------------------------------------------------------------------------------

    def set_phase(self, run_id: str, phase: RunPhase) -> None:
        """Move the run to ``phase``; a no-op when it is there already (a resumed run re-entering
        the phase it was in), ConflictError when ``PHASE_TRANSITIONS`` forbids the move."""
        with self._session() as s:
            row = lock_run(s, run_id)
            if row.phase != phase.value:
                check_phase_transition(RunPhase(row.phase), phase)
                row.phase = phase.value
                row.updated_at = self._now()

    def start_round(
        self, run_id: str, number: int, feedback_ids: Sequence[int], event: Mapping[str, Any]
    ) -> None:
        """Start refinement round ``number`` in one transaction: the run's round counter, the phase
        (watching -> round), the feedback the round consumes, and the ROUND_STARTED event.

        A crash leaves either no trace of the round or all of it (never a counted round without its
        feedback). ConflictError unless the run is watching and ``number`` is its round + 1;
        NotFoundError (nothing written) if a feedback id is unknown or another run's.
        """
        with self._session() as s:
            row = lock_run(s, run_id)
            check_phase_transition(RunPhase(row.phase), RunPhase.ROUND)
            if number != row.round + 1:
                raise ConflictError(f"run {run_id} is at round {row.round}; round {number} is not next")
            _assign(s, run_id, feedback_ids, number)
            now = self._now()
            row.round, row.phase, row.updated_at = number, RunPhase.ROUND.value, now
            append_event_row(s, run_id, EventKind.ROUND_STARTED, event, now)

    def finish_round(
        self, run_id: str, number: int, events: Sequence[tuple[EventKind, Mapping[str, Any]]]
    ) -> None:
        """End round ``number`` in one transaction: back to watching, with its ``events`` (drafted
        replies, ROUND_FINISHED). ConflictError unless the run is in that round."""
        with self._session() as s:
            row = lock_run(s, run_id)
            if row.phase != RunPhase.ROUND.value or row.round != number:
                raise ConflictError(f"run {run_id} is not in round {number} ({row.phase}, {row.round})")
            now = self._now()
            row.phase, row.updated_at = RunPhase.WATCHING.value, now
            for kind, payload in events:
                append_event_row(s, run_id, kind, payload, now)


def _expired(row: RunRow, now: datetime) -> bool:
    return row.lease_expires_at is None or row.lease_expires_at <= now


def _grant(row: RunRow, owner: str, now: datetime, ttl_s: float) -> datetime:
    if not ttl_s > 0:
        raise ValueError(f"a lease lasts a positive number of seconds, got {ttl_s!r}")
    expires = now + timedelta(seconds=ttl_s)
    row.lease_owner, row.lease_expires_at = owner, expires
    return expires


def _assign(s: Session, run_id: str, feedback_ids: Sequence[int], number: int) -> None:
    ids = set(feedback_ids)
    rows = list(s.scalars(sa.select(FeedbackRow).where(FeedbackRow.id.in_(ids)))) if ids else []
    found = {row.id for row in rows if row.run_id == run_id}
    if found != ids:
        raise NotFoundError(f"run {run_id} has no feedback {sorted(ids - found)}")
    for row in rows:
        row.round = number

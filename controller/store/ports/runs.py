"""Ports of one run's record: what it is now, who holds it, how it moves, where its components stand.

The store has some eighty public methods; a consumer that types its parameter as ``Store`` depends on
all of them, and on SQLAlchemy. Each Protocol here is the few methods one kind of consumer calls,
with the contract stated once, so a consumer names what it needs and a fake (or another backend)
passes the same contract suite (``tests/ports``) as the SQL store does over SQLite and PostgreSQL.

Errors (``controller.domain.errors``), from every implementation, as ``Store`` documents them:
NotFoundError for an unknown run (every method checks the run, reads included), ConflictError when
the call contradicts the record (nothing changed), RetryLaterError when the backend is busy or
unreachable (the same call may succeed later), ValueError for a caller bug (nothing written).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.store.records import (
    ComponentRecord,
    EventRecord,
    HypothesisRecord,
    NewRun,
    Renewal,
    RunRecord,
    SampleRecord,
    TurnCounts,
    TurnRecord,
    TurnSnapshot,
)


class RunReads(Protocol):
    """A run, its components and its events as the controller reads them (one snapshot each)."""

    def get_run(self, run_id: str) -> RunRecord:
        """The run as stored now."""
        ...

    def list_components(self, run_id: str) -> list[ComponentRecord]:
        """The run's components in the order they were added (the spec's)."""
        ...

    def list_events(
        self,
        run_id: str,
        *,
        after_id: int = 0,
        limit: int | None = None,
        kinds: Collection[EventKind] | None = None,
    ) -> list[EventRecord]:
        """Events with id > ``after_id``, oldest first; only of ``kinds`` when given."""
        ...


class TurnReads(Protocol):
    """A run's turns and what they measured, as the controller reads them (one snapshot each)."""

    def get_turn(self, run_id: str, number: int) -> TurnRecord:
        """Turn ``number`` as stored now (NotFoundError if the run has none)."""
        ...

    def list_turns(self, run_id: str, *, last: int | None = None) -> list[TurnRecord]:
        """Every turn by number, or only the ``last`` ones (still ascending)."""
        ...

    def turn_counts(self, run_id: str) -> TurnCounts:
        """Decided turns per round, the highest turn number, the turns still STARTED."""
        ...

    def turn_snapshot(self, run_id: str, *, last: int) -> TurnSnapshot:
        """The run, ``turn_counts`` and ``list_turns(last=...)`` read together."""
        ...

    def list_samples(self, run_id: str, turn: int | None = None) -> list[SampleRecord]:
        """Samples by turn, then in the order they were added."""
        ...

    def list_hypotheses(self, run_id: str, turn: int | None = None) -> list[HypothesisRecord]:
        """The parallel hypotheses of one turn or of all, by turn and index (empty for N = 1)."""
        ...


class RunLeases(Protocol):
    """Who drives a run (ADR-0004): a lease (owner, expiry) its holder renews; anyone may take the run
    over once it has expired. What a heartbeat and a resume's wait for a silent holder need.

    Errors beyond the common ones: LeaseHeldError (a ConflictError) when a live lease of another
    owner is in the way; LeaseLostError when the caller's lease was taken over or handed back; ConflictError
    when claiming a completed or failed run. ValueError for a lease of no positive length."""

    def get_run(self, run_id: str) -> RunRecord:
        """The run as stored now (its ``lease_owner`` and ``lease_expires_at`` included)."""
        ...

    def claim_run(self, run_id: str, owner: str, ttl_s: float) -> datetime:
        """Take (or renew) the run's lease for ``ttl_s`` seconds; its expiry."""
        ...

    def renew_lease(self, run_id: str, owner: str, ttl_s: float) -> Renewal:
        """Extend ``owner``'s lease; LeaseLostError if it is someone else's (or nobody's) now."""
        ...

    def renew_leases(self, owner: str, ttl_s: float, run_ids: Collection[str]) -> dict[str, Renewal]:
        """Extend every lease of ``run_ids`` that ``owner`` still holds, in one transaction; the runs
        whose lease it lost are absent from the answer (no error: the caller stops driving them)."""
        ...

    def release_lease(self, run_id: str, owner: str) -> bool:
        """Hand the lease back if ``owner`` holds it; whether it did (idempotent)."""
        ...


class RunLifecycle(Protocol):
    """Creating a run and moving it along its states (``enums.RUN_TRANSITIONS``), with its events.

    ``create_run`` stores the run with its components in one transaction (ConflictError for an id
    that exists); ``set_run_status`` refuses an illegal transition with ConflictError and a stop
    reason that does not go with the status with ValueError; ``request_cancel`` sets the flag the
    holder reads with its next renewal (ConflictError for a finished or cancelled run)."""

    def create_run(self, run: NewRun, components: Sequence[ComponentRecord] = ()) -> RunRecord:
        """Store a new PENDING run with ``components`` (in this order)."""
        ...

    def set_run_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        stop_reason: StopReason | None = None,
        stop_message: str | None = None,
    ) -> RunRecord:
        """Move the run to ``status``; a finished status records the stop fields."""
        ...

    def request_cancel(self, run_id: str) -> None:
        """Ask whoever drives the run to stop."""
        ...

    def append_event(self, run_id: str, kind: EventKind, payload: Mapping[str, Any]) -> EventRecord:
        """Append one event; ids increase in the order events become visible."""
        ...


class ComponentHeads(Protocol):
    """Where a run's components stand outside a turn's decision: a refinement round's pushed head,
    an upstream the run now builds on, a head a reviewer pushed, what publishing remembers.

    Each write locks the run and is one transaction (with its event where it has one), so a crash
    leaves the old or the new state, never a mix. NotFoundError for an unknown component."""

    def set_component_head(self, run_id: str, name: str, head_sha: str) -> None:
        """The component's champion head is now ``head_sha``."""
        ...

    def update_component_extra(self, run_id: str, name: str, extra: Mapping[str, Any]) -> None:
        """Merge ``extra`` into the component's extra (given keys replace stored ones)."""
        ...

    def follow_base(
        self, run_id: str, name: str, *, new_base: str, head_sha: str, event: Mapping[str, Any]
    ) -> None:
        """The component now builds on ``new_base`` with ``head_sha`` as its champion (BASE_FOLLOWED)."""
        ...

    def build_on_adopted(
        self, run_id: str, name: str, *, head_sha: str, value: float, event: Mapping[str, Any]
    ) -> None:
        """The champion is ``head_sha``, applied onto a head someone else pushed (BUILT_ON_ADOPTED)."""
        ...

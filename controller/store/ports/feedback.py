"""Ports of a run's pull requests, the webhook deliveries and feedback it receives, and its rounds.

Publishing, the feedback intake, the watch and refinement rounds each need a few of these; the
contract is ``Store``'s (``store.pulls_feedback``, ``store.leases``), stated per Protocol below and
tested over every implementation in ``tests/ports``. Errors as in ``ports.runs``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from controller.domain.enums import EventKind, RunPhase
from controller.store.records import (
    DeliveryRecord,
    FeedbackFields,
    FeedbackRecord,
    NewDelivery,
    PullRecord,
)


class PullRecords(Protocol):
    """The pull requests crucible opened for runs, one current record per (run, component)."""

    def save_pull(self, rec: PullRecord) -> None:
        """Insert or update the PR of (run, component); idempotent."""
        ...

    def list_pulls(self, run_id: str) -> list[PullRecord]:
        """The run's PRs by component."""
        ...

    def pulls_of(self, run_ids: Collection[str]) -> list[PullRecord]:
        """The PRs of several runs in one read (no NotFoundError: unknown ids have none)."""
        ...

    def pull_by_number(self, repo: str, number: int) -> PullRecord | None:
        """The newest record of PR ``number`` of ``repo``, or None when crucible did not open it."""
        ...

    def set_pull_state(
        self,
        run_id: str,
        component: str,
        state: str,
        *,
        event: tuple[EventKind, Mapping[str, Any]] | None = None,
    ) -> bool:
        """Move the PR to ``state`` (with ``event`` in the same transaction); False when it was there."""
        ...


class FeedbackRecords(Protocol):
    """Review feedback on a run's PRs: stored once per forge item, judged, consumed by a round."""

    def add_feedback(self, run_id: str, component: str, event: FeedbackFields) -> FeedbackRecord | None:
        """Store one version of an item, undecided, with its FEEDBACK_RECEIVED event; None when this
        version is stored already (ten webhooks and the poller seeing one comment store it once)."""
        ...

    def list_feedback(
        self, run_id: str, *, undecided_only: bool = False, round: int | None = None
    ) -> list[FeedbackRecord]:
        """The run's feedback oldest first; only undecided, or only one round's, when asked."""
        ...

    def set_feedback_verdict(
        self, feedback_id: int, *, trusted: bool, verdict: str, reason: str
    ) -> FeedbackRecord:
        """Record whether the item is trusted and what the watch made of it."""
        ...

    def assign_round(self, feedback_ids: Sequence[int], round: int) -> None:
        """Mark the items as consumed by ``round``."""
        ...


class DeliveryQueue(Protocol):
    """Webhook deliveries stored first, processed later (durable intake, de-duplicated by id)."""

    def save_delivery(
        self, delivery_id: str, event: str, action: str | None, payload: Mapping[str, Any]
    ) -> bool:
        """Store one delivery; False when its id is stored already (a redelivery)."""
        ...

    def save_deliveries(self, deliveries: Sequence[NewDelivery]) -> list[bool]:
        """Store a batch in one transaction; per delivery, whether it was new."""
        ...

    def pending_deliveries(self, limit: int = 100) -> list[DeliveryRecord]:
        """Deliveries not yet processed, oldest first."""
        ...

    def mark_delivery_processed(self, delivery_id: str) -> None:
        """The delivery is processed (idempotent)."""
        ...


class RoundRecords(Protocol):
    """A run's phase and its refinement rounds (``enums.PHASE_TRANSITIONS``).

    ``start_round`` writes the round counter, the phase, the consumed feedback and ROUND_STARTED in
    one transaction (ConflictError unless the run watches and ``number`` is next; NotFoundError for a
    feedback id of another run); ``finish_round`` goes back to watching with its events
    (ConflictError unless the run is in that round)."""

    def set_phase(self, run_id: str, phase: RunPhase) -> None:
        """Move the run to ``phase`` (a no-op when it is there already)."""
        ...

    def start_round(
        self, run_id: str, number: int, feedback_ids: Sequence[int], event: Mapping[str, Any]
    ) -> None:
        """Start refinement round ``number``."""
        ...

    def finish_round(
        self, run_id: str, number: int, events: Sequence[tuple[EventKind, Mapping[str, Any]]]
    ) -> None:
        """End round ``number``."""
        ...

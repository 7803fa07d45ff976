"""The store's pull-request, webhook-delivery and feedback methods (docs/github.md, docs/api.md).

A mixin of ``Store`` kept in its own module so each file stays readable; the contract, the session
scope and the transaction rules are ``Store``'s (see its docstring). Every method is one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from controller.domain.enums import (
    EventKind,
)
from controller.domain.errors import (
    NotFoundError,
)
from controller.store.feedback_queries import (
    feedback_row,
    find_feedback,
    get_feedback_row,
    insert_deliveries,
    newest_pull_row,
)
from controller.store.models import (
    ComponentRow,
    DeliveryRow,
    FeedbackRow,
    PullRequestRow,
)
from controller.store.queries import (
    append_event_row,
    get_run_row,
    lock_run,
)
from controller.store.records import (
    DeliveryRecord,
    FeedbackFields,
    FeedbackRecord,
    FeedbackVerdict,
    NewDelivery,
    PullRecord,
)


class PullsAndFeedback:
    """Pull requests of runs, stored webhook deliveries and review feedback; mixed into ``Store``."""

    def _now(self) -> datetime:
        raise NotImplementedError

    def _session(self, *, read_only: bool = False) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def _connection(self, *, read_only: bool = False) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def save_pull(self, rec: PullRecord) -> None:
        """Insert or update the PR of (run, component); idempotent."""
        with self._session() as s:
            lock_run(s, rec.run_id)
            row = s.get(PullRequestRow, (rec.run_id, rec.component))
            if row is None:
                row = PullRequestRow(run_id=rec.run_id, component=rec.component)
                s.add(row)
            for name in (
                "repo",
                "number",
                "url",
                "branch",
                "head_sha",
                "pushed_sha",
                "base_sha",
                "draft",
                "state",
                "paused",
                "published_value",
                "note",
                "title",
                "status_sha",
            ):
                setattr(row, name, getattr(rec, name))
            row.process = rec.process.to_json()
            row.updated_at = self._now()

    def list_pulls(self, run_id: str) -> list[PullRecord]:
        """The run's PRs in component order."""
        query = (
            sa.select(PullRequestRow)
            .join(
                ComponentRow,
                sa.and_(
                    ComponentRow.run_id == PullRequestRow.run_id,
                    ComponentRow.name == PullRequestRow.component,
                ),
            )
            .where(PullRequestRow.run_id == run_id)
            .order_by(ComponentRow.position)
        )
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            return [row.to_record() for row in s.scalars(query)]

    # -- webhook deliveries and feedback (docs/github.md, docs/api.md) --------------------------

    def save_delivery(
        self, delivery_id: str, event: str, action: str | None, payload: Mapping[str, Any]
    ) -> bool:
        """Store a webhook delivery as pending; False (and nothing written) if its id is stored already.

        Safe under concurrent calls with the same id: exactly one of them returns True. ValueError
        for a payload that is not JSON (NaN, infinities, objects ``json`` cannot encode).
        """
        try:
            text = json.dumps(dict(payload), allow_nan=False)
        except TypeError as exc:  # the same caller bug as NaN: one error type for both
            raise ValueError(str(exc)) from exc
        return self.save_deliveries([NewDelivery(delivery_id, event, action, text)])[0]

    def save_deliveries(self, deliveries: Sequence[NewDelivery]) -> list[bool]:
        """Store webhook deliveries as pending, all in one transaction; per delivery, as ``save_delivery``:
        True if stored now, False (nothing written for it) if its id is stored already or appears
        earlier in ``deliveries`` (the first one wins). All get the same ``received_at``.

        Either every new delivery is stored or none is (RetryLaterError when the database is busy or
        unreachable). Safe under concurrent calls: an id is stored once, and only the call that stored
        it says True. ``payload_json`` is stored as given (see ``NewDelivery``).
        """
        if not deliveries:
            return []
        with self._connection() as connection:
            return insert_deliveries(connection, deliveries, self._now())

    def pending_deliveries(self, limit: int = 100) -> list[DeliveryRecord]:
        """Deliveries not yet processed, oldest first."""
        query = (
            sa.select(DeliveryRow)
            .where(DeliveryRow.processed_at.is_(None))
            .order_by(DeliveryRow.received_at, DeliveryRow.id)
            .limit(limit)
        )
        with self._session(read_only=True) as s:
            return [row.to_record() for row in s.scalars(query)]

    def mark_delivery_processed(self, delivery_id: str) -> None:
        """Mark a delivery processed (idempotent: the first time is kept). NotFoundError if unknown."""
        with self._session() as s:
            row = s.get(DeliveryRow, delivery_id)
            if row is None:
                raise NotFoundError(f"no delivery {delivery_id}")
            if row.processed_at is None:
                row.processed_at = self._now()

    def add_feedback(self, run_id: str, component: str, event: FeedbackFields) -> FeedbackRecord | None:
        """Store one version of a feedback item, undecided, with its FEEDBACK_RECEIVED event.

        None (nothing written) if this (source, external_id, action, updated_at) is already stored for
        the run: the same comment seen by ten webhooks and by the poller is one item, while an edit
        and a delete with the same ``updated_at`` are two. Each version keeps its own body and
        ``diff_hunk``, so an edit replaces both for the next round. The event is appended in the same
        transaction, so each item has exactly one. NotFoundError for an unknown run; ValueError for
        an unknown source.
        """
        with self._session() as s:
            lock_run(s, run_id)
            if find_feedback(s, run_id, event) is not None:
                return None
            now = self._now()
            row = feedback_row(run_id, component, event, now)
            s.add(row)
            s.flush()
            payload = {
                "feedback_id": row.id,
                "component": component,
                "pr_number": row.pr_number,
                "source": row.source,
                "external_id": row.external_id,
                "action": row.action,
                "author": row.author,
            }
            append_event_row(s, run_id, EventKind.FEEDBACK_RECEIVED, payload, now)
            return row.to_record()

    def list_feedback(
        self, run_id: str, *, undecided_only: bool = False, round: int | None = None
    ) -> list[FeedbackRecord]:
        """The run's feedback in arrival order; only items without a verdict, or of one ``round``."""
        query = sa.select(FeedbackRow).where(FeedbackRow.run_id == run_id)
        if undecided_only:
            query = query.where(FeedbackRow.verdict.is_(None))
        if round is not None:
            query = query.where(FeedbackRow.round == round)
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            return [row.to_record() for row in s.scalars(query.order_by(FeedbackRow.id))]

    def set_feedback_verdict(
        self, feedback_id: int, *, trusted: bool, verdict: str, reason: str
    ) -> FeedbackRecord:
        """Record the trust check's decision (a later call replaces it). NotFoundError, ValueError."""
        checked = FeedbackVerdict(verdict)
        with self._session() as s:
            row = get_feedback_row(s, feedback_id)
            lock_run(s, row.run_id)
            row.trusted, row.verdict, row.reason = trusted, checked.value, reason
            return row.to_record()

    def assign_round(self, feedback_ids: Sequence[int], round: int) -> None:
        """Mark the items as consumed by ``round``; all or nothing (NotFoundError if one is unknown)."""
        ids = sorted(set(feedback_ids))
        with self._session() as s:
            rows = list(s.scalars(sa.select(FeedbackRow).where(FeedbackRow.id.in_(ids))))
            missing = set(ids) - {row.id for row in rows}
            if missing:
                raise NotFoundError(f"no feedback items {sorted(missing)}")
            for run_id in sorted({row.run_id for row in rows}):
                lock_run(s, run_id)
            for row in rows:
                row.round = round

    def pulls_of(self, run_ids: Collection[str]) -> list[PullRecord]:
        """The PRs of every run in ``run_ids`` in one read (the feedback hub's poller, before each
        poll, for every run it watches)."""
        if not run_ids:
            return []
        query = sa.select(PullRequestRow).where(PullRequestRow.run_id.in_(sorted(run_ids)))
        with self._session(read_only=True) as s:
            return [row.to_record() for row in s.scalars(query)]

    def pull_by_number(self, repo: str, number: int) -> PullRecord | None:
        """The PR ``repo``#``number`` as crucible published it (newest run if several), or None."""
        with self._session(read_only=True) as s:
            row = newest_pull_row(s, repo, number)
            return None if row is None else row.to_record()

    def set_pull_state(
        self,
        run_id: str,
        component: str,
        state: str,
        *,
        event: tuple[EventKind, Mapping[str, Any]] | None = None,
    ) -> bool:
        """Set the PR's state (open/closed), appending ``event`` in the same transaction, only if it
        changes; returns whether it changed (so a repeated close appends one event). NotFoundError."""
        with self._session() as s:
            lock_run(s, run_id)
            row = s.get(PullRequestRow, (run_id, component))
            if row is None:
                raise NotFoundError(f"run {run_id} has no PR for component {component!r}")
            if row.state == state:
                return False
            row.state = state
            row.updated_at = self._now()
            if event is not None:
                append_event_row(s, run_id, event[0], event[1], row.updated_at)
            return True

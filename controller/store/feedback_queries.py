"""Row-level steps of the feedback intake (deliveries and feedback items), inside the caller's session.

Kept apart from ``store.py`` (as ``queries.py`` is) so the ``Store`` methods stay one short
transaction each. Deduplication happens here, in the database: a delivery id is inserted with
``ON CONFLICT DO NOTHING`` (two racing HTTP workers store it once), and a feedback version is
looked up by its UNIQUE key under the run lock before it is inserted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from controller.domain.errors import NotFoundError
from controller.store.models import DeliveryRow, FeedbackRow, PullRequestRow, RunRow
from controller.store.records import FeedbackFields, FeedbackSource


def insert_delivery(
    s: Session, delivery_id: str, event: str, action: str | None, payload: Mapping[str, Any], now: datetime
) -> bool:
    """Insert the delivery unless its id is stored already; True when this call inserted it."""
    values = dict(id=delivery_id, event=event, action=action, payload=dict(payload), received_at=now)
    dialect = s.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(DeliveryRow).values(**values).on_conflict_do_nothing(index_elements=["id"])
    return s.execute(statement.returning(DeliveryRow.id)).scalar_one_or_none() is not None


def find_feedback(s: Session, run_id: str, event: FeedbackFields) -> FeedbackRow | None:
    """The stored row for this version of the item (source, id, action, updated_at), if any."""
    query = sa.select(FeedbackRow).where(
        FeedbackRow.run_id == run_id,
        FeedbackRow.source == FeedbackSource(event.source).value,
        FeedbackRow.external_id == event.external_id,
        FeedbackRow.action == event.action,
        FeedbackRow.updated_at == event.updated_at,
    )
    return s.scalars(query).one_or_none()


def feedback_row(run_id: str, component: str, event: FeedbackFields, now: datetime) -> FeedbackRow:
    """A new, undecided row for ``event`` (ValueError for an unknown source)."""
    return FeedbackRow(
        run_id=run_id,
        component=component,
        pr_number=event.pr_number,
        source=FeedbackSource(event.source).value,
        external_id=event.external_id,
        review_id=event.review_id,
        author=event.author,
        author_type=event.author_type,
        association=event.association,
        body=event.body,
        path=event.path,
        line=event.line,
        action=event.action,
        updated_at=event.updated_at,
        url=event.url,
        diff_hunk=event.diff_hunk,
        received_at=now,
    )


def get_feedback_row(s: Session, feedback_id: int) -> FeedbackRow:
    row = s.get(FeedbackRow, feedback_id)
    if row is None:
        raise NotFoundError(f"no feedback item {feedback_id}")
    return row


def newest_pull_row(s: Session, repo: str, number: int) -> PullRequestRow | None:
    """The PR row for ``repo``#``number`` of the newest run (repo names compare case-insensitively)."""
    query = (
        sa.select(PullRequestRow)
        .join(RunRow, RunRow.id == PullRequestRow.run_id)
        .where(sa.func.lower(PullRequestRow.repo) == repo.lower(), PullRequestRow.number == number)
        .order_by(RunRow.created_at.desc(), RunRow.id.desc())
        .limit(1)
    )
    return s.scalars(query).first()

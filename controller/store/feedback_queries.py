"""Row-level steps of the feedback intake (deliveries and feedback items), inside the caller's session.

Kept apart from ``store.py`` (as ``queries.py`` is) so the ``Store`` methods stay one short
transaction each. Deduplication happens here, in the database: delivery ids are inserted with
``ON CONFLICT DO NOTHING`` (two racing writers store one id once), and a feedback version is
looked up by its UNIQUE key under the run lock before it is inserted.

Deliveries are the one hot write path (every webhook): they go through one Core statement built
once per dialect, a multi-row ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` (SQLAlchemy's
"insertmanyvalues"), with the payload bound as the JSON text received rather than a dict the ORM
would encode again. The ``payload`` column is JSON on both backends: SQLite stores the text as it
is, PostgreSQL's ``json`` (not ``jsonb``) type checks and keeps it verbatim; both read back through
the column's JSON type, so a stored payload reads exactly as the ORM would have stored it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from controller.domain.errors import NotFoundError
from controller.store.models import FeedbackRow, PullRequestRow, RunRow, UTCDateTime
from controller.store.records import FeedbackFields, FeedbackSource, NewDelivery

# The deliveries table as the batch insert binds it: ``payload`` as text (the JSON received), not
# through the model's JSON type, which would encode the value again.
_DELIVERIES = sa.table(
    "deliveries",
    sa.column("id", sa.String),
    sa.column("event", sa.String),
    sa.column("action", sa.String),
    sa.column("payload", sa.Text),
    sa.column("received_at", UTCDateTime),
)


@functools.cache
def _insert_deliveries(dialect: str) -> sa.Insert:
    """``INSERT ... ON CONFLICT (id) DO NOTHING RETURNING id`` for ``dialect``, built once.

    PostgreSQL's driver binds text with a cast to ``text``, which a ``json`` column refuses, so there
    the payload is cast to ``json`` explicitly; SQLite takes the text as it is.
    """
    payload = sa.bindparam("d_payload", type_=sa.Text)
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(_DELIVERIES).values(
        id=sa.bindparam("d_id", type_=sa.String),
        event=sa.bindparam("d_event", type_=sa.String),
        action=sa.bindparam("d_action", type_=sa.String),
        payload=sa.cast(payload, postgresql.JSON) if dialect == "postgresql" else payload,
        received_at=sa.bindparam("d_received_at", type_=UTCDateTime),
    )
    return statement.on_conflict_do_nothing(index_elements=["id"]).returning(_DELIVERIES.c.id)


def _insert_sqlite(connection: Connection, deliveries: list[NewDelivery], now: datetime) -> set[str]:
    """SQLite: the ids already stored, then one ``executemany`` of the others through the driver.

    The writing transaction began with ``BEGIN IMMEDIATE`` (``migrate``), so no other writer can
    store one of these ids between the look-up and the insert. The driver's own loop, without
    SQLAlchemy's per-statement compilation, is what keeps the intake's writer off the GIL.
    """
    marks = ",".join("?" * len(deliveries))
    known = {
        row[0]
        for row in connection.exec_driver_sql(
            f"SELECT id FROM deliveries WHERE id IN ({marks})", tuple(d.id for d in deliveries)
        )
    }
    fresh = [d for d in deliveries if d.id not in known]
    if fresh:
        process = UTCDateTime().dialect_impl(connection.dialect).bind_processor(connection.dialect)
        stamp: object = process(now) if process is not None else now
        connection.exec_driver_sql(
            "INSERT INTO deliveries (id, event, action, payload, received_at) VALUES (?, ?, ?, ?, ?)",
            [(d.id, d.event, d.action, d.payload_json, stamp) for d in fresh],
        )
    return {d.id for d in fresh}


def insert_deliveries(connection: Connection, deliveries: Sequence[NewDelivery], now: datetime) -> list[bool]:
    """Insert each delivery unless its id is stored already (or earlier in ``deliveries``); per
    delivery, True when this call inserted it. All in one statement (or a few, for a long batch)."""
    first: dict[str, NewDelivery] = {}
    for delivery in deliveries:
        first.setdefault(delivery.id, delivery)
    if not first:
        return []
    # In id order: two batches inserting overlapping ids in different orders each wait on a row the
    # other inserted and did not commit yet, which PostgreSQL ends as a deadlock; one order for all
    # makes the later one simply wait.
    rows = [
        dict(d_id=d.id, d_event=d.event, d_action=d.action, d_payload=d.payload_json, d_received_at=now)
        for d in sorted(first.values(), key=lambda d: d.id)
    ]
    if connection.dialect.name == "sqlite":
        inserted = _insert_sqlite(connection, list(first.values()), now)
    else:
        statement = _insert_deliveries(connection.dialect.name)
        inserted = set(connection.execute(statement, rows).scalars())
    seen: set[str] = set()
    stored: list[bool] = []
    for delivery in deliveries:
        stored.append(delivery.id in inserted and delivery.id not in seen)
        seen.add(delivery.id)
    return stored


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

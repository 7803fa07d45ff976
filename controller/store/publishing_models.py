"""The tables of publishing and feedback: a run's pull requests, the webhook deliveries stored before
they are answered, and every version of a feedback item.

Split from ``models.py`` (which imports this module, so ``Base.metadata`` always holds these tables);
private to ``controller.store`` like the rest of the schema.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from pydantic import JsonValue
from sqlalchemy.orm import Mapped, mapped_column

from controller.store.columns import Base, UTCDateTime, in_check, optional_enum_member, run_fk
from controller.store.records import (
    DeliveryRecord,
    FeedbackRecord,
    FeedbackSource,
    FeedbackVerdict,
    ProcessState,
    PullRecord,
)


class PullRequestRow(Base):
    __tablename__ = "pull_requests"

    run_id: Mapped[str] = mapped_column(sa.String(64), run_fk(), primary_key=True)
    component: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    repo: Mapped[str] = mapped_column(sa.Text)
    number: Mapped[int] = mapped_column(sa.Integer)
    url: Mapped[str] = mapped_column(sa.Text)
    branch: Mapped[str] = mapped_column(sa.Text)
    head_sha: Mapped[str] = mapped_column(sa.String(64))
    pushed_sha: Mapped[str] = mapped_column(sa.String(64))
    base_sha: Mapped[str] = mapped_column(sa.String(64))
    draft: Mapped[bool] = mapped_column(sa.Boolean)
    state: Mapped[str] = mapped_column(sa.String(16))
    paused: Mapped[bool] = mapped_column(sa.Boolean)
    published_value: Mapped[float | None] = mapped_column(sa.Double)
    note: Mapped[str | None] = mapped_column(sa.Text)
    title: Mapped[str | None] = mapped_column(sa.Text)
    process: Mapped[dict[str, JsonValue] | None] = mapped_column(sa.JSON)
    status_sha: Mapped[str | None] = mapped_column(sa.String(64))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    def to_record(self) -> PullRecord:
        return PullRecord(
            run_id=self.run_id,
            component=self.component,
            repo=self.repo,
            number=self.number,
            url=self.url,
            branch=self.branch,
            head_sha=self.head_sha,
            pushed_sha=self.pushed_sha,
            base_sha=self.base_sha,
            draft=self.draft,
            state=self.state,
            paused=self.paused,
            published_value=self.published_value,
            note=self.note,
            title=self.title,
            process=ProcessState.from_json(self.process),
            status_sha=self.status_sha,
        )


class DeliveryRow(Base):
    """A webhook delivery, stored before it is answered and processed afterwards."""

    __tablename__ = "deliveries"
    __table_args__ = (sa.Index(None, "processed_at", "received_at"),)

    id: Mapped[str] = mapped_column(sa.String(100), primary_key=True)
    event: Mapped[str] = mapped_column(sa.String(64))
    action: Mapped[str | None] = mapped_column(sa.String(64))
    payload: Mapped[dict[str, JsonValue]] = mapped_column(sa.JSON)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)
    processed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    def to_record(self) -> DeliveryRecord:
        return DeliveryRecord(
            id=self.id,
            event=self.event,
            action=self.action,
            payload=dict(self.payload),
            received_at=self.received_at,
            processed_at=self.processed_at,
        )


class FeedbackRow(Base):
    """One version of a feedback item; the UNIQUE key makes webhook + poller sightings one row."""

    __tablename__ = "feedback"
    __table_args__ = (
        in_check("source", FeedbackSource),
        in_check("verdict", FeedbackVerdict),
        sa.UniqueConstraint("run_id", "source", "external_id", "action", "updated_at"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.String(64), run_fk())
    component: Mapped[str] = mapped_column(sa.String(200))
    pr_number: Mapped[int] = mapped_column(sa.Integer)
    source: Mapped[str] = mapped_column(sa.String(16))
    external_id: Mapped[int] = mapped_column(sa.BigInteger)
    review_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    author: Mapped[str] = mapped_column(sa.String(200))
    author_type: Mapped[str] = mapped_column(sa.String(32))
    association: Mapped[str] = mapped_column(sa.String(32))
    body: Mapped[str] = mapped_column(sa.Text)
    path: Mapped[str | None] = mapped_column(sa.Text)
    line: Mapped[int | None] = mapped_column(sa.Integer)
    action: Mapped[str] = mapped_column(sa.String(16))
    updated_at: Mapped[str] = mapped_column(sa.String(64))
    url: Mapped[str] = mapped_column(sa.Text)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)
    trusted: Mapped[bool | None] = mapped_column(sa.Boolean)
    verdict: Mapped[str | None] = mapped_column(sa.String(16))
    reason: Mapped[str | None] = mapped_column(sa.Text)
    round: Mapped[int | None] = mapped_column(sa.Integer)
    diff_hunk: Mapped[str | None] = mapped_column(sa.Text)  # inline comments (revision 0004)

    def to_record(self) -> FeedbackRecord:
        return FeedbackRecord(
            id=self.id,
            run_id=self.run_id,
            component=self.component,
            pr_number=self.pr_number,
            source=FeedbackSource(self.source),
            external_id=self.external_id,
            review_id=self.review_id,
            author=self.author,
            author_type=self.author_type,
            association=self.association,
            body=self.body,
            path=self.path,
            line=self.line,
            action=self.action,
            updated_at=self.updated_at,
            url=self.url,
            received_at=self.received_at,
            trusted=self.trusted,
            verdict=optional_enum_member(FeedbackVerdict, self.verdict),
            reason=self.reason,
            round=self.round,
            diff_hunk=self.diff_hunk,
        )

"""The database schema as SQLAlchemy models, private to ``controller.store``.

The CHECK constraints on state columns are built from the domain enums, so the schema and the
transition tables cannot drift apart silently: a new enum value without a migration makes the
schema-drift test fail (see ``migrate.schema_drift``). Rows never leave the store; each model
converts itself into the frozen record of ``records.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

import sqlalchemy as sa
from pydantic import JsonValue
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from controller.domain.enums import (
    Direction,
    EventKind,
    Outcome,
    Reason,
    RunPhase,
    RunStatus,
    SampleArm,
    SequentialStop,
    StopReason,
    TurnPhase,
)
from controller.store.records import (
    ComponentRecord,
    DeliveryRecord,
    EventRecord,
    FeedbackRecord,
    FeedbackSource,
    FeedbackVerdict,
    HypothesisRecord,
    ProcessState,
    PullRecord,
    RunRecord,
    SampleRecord,
    TurnRecord,
    WorkerRoundRecord,
)

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend (SQLite stores naive text, PostgreSQL timestamptz)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the store only takes timezone-aware times")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


def as_utc(value: datetime) -> datetime:
    """A stored timestamp as an aware UTC datetime (SQLite gives naive text, PostgreSQL its session zone)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def in_check(column: str, enum: type[StrEnum]) -> sa.CheckConstraint:
    """CHECK ``column IN ('a', 'b', ...)`` from an enum, so the values cannot drift from it.

    A NULL passes a CHECK (its IN is unknown, not false), so nullable columns need no extra clause.
    """
    values = ", ".join(f"'{member.value}'" for member in enum)
    return sa.CheckConstraint(f"{column} IN ({values})", name=column)


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


_E = TypeVar("_E", bound=StrEnum)


@functools.cache
def _members(enum: type[_E]) -> dict[str, _E]:
    return {member.value: member for member in enum}


def _enum(enum: type[_E], value: str) -> _E:
    """``enum(value)`` at a dictionary lookup's cost (rows are converted by the thousand on the API's
    pages; ``Enum.__call__`` was a tenth of a page's CPU). An unknown value still raises ValueError."""
    member = _members(enum).get(value)
    return member if member is not None else enum(value)


def _opt_enum(enum: type[_E], value: str | None) -> _E | None:
    return None if value is None else _enum(enum, value)


class RunRow(Base):
    __tablename__ = "runs"
    __table_args__ = (
        in_check("status", RunStatus),
        in_check("stop_reason", StopReason),
        in_check("direction", Direction),
        in_check("phase", RunPhase),
        sa.Index(None, "created_at"),
        sa.Index(None, "status", "lease_expires_at"),
    )

    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    spec_text: Mapped[str] = mapped_column(sa.Text)
    spec_fingerprint: Mapped[str] = mapped_column(sa.String(128))
    spec_path: Mapped[str | None] = mapped_column(sa.Text)
    objective: Mapped[str] = mapped_column(sa.Text)
    metric_name: Mapped[str] = mapped_column(sa.String(200))
    direction: Mapped[str] = mapped_column(sa.String(16))
    turns_planned: Mapped[int] = mapped_column(sa.Integer)
    options: Mapped[dict[str, JsonValue]] = mapped_column(sa.JSON)
    status: Mapped[str] = mapped_column(sa.String(16))
    stop_reason: Mapped[str | None] = mapped_column(sa.String(32))
    stop_message: Mapped[str | None] = mapped_column(sa.Text)
    baseline_value: Mapped[float | None] = mapped_column(sa.Double)
    champion_value: Mapped[float | None] = mapped_column(sa.Double)
    champion_turn: Mapped[int | None] = mapped_column(sa.Integer)
    cost_usd: Mapped[float] = mapped_column(sa.Double)
    tokens: Mapped[int] = mapped_column(sa.BigInteger)
    round: Mapped[int] = mapped_column(sa.Integer)
    phase: Mapped[str] = mapped_column(sa.String(16), server_default=sa.text("'search'"))
    lease_owner: Mapped[str | None] = mapped_column(sa.String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cancel_requested: Mapped[bool] = mapped_column(sa.Boolean, server_default=sa.false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    def to_record(self) -> RunRecord:
        return run_record(self)


def run_record(row: Any) -> RunRecord:
    """The record of a ``runs`` row: an ORM instance or a Core row of the table's columns."""
    return RunRecord(
        id=row.id,
        spec_text=row.spec_text,
        spec_fingerprint=row.spec_fingerprint,
        spec_path=row.spec_path,
        objective=row.objective,
        metric_name=row.metric_name,
        direction=row.direction,
        turns_planned=row.turns_planned,
        options=dict(row.options),
        status=_enum(RunStatus, row.status),
        stop_reason=_opt_enum(StopReason, row.stop_reason),
        stop_message=row.stop_message,
        baseline_value=row.baseline_value,
        champion_value=row.champion_value,
        champion_turn=row.champion_turn,
        cost_usd=row.cost_usd,
        tokens=row.tokens,
        round=row.round,
        phase=_enum(RunPhase, row.phase),
        lease_owner=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        cancel_requested=row.cancel_requested,
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
    )


def _run_fk() -> sa.ForeignKey:
    return sa.ForeignKey("runs.id", ondelete="CASCADE")


class ComponentRow(Base):
    __tablename__ = "components"
    __table_args__ = (sa.UniqueConstraint("run_id", "position"),)

    run_id: Mapped[str] = mapped_column(sa.String(64), _run_fk(), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    position: Mapped[int] = mapped_column(sa.Integer)
    repo: Mapped[str] = mapped_column(sa.Text)
    base_ref: Mapped[str] = mapped_column(sa.Text)
    base_sha: Mapped[str] = mapped_column(sa.String(64))
    head_sha: Mapped[str] = mapped_column(sa.String(64))
    user_head: Mapped[str | None] = mapped_column(sa.String(64))
    user_state: Mapped[str | None] = mapped_column(sa.Text)
    upstream: Mapped[str | None] = mapped_column(sa.Text)
    extra: Mapped[dict[str, JsonValue]] = mapped_column(sa.JSON)

    def to_record(self) -> ComponentRecord:
        return ComponentRecord(
            run_id=self.run_id,
            name=self.name,
            repo=self.repo,
            base_ref=self.base_ref,
            base_sha=self.base_sha,
            head_sha=self.head_sha,
            user_head=self.user_head,
            user_state=self.user_state,
            upstream=self.upstream,
            extra=dict(self.extra),
        )


_PHASE_COHERENT = (
    "(phase = 'started' AND outcome IS NULL AND reason IS NULL AND decided_at IS NULL)"
    " OR (phase = 'decided' AND outcome IS NOT NULL AND reason IS NOT NULL AND decided_at IS NOT NULL)"
)


class TurnRow(Base):
    __tablename__ = "turns"
    __table_args__ = (
        in_check("phase", TurnPhase),
        in_check("outcome", Outcome),
        in_check("reason", Reason),
        in_check("sequential_stop", SequentialStop),
        sa.CheckConstraint(_PHASE_COHERENT, name="decision_iff_decided"),
    )

    run_id: Mapped[str] = mapped_column(sa.String(64), _run_fk(), primary_key=True)
    number: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    round: Mapped[int] = mapped_column(sa.Integer)
    phase: Mapped[str] = mapped_column(sa.String(16), server_default=sa.text("'search'"))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    outcome: Mapped[str | None] = mapped_column(sa.String(16))
    reason: Mapped[str | None] = mapped_column(sa.String(32))
    value: Mapped[float | None] = mapped_column(sa.Double)
    p_value: Mapped[float | None] = mapped_column(sa.Double)
    hypothesis: Mapped[str | None] = mapped_column(sa.Text)
    changed_paths: Mapped[list[str]] = mapped_column(sa.JSON)
    commits: Mapped[dict[str, str]] = mapped_column(sa.JSON)
    cost_usd: Mapped[float] = mapped_column(sa.Double)
    tokens: Mapped[int] = mapped_column(sa.BigInteger)
    duration_s: Mapped[float] = mapped_column(sa.Double)
    detail: Mapped[str] = mapped_column(sa.Text)
    pairs: Mapped[int | None] = mapped_column(sa.Integer)
    sequential_stop: Mapped[str | None] = mapped_column(sa.String(16))

    def to_record(self) -> TurnRecord:
        return turn_record(self)


def turn_record(row: Any) -> TurnRecord:
    """The record of a ``turns`` row: an ORM instance or a Core row of the table's columns."""
    return TurnRecord(
        run_id=row.run_id,
        number=row.number,
        round=row.round,
        phase=_enum(TurnPhase, row.phase),
        started_at=row.started_at,
        decided_at=row.decided_at,
        outcome=_opt_enum(Outcome, row.outcome),
        reason=_opt_enum(Reason, row.reason),
        value=row.value,
        p_value=row.p_value,
        hypothesis=row.hypothesis,
        changed_paths=tuple(row.changed_paths),
        commits=dict(row.commits),
        cost_usd=row.cost_usd,
        tokens=row.tokens,
        duration_s=row.duration_s,
        detail=row.detail,
        pairs=row.pairs,
        sequential_stop=_opt_enum(SequentialStop, row.sequential_stop),
    )


class SampleRow(Base):
    __tablename__ = "samples"
    __table_args__ = (
        in_check("arm", SampleArm),
        sa.UniqueConstraint("run_id", "turn", "arm", "sample_index"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.String(64), _run_fk())
    turn: Mapped[int] = mapped_column(sa.Integer)
    arm: Mapped[str] = mapped_column(sa.String(16))
    sample_index: Mapped[int] = mapped_column(sa.Integer)
    values: Mapped[dict[str, float]] = mapped_column(sa.JSON)
    valid: Mapped[bool] = mapped_column(sa.Boolean)

    def to_record(self) -> SampleRecord:
        return sample_record(self)


def sample_record(row: Any) -> SampleRecord:
    """The record of a ``samples`` row: an ORM instance or a Core row of the table's columns."""
    return SampleRecord(
        run_id=row.run_id,
        turn=row.turn,
        arm=_enum(SampleArm, row.arm),
        index=row.sample_index,
        values=dict(row.values),
        valid=row.valid,
    )


class HypothesisRow(Base):
    """One parallel hypothesis of a turn (ADR-0016); the turn row holds the turn's decision."""

    __tablename__ = "hypotheses"
    __table_args__ = (
        in_check("phase", TurnPhase),
        in_check("outcome", Outcome),
        in_check("reason", Reason),
        sa.ForeignKeyConstraint(["run_id", "turn"], ["turns.run_id", "turns.number"], ondelete="CASCADE"),
    )

    run_id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    turn: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    idx: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    phase: Mapped[str] = mapped_column(sa.String(16))
    outcome: Mapped[str] = mapped_column(sa.String(16))
    reason: Mapped[str] = mapped_column(sa.String(32))
    value: Mapped[float | None] = mapped_column(sa.Double)
    reference_value: Mapped[float | None] = mapped_column(sa.Double)
    delta: Mapped[float | None] = mapped_column(sa.Double)
    p_value: Mapped[float | None] = mapped_column(sa.Double)
    hypothesis: Mapped[str | None] = mapped_column(sa.Text)
    proposal: Mapped[dict[str, JsonValue] | None] = mapped_column(sa.JSON)
    changed_paths: Mapped[list[str]] = mapped_column(sa.JSON)
    commits: Mapped[dict[str, str]] = mapped_column(sa.JSON)
    samples: Mapped[list[Any]] = mapped_column(sa.JSON)
    cost_usd: Mapped[float] = mapped_column(sa.Double)
    tokens: Mapped[int] = mapped_column(sa.BigInteger)
    duration_s: Mapped[float] = mapped_column(sa.Double)
    detail: Mapped[str] = mapped_column(sa.Text)
    reported_at: Mapped[datetime] = mapped_column(UTCDateTime)

    def to_record(self) -> HypothesisRecord:
        return hypothesis_record(self)


def hypothesis_record(row: Any) -> HypothesisRecord:
    """The record of a ``hypotheses`` row: an ORM instance or a Core row of the table's columns."""
    return HypothesisRecord(
        run_id=row.run_id,
        turn=row.turn,
        index=row.idx,
        phase=TurnPhase(row.phase),
        outcome=Outcome(row.outcome),
        reason=Reason(row.reason),
        value=row.value,
        reference_value=row.reference_value,
        delta=row.delta,
        p_value=row.p_value,
        hypothesis=row.hypothesis,
        proposal=None if row.proposal is None else dict(row.proposal),
        changed_paths=tuple(row.changed_paths),
        commits=dict(row.commits),
        samples=tuple(
            (SampleArm(arm), int(index), dict(values), bool(valid))
            for arm, index, values, valid in row.samples
        ),
        cost_usd=row.cost_usd,
        tokens=row.tokens,
        duration_s=row.duration_s,
        detail=row.detail,
    )


class EventRow(Base):
    __tablename__ = "events"
    # AUTOINCREMENT on SQLite: ids are never reused, so Last-Event-ID resumption stays sound.
    __table_args__ = (sa.Index(None, "run_id", "id"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.String(64), _run_fk())
    kind: Mapped[str] = mapped_column(sa.String(32))
    payload: Mapped[dict[str, JsonValue]] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)

    def to_record(self) -> EventRecord:
        return EventRecord(
            id=self.id,
            run_id=self.run_id,
            kind=EventKind(self.kind),
            payload=dict(self.payload),
            created_at=self.created_at,
        )


class ProcessGroupRow(Base):
    __tablename__ = "process_groups"

    run_id: Mapped[str] = mapped_column(sa.String(64), _run_fk(), primary_key=True)
    pgid: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    command: Mapped[str] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WorkerRoundRow(Base):
    """One attempt of a round executed by ``crucible worker`` (ADR-0014): its token (hashed), the job
    it was minted for, the heads its bundles proved, and the outcome it reported."""

    __tablename__ = "worker_rounds"
    __table_args__ = (sa.UniqueConstraint("run_id", "round", "attempt"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.String(64), _run_fk())
    round: Mapped[int] = mapped_column(sa.Integer)
    attempt: Mapped[int] = mapped_column(sa.Integer)
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    job: Mapped[dict[str, JsonValue]] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heads: Mapped[dict[str, list[str]]] = mapped_column(sa.JSON)
    outcome: Mapped[dict[str, JsonValue] | None] = mapped_column(sa.JSON)

    def to_record(self) -> WorkerRoundRecord:
        return WorkerRoundRecord(
            run_id=self.run_id,
            round=self.round,
            attempt=self.attempt,
            token_hash=self.token_hash,
            job=dict(self.job),
            created_at=self.created_at,
            expires_at=self.expires_at,
            revoked_at=self.revoked_at,
            heads={name: tuple(shas) for name, shas in self.heads.items()},
            outcome=dict(self.outcome) if self.outcome is not None else None,
        )


class PullRequestRow(Base):
    __tablename__ = "pull_requests"

    run_id: Mapped[str] = mapped_column(sa.String(64), _run_fk(), primary_key=True)
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
    run_id: Mapped[str] = mapped_column(sa.String(64), _run_fk())
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
            verdict=_opt_enum(FeedbackVerdict, self.verdict),
            reason=self.reason,
            round=self.round,
            diff_hunk=self.diff_hunk,
        )


def check_constraints() -> Iterable[tuple[str, str, str]]:
    """(table, full constraint name, CHECK text) for every CHECK in the models (for the drift check)."""
    for table in Base.metadata.sorted_tables:
        for constraint in table.constraints:
            if isinstance(constraint, sa.CheckConstraint):
                yield table.name, str(constraint.name), str(constraint.sqltext)

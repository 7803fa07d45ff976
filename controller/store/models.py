"""The database schema as SQLAlchemy models, private to ``controller.store``.

The CHECK constraints on state columns are built from the domain enums, so the schema and the
transition tables cannot drift apart silently: a new enum value without a migration makes the
schema-drift test fail (see ``migrate.schema_drift``). Rows never leave the store; each model
converts itself into the frozen record of ``records.py``. The tables of publishing and feedback are
in ``publishing_models.py`` and the shared column types in ``columns.py``; both are re-exported here,
so ``models`` is still the one name to import the schema by.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pydantic import JsonValue
from sqlalchemy.orm import Mapped, mapped_column

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
from controller.store.columns import (
    Base,
    UTCDateTime,
    as_utc,
    enum_member,
    in_check,
    optional_enum_member,
    run_fk,
)
from controller.store.publishing_models import DeliveryRow, FeedbackRow, PullRequestRow
from controller.store.records import (
    ComponentRecord,
    EventRecord,
    HypothesisRecord,
    RunRecord,
    SampleRecord,
    TurnRecord,
    WorkerRoundRecord,
)


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
        status=enum_member(RunStatus, row.status),
        stop_reason=optional_enum_member(StopReason, row.stop_reason),
        stop_message=row.stop_message,
        baseline_value=row.baseline_value,
        champion_value=row.champion_value,
        champion_turn=row.champion_turn,
        cost_usd=row.cost_usd,
        tokens=row.tokens,
        round=row.round,
        phase=enum_member(RunPhase, row.phase),
        lease_owner=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        cancel_requested=row.cancel_requested,
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
    )


class ComponentRow(Base):
    __tablename__ = "components"
    __table_args__ = (sa.UniqueConstraint("run_id", "position"),)

    run_id: Mapped[str] = mapped_column(sa.String(64), run_fk(), primary_key=True)
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

    run_id: Mapped[str] = mapped_column(sa.String(64), run_fk(), primary_key=True)
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
        phase=enum_member(TurnPhase, row.phase),
        started_at=row.started_at,
        decided_at=row.decided_at,
        outcome=optional_enum_member(Outcome, row.outcome),
        reason=optional_enum_member(Reason, row.reason),
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
        sequential_stop=optional_enum_member(SequentialStop, row.sequential_stop),
    )


class SampleRow(Base):
    __tablename__ = "samples"
    __table_args__ = (
        in_check("arm", SampleArm),
        sa.UniqueConstraint("run_id", "turn", "arm", "sample_index"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.String(64), run_fk())
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
        arm=enum_member(SampleArm, row.arm),
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
    run_id: Mapped[str] = mapped_column(sa.String(64), run_fk())
    kind: Mapped[str] = mapped_column(sa.String(32))
    payload: Mapped[dict[str, JsonValue]] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)

    def to_record(self) -> EventRecord:
        """The record; a payload that is not a JSON object (a hand-edited database, an older release)
        becomes an empty one, which its kind's readers then treat as malformed (``domain.events``).
        Rows of a kind this release does not know are never read (``KNOWN_EVENT_KINDS``)."""
        payload = self.payload
        return EventRecord(
            id=self.id,
            run_id=self.run_id,
            kind=EventKind(self.kind),
            payload=dict(payload) if isinstance(payload, dict) else {},
            created_at=self.created_at,
        )


# What the readers select events by: a row of another kind (written by a newer release, a replica
# upgraded before this one, or by hand) is left out instead of failing every read of its run.
KNOWN_EVENT_KINDS = tuple(kind.value for kind in EventKind)


class ProcessGroupRow(Base):
    __tablename__ = "process_groups"

    run_id: Mapped[str] = mapped_column(sa.String(64), run_fk(), primary_key=True)
    pgid: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    command: Mapped[str] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class RevokedSessionRow(Base):
    """A dashboard session ended by a logout (``store.revoked_sessions``): its nonce's sha256, kept
    until its cookie would have expired anyway."""

    __tablename__ = "revoked_sessions"
    __table_args__ = (sa.Index(None, "expires_at"),)

    nonce_hash: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WorkerRoundRow(Base):
    """One attempt of a round executed by ``crucible worker`` (ADR-0014): its token (hashed), the job
    it was minted for, the heads its bundles proved, and the outcome it reported."""

    __tablename__ = "worker_rounds"
    __table_args__ = (sa.UniqueConstraint("run_id", "round", "attempt"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.String(64), run_fk())
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


def check_constraints() -> Iterable[tuple[str, str, str]]:
    """(table, full constraint name, CHECK text) for every CHECK in the models (for the drift check)."""
    for table in Base.metadata.sorted_tables:
        for constraint in table.constraints:
            if isinstance(constraint, sa.CheckConstraint):
                yield table.name, str(constraint.name), str(constraint.sqltext)


__all__ = [
    "KNOWN_EVENT_KINDS",
    "Base",
    "ComponentRow",
    "DeliveryRow",
    "EventRow",
    "FeedbackRow",
    "HypothesisRow",
    "ProcessGroupRow",
    "PullRequestRow",
    "RunRow",
    "SampleRow",
    "TurnRow",
    "UTCDateTime",
    "WorkerRoundRow",
    "as_utc",
    "check_constraints",
    "hypothesis_record",
    "run_record",
    "sample_record",
    "turn_record",
]

"""Parallel hypotheses: one row per hypothesis of a turn, and the reason ``superseded``.

Revision ID: 0012
Revises: 0009
Create Date: 2026-12-03

With ``broker.parallel = N`` a turn tries N hypotheses and keeps at most one (ADR-0016). The turn row
keeps the turn's decision; each hypothesis gets its own row (its verdict, samples and commit), written
when it is reported and finalised when the turn is decided. ``superseded`` (it passed, another one
improved more) joins the reasons of both tables. Widening a CHECK needs a table rebuild on SQLite
(batch mode); PostgreSQL alters in place. A downgrade first maps ``superseded`` turns to
``not_significant`` (none exist: a turn row never carries it, only hypothesis rows do).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_REASONS = (
    "improved",
    "not_improved",
    "not_significant",
    "guard_regressed",
    "validation_failed",
    "policy_violation",
    "evaluator_mutated",
    "metric_invalid",
    "agent_failed",
    "timeout",
    "cancelled",
    "no_diff",
)
_REASONS = (*_OLD_REASONS, "superseded")
_OUTCOMES = ("accepted", "rejected", "failed", "no_change")
_PHASES = ("started", "decided")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.drop_constraint(op.f("ck_turns_reason"), type_="check")
        batch.create_check_constraint(op.f("ck_turns_reason"), _in("reason", _REASONS))
    op.create_table(
        "hypotheses",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("reference_value", sa.Double(), nullable=True),
        sa.Column("delta", sa.Double(), nullable=True),
        sa.Column("p_value", sa.Double(), nullable=True),
        sa.Column("hypothesis", sa.Text(), nullable=True),
        sa.Column("proposal", sa.JSON(), nullable=True),
        sa.Column("changed_paths", sa.JSON(), nullable=False),
        sa.Column("commits", sa.JSON(), nullable=False),
        sa.Column("samples", sa.JSON(), nullable=False),
        sa.Column("cost_usd", sa.Double(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("duration_s", sa.Double(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "turn", "idx", name=op.f("pk_hypotheses")),
        sa.ForeignKeyConstraint(
            ["run_id", "turn"],
            ["turns.run_id", "turns.number"],
            name=op.f("fk_hypotheses_run_id_turns"),
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(_in("phase", _PHASES), name=op.f("ck_hypotheses_phase")),
        sa.CheckConstraint(_in("outcome", _OUTCOMES), name=op.f("ck_hypotheses_outcome")),
        sa.CheckConstraint(_in("reason", _REASONS), name=op.f("ck_hypotheses_reason")),
    )


def downgrade() -> None:
    op.drop_table("hypotheses")
    op.execute("UPDATE turns SET reason = 'not_significant' WHERE reason = 'superseded'")
    with op.batch_alter_table("turns") as batch:
        batch.drop_constraint(op.f("ck_turns_reason"), type_="check")
        batch.create_check_constraint(op.f("ck_turns_reason"), _in("reason", _OLD_REASONS))

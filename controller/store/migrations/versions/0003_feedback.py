"""Feedback intake: webhook deliveries (stored before they are answered) and feedback items.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-09

The CHECK constraints list the enum values literally (a migration is a snapshot); the drift test
compares them with ``records.FeedbackSource`` and ``records.FeedbackVerdict``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FEEDBACK_SOURCES = ("review", "review_comment", "issue_comment")
FEEDBACK_VERDICTS = ("accepted", "rejected")


def _in(table: str, column: str, values: Sequence[str]) -> sa.CheckConstraint:
    allowed = ", ".join(f"'{value}'" for value in values)
    return sa.CheckConstraint(f"{column} IN ({allowed})", name=op.f(f"ck_{table}_{column}"))


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(100), nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
    )
    op.create_index(
        op.f("ix_deliveries_processed_at_received_at"), "deliveries", ["processed_at", "received_at"]
    )
    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("component", sa.String(200), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("external_id", sa.BigInteger(), nullable=False),
        sa.Column("review_id", sa.BigInteger(), nullable=True),
        sa.Column("author", sa.String(200), nullable=False),
        sa.Column("author_type", sa.String(32), nullable=False),
        sa.Column("association", sa.String(32), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("updated_at", sa.String(64), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trusted", sa.Boolean(), nullable=True),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("round", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feedback")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_feedback_run_id_runs"), ondelete="CASCADE"
        ),
        sa.UniqueConstraint(
            "run_id",
            "source",
            "external_id",
            "action",
            "updated_at",
            name=op.f("uq_feedback_run_id_source_external_id_action_updated_at"),
        ),
        _in("feedback", "source", FEEDBACK_SOURCES),
        _in("feedback", "verdict", FEEDBACK_VERDICTS),
    )


def downgrade() -> None:
    op.drop_table("feedback")
    op.drop_index(op.f("ix_deliveries_processed_at_received_at"), table_name="deliveries")
    op.drop_table("deliveries")

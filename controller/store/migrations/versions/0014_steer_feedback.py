"""Feedback: an operator's steer (``POST /api/runs/{id}/rounds``) is a feedback source of its own.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03

A steer is stored as a feedback item so that the run's watch starts its round through the same
path as review feedback, whichever replica received the request (ADR-0012). Only the CHECK on
``feedback.source`` changes; SQLite cannot alter a constraint, so batch mode rebuilds the table
there, PostgreSQL alters it in place. Downgrading deletes the steer items (the old CHECK would
refuse them).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEFORE = "'review', 'review_comment', 'issue_comment'"
_AFTER = _BEFORE + ", 'steer'"


def _recheck(values: str) -> None:
    with op.batch_alter_table("feedback") as batch:
        batch.drop_constraint(op.f("ck_feedback_source"), type_="check")
        batch.create_check_constraint(op.f("ck_feedback_source"), f"source IN ({values})")


def upgrade() -> None:
    _recheck(_AFTER)


def downgrade() -> None:
    op.execute("DELETE FROM feedback WHERE source = 'steer'")
    _recheck(_BEFORE)

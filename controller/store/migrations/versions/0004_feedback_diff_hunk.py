"""Feedback: the diff hunk an inline review comment refers to, quoted in the round's steer.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-16

Nullable: reviews and conversation comments have no hunk, and rows stored before this revision keep
None (the steer then falls back to numbered lines of the file). Adding a nullable column is a plain
``ALTER TABLE ... ADD COLUMN`` on both SQLite and PostgreSQL, so no table is rebuilt.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("feedback", sa.Column("diff_hunk", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("feedback", "diff_hunk")

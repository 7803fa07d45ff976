"""Pull requests: the value crucible measured for the head it published, and why the PR lags the run.

Revision ID: 0008
Revises: 0005
Create Date: 2026-12-03

A person who pushes to a PR branch makes crucible build on their commit (ADR-0002 §5); whatever the
PR then shows may differ from the run's best (a conflict, a pause, a head nobody measured). Both
columns are nullable: rows stored earlier keep None, which reads as "no value known, nothing to say".
Adding nullable columns is a plain ``ALTER TABLE ... ADD COLUMN`` on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("pull_requests", sa.Column("published_value", sa.Double(), nullable=True))
    op.add_column("pull_requests", sa.Column("note", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("pull_requests", "note")
    op.drop_column("pull_requests", "published_value")

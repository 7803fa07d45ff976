"""Pull requests: the team process applied to them, the title crucible set, the head its result is on.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

``[publish]`` adds labels, reviewers and assignees to each PR once, and a commit status or check run
for each pushed head. Remembering what was done keeps it once: ``process`` holds the names handled
(applied or refused by the forge, with the refusals' sentences), ``title`` the title crucible last
set (a different one on the forge means a person edited it and crucible leaves it), ``status_sha``
the head whose measurement is on the PR. All nullable: rows stored earlier read as "nothing done
yet", so a resumed run applies what its spec asks. Plain ``ADD COLUMN`` on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("pull_requests", sa.Column("title", sa.Text(), nullable=True))
    op.add_column("pull_requests", sa.Column("process", sa.JSON(), nullable=True))
    op.add_column("pull_requests", sa.Column("status_sha", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("pull_requests", "status_sha")
    op.drop_column("pull_requests", "process")
    op.drop_column("pull_requests", "title")

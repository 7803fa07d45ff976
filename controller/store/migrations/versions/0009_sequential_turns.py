"""Turns: how many interleaved pairs a sequential measurement used and why it stopped.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03

Both columns are nullable: turns decided before this revision, turns of the fixed-sample rule and turns
that never reached measurement have none. The CHECK on ``sequential_stop`` needs a table rebuild on
SQLite (it cannot add a constraint to an existing table), which batch mode does; PostgreSQL alters in
place.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STOPS = "'kept early', 'rejected early', 'futility', 'max samples'"


def upgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.add_column(sa.Column("pairs", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("sequential_stop", sa.String(16), nullable=True))
        batch.create_check_constraint(op.f("ck_turns_sequential_stop"), f"sequential_stop IN ({_STOPS})")


def downgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.drop_constraint(op.f("ck_turns_sequential_stop"), type_="check")
        batch.drop_column("sequential_stop")
        batch.drop_column("pairs")

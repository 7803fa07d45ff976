"""Worker rounds: the per-round tokens of ``crucible worker`` and what each attempt reported (ADR-0014).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03

One row per attempt of a remote round. The token is stored only as its sha256 (``token_hash``,
unique: the lookup key); ``job`` is the ``RoundJob`` the worker fetches, ``heads`` the commits its
verified bundles brought in, ``outcome`` what it reported at its end. A new table on both backends.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "worker_rounds",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("job", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heads", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_worker_rounds_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_rounds")),
        sa.UniqueConstraint("run_id", "round", "attempt", name=op.f("uq_worker_rounds_run_id_round_attempt")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_worker_rounds_token_hash")),
    )


def downgrade() -> None:
    op.drop_table("worker_rounds")

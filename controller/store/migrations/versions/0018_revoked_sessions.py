"""Dashboard sessions ended by a logout, shared by every replica on the database.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05

A dashboard session is a signed cookie (``api.dashboard.session``); logging out ends it on the server
too, so a copy of the cookie stops working. That list was kept per ``crucible serve`` process, so a
replica that did not see the logout honoured the cookie until it expired (up to 12 h). Here it is a
table: the sha256 of each ended session's nonce (the nonce itself never reaches the database) and when
its cookie would expire anyway, after which the row is dropped. A new table: nothing to carry over.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "revoked_sessions",
        sa.Column("nonce_hash", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("nonce_hash", name=op.f("pk_revoked_sessions")),
    )
    op.create_index(op.f("ix_revoked_sessions_expires_at"), "revoked_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_revoked_sessions_expires_at"), table_name="revoked_sessions")
    op.drop_table("revoked_sessions")

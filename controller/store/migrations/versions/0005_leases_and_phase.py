"""Runs: a lease instead of a process id, a cancel flag, and a persisted phase (ADR-0004).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03

``lease_owner``/``lease_expires_at`` name the process driving the run and until when its heartbeat
vouches for it; ``cancel_requested`` is the flag ``crucible cancel`` sets for that process (from any
host); ``phase`` is where the run is in its life (search, watching, round, finished), checked
against ``RunPhase``. ``controller_pid`` goes: a pid means nothing on another host.

Every step is a plain ``ALTER TABLE`` on both backends. SQLite must not rebuild ``runs`` here:
migrations run in one transaction with foreign keys on, and dropping the old table would cascade
into every table that references it. So SQLite gets the columns with their CHECK in ``ADD COLUMN``
and drops ``controller_pid`` with its native ``DROP COLUMN`` (SQLite 3.35+).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PHASES = ("search", "watching", "round", "finished")
PHASE_CHECK = "phase IN (" + ", ".join(f"'{p}'" for p in PHASES) + ")"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        op.execute(
            "ALTER TABLE runs ADD COLUMN phase VARCHAR(16) DEFAULT 'search' NOT NULL "
            f"CONSTRAINT ck_runs_phase CHECK ({PHASE_CHECK})"
        )
    else:
        op.add_column(
            "runs", sa.Column("phase", sa.String(16), nullable=False, server_default=sa.text("'search'"))
        )
        op.create_check_constraint(op.f("ck_runs_phase"), "runs", PHASE_CHECK)
    op.add_column("runs", sa.Column("lease_owner", sa.String(200), nullable=True))
    op.add_column("runs", sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "runs", sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    # Runs stored before this revision: finished ones are finished; one that had rounds was watching.
    op.execute(
        "UPDATE runs SET phase = CASE WHEN status IN ('completed', 'failed') THEN 'finished' "
        "WHEN round > 0 THEN 'watching' ELSE 'search' END"
    )
    op.create_index(op.f("ix_runs_status_lease_expires_at"), "runs", ["status", "lease_expires_at"])
    if bind.dialect.name == "sqlite":
        op.execute("ALTER TABLE runs DROP COLUMN controller_pid")
    else:
        op.drop_column("runs", "controller_pid")


def downgrade() -> None:
    op.add_column("runs", sa.Column("controller_pid", sa.Integer(), nullable=True))
    op.drop_index(op.f("ix_runs_status_lease_expires_at"), "runs")
    op.drop_column("runs", "cancel_requested")
    op.drop_column("runs", "lease_expires_at")
    op.drop_column("runs", "lease_owner")
    if op.get_bind().dialect.name != "sqlite":
        op.drop_constraint(op.f("ck_runs_phase"), "runs", type_="check")
    op.drop_column("runs", "phase")

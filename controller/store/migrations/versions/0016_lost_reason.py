"""Turns and hypotheses: the reason ``lost`` (the infrastructure lost the turn's pod).

Revision ID: 0016
Revises: 0014
Create Date: 2026-12-03

A remote round whose pod is evicted, OOM-killed, deleted or lost with its node leaves the turn its
worker had started open; the run service decides it ``failed`` and relaunches the round's remaining
turns (ADR-0019). Until now such a turn was ``cancelled`` with the broker's named reason in its
detail, which read like a person's cancel. ``lost`` joins the reasons of both tables. SQLite cannot
alter a constraint, so batch mode rebuilds the tables there; PostgreSQL alters in place. A
downgrade maps ``lost`` back to ``cancelled`` (the detail still names why).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEFORE = (
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
    "superseded",
)
_AFTER = (*_BEFORE, "lost")
_TABLES = ("turns", "hypotheses")


def _recheck(values: Sequence[str]) -> None:
    check = f"reason IN ({', '.join(repr(v) for v in values)})"
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(op.f(f"ck_{table}_reason"), type_="check")
            batch.create_check_constraint(op.f(f"ck_{table}_reason"), check)


def upgrade() -> None:
    _recheck(_AFTER)


def downgrade() -> None:
    for table in _TABLES:
        op.execute(f"UPDATE {table} SET reason = 'cancelled' WHERE reason = 'lost'")
    _recheck(_BEFORE)

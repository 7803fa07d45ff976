"""Turns and hypotheses: the reason ``unconfirmed`` (a claimed keep its confirmation did not reproduce).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05

A remote round's keep counts only once the controller's own measurement of it (a confirmation,
ADR-0043) reproduces it; when it does not, the worker settles the turn as ``rejected`` with reason
``unconfirmed`` and the detail names what the confirmation measured. ``unconfirmed`` joins the
reasons of both tables (as ``lost`` did in 0016: batch mode rebuilds the tables on SQLite). A
downgrade maps it to ``policy_violation``, the nearest older reason (the detail still says why).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
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
    "lost",
)
_AFTER = (*_BEFORE, "unconfirmed")
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
        op.execute(f"UPDATE {table} SET reason = 'policy_violation' WHERE reason = 'unconfirmed'")
    _recheck(_BEFORE)

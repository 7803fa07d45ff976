"""Initial schema: runs, components, turns, samples, events, process groups.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

The CHECK constraints list the enum values literally: a migration is a snapshot of the schema at
one point in history. ``migrate.schema_drift`` fails the tests when the models (built from the
domain enums) and the migrated schema disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN_STATUSES = ("pending", "running", "completed", "failed", "cancelled")
STOP_REASONS = (
    "max_turns",
    "wall_clock",
    "cost",
    "tokens",
    "disk",
    "exhausted",
    "target_reached",
    "feedback_closed",
    "max_rounds",
    "consecutive_failures",
    "baseline_failed",
    "cancelled",
    "error",
)
DIRECTIONS = ("minimize", "maximize")
TURN_PHASES = ("started", "decided")
OUTCOMES = ("accepted", "rejected", "failed", "no_change")
REASONS = (
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
)
SAMPLE_ARMS = ("champion", "candidate", "base", "baseline")


def _in(table: str, column: str, values: Sequence[str]) -> sa.CheckConstraint:
    allowed = ", ".join(f"'{value}'" for value in values)
    return sa.CheckConstraint(f"{column} IN ({allowed})", name=op.f(f"ck_{table}_{column}"))


def _run_id(*, primary_key: bool = False) -> sa.Column[str]:
    return sa.Column("run_id", sa.String(64), nullable=False, primary_key=primary_key)


def _run_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["run_id"], ["runs.id"], name=op.f(f"fk_{table}_run_id_runs"), ondelete="CASCADE"
    )


def _utc(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("spec_text", sa.Text(), nullable=False),
        sa.Column("spec_fingerprint", sa.String(128), nullable=False),
        sa.Column("spec_path", sa.Text(), nullable=True),
        sa.Column("objective", sa.Text(), nullable=False),
        sa.Column("metric_name", sa.String(200), nullable=False),
        sa.Column("direction", sa.String(16), nullable=False),
        sa.Column("turns_planned", sa.Integer(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stop_reason", sa.String(32), nullable=True),
        sa.Column("stop_message", sa.Text(), nullable=True),
        sa.Column("baseline_value", sa.Double(), nullable=True),
        sa.Column("champion_value", sa.Double(), nullable=True),
        sa.Column("champion_turn", sa.Integer(), nullable=True),
        sa.Column("cost_usd", sa.Double(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("controller_pid", sa.Integer(), nullable=True),
        _utc("created_at"),
        _utc("updated_at"),
        _utc("finished_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        _in("runs", "status", RUN_STATUSES),
        _in("runs", "stop_reason", STOP_REASONS),
        _in("runs", "direction", DIRECTIONS),
    )
    op.create_index(op.f("ix_runs_created_at"), "runs", ["created_at"])

    op.create_table(
        "components",
        _run_id(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("repo", sa.Text(), nullable=False),
        sa.Column("base_ref", sa.Text(), nullable=False),
        sa.Column("base_sha", sa.String(64), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("user_head", sa.String(64), nullable=True),
        sa.Column("user_state", sa.Text(), nullable=True),
        sa.Column("upstream", sa.Text(), nullable=True),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "name", name=op.f("pk_components")),
        sa.UniqueConstraint("run_id", "position", name=op.f("uq_components_run_id_position")),
        _run_fk("components"),
    )

    op.create_table(
        "turns",
        _run_id(),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        _utc("started_at"),
        _utc("decided_at", nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("reason", sa.String(32), nullable=True),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("p_value", sa.Double(), nullable=True),
        sa.Column("hypothesis", sa.Text(), nullable=True),
        sa.Column("changed_paths", sa.JSON(), nullable=False),
        sa.Column("commits", sa.JSON(), nullable=False),
        sa.Column("cost_usd", sa.Double(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("duration_s", sa.Double(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "number", name=op.f("pk_turns")),
        _in("turns", "phase", TURN_PHASES),
        _in("turns", "outcome", OUTCOMES),
        _in("turns", "reason", REASONS),
        sa.CheckConstraint(
            "(phase = 'started' AND outcome IS NULL AND reason IS NULL AND decided_at IS NULL)"
            " OR (phase = 'decided' AND outcome IS NOT NULL AND reason IS NOT NULL"
            " AND decided_at IS NOT NULL)",
            name=op.f("ck_turns_decision_iff_decided"),
        ),
        _run_fk("turns"),
    )

    op.create_table(
        "samples",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=True),
        _run_id(),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("arm", sa.String(16), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("valid", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_samples")),
        sa.UniqueConstraint(
            "run_id", "turn", "arm", "sample_index", name=op.f("uq_samples_run_id_turn_arm_sample_index")
        ),
        _in("samples", "arm", SAMPLE_ARMS),
        _run_fk("samples"),
    )

    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=True),
        _run_id(),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        _utc("created_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        _run_fk("events"),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_events_run_id_id"), "events", ["run_id", "id"])

    op.create_table(
        "process_groups",
        _run_id(),
        sa.Column("pgid", sa.Integer(), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        _utc("created_at"),
        sa.PrimaryKeyConstraint("run_id", "pgid", name=op.f("pk_process_groups")),
        _run_fk("process_groups"),
    )


def downgrade() -> None:
    for table in ("process_groups", "events", "samples", "turns", "components", "runs"):
        op.drop_table(table)

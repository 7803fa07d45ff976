"""Rows as crucible wrote them before revision 0005 (``runs.controller_pid``, no lease or phase), for
the upgrade tests: the current ``Store`` cannot write an old schema any more."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

NOW = "2026-01-01 00:00:00+00:00"


def insert_old_run(conn: Connection, run_id: str = "r1", *, status: str = "running", round: int = 0) -> None:
    """A run and its one component ``router`` as revisions 0001-0004 stored them."""
    conn.execute(
        sa.text(
            "INSERT INTO runs (id, spec_text, spec_fingerprint, spec_path, objective, metric_name,"
            " direction, turns_planned, options, status, cost_usd, tokens, round, controller_pid,"
            " created_at, updated_at)"
            " VALUES (:id, 'objective = \"x\"', 'fp-1', NULL, 'Cut latency', 'p50_ms', 'minimize', 10, '{}',"
            " :status, 0, 0, :round, 4242, :now, :now)"
        ),
        {"id": run_id, "status": status, "round": round, "now": NOW},
    )
    conn.execute(
        sa.text(
            "INSERT INTO components (run_id, name, position, repo, base_ref, base_sha, head_sha, extra)"
            " VALUES (:id, 'router', 1, '/repo', 'main', :sha, :sha, '{}')"
        ),
        {"id": run_id, "sha": "a" * 40},
    )

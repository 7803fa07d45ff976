"""Tables of what CI and bots report on commits: commit statuses, check suites and check runs."""

from __future__ import annotations

import sqlite3
from typing import Any

from controller.localforge.database import Database, build
from controller.localforge.models import CheckConclusion, CheckRun, CheckStatus, CommitStatus, StatusState


def _status(row: sqlite3.Row) -> CommitStatus:
    status = build(CommitStatus, row)
    return CommitStatus(**{**status.__dict__, "state": StatusState(row["state"])})


def _check_run(row: sqlite3.Row) -> CheckRun:
    run = build(CheckRun, row)
    conclusion = CheckConclusion(row["conclusion"]) if row["conclusion"] else None
    return CheckRun(**{**run.__dict__, "status": CheckStatus(row["status"]), "conclusion": conclusion})


class CheckTables(Database):
    """Commit statuses and check runs, keyed by repository and commit sha."""

    # -- commit statuses -------------------------------------------------------------------------

    def add_status(self, repo_id: int, sha: str, creator_id: int, values: dict[str, Any]) -> CommitStatus:
        """Store one status (``state``, ``context``, ``description``, ``target_url``)."""
        now = self.now()
        with self.tx() as c:
            new = self._new_id(c, "status")
            row = {"id": new, "repo_id": repo_id, "sha": sha, **values, "creator_id": creator_id}
            row.update(created_at=now, updated_at=now)
            cols = ", ".join(row)
            c.execute(
                f"INSERT INTO statuses ({cols}) VALUES ({', '.join('?' * len(row))})", tuple(row.values())
            )
        found = self._one("SELECT * FROM statuses WHERE id = ?", (new,))
        assert found is not None
        return _status(found)

    def statuses(self, repo_id: int, sha: str) -> list[CommitStatus]:
        """Every status of a commit, newest first (GitHub's order for ``/statuses``)."""
        rows = self._all(
            "SELECT * FROM statuses WHERE repo_id = ? AND sha = ? ORDER BY id DESC", (repo_id, sha)
        )
        return [_status(r) for r in rows]

    def count_statuses(self, repo_id: int, sha: str, context: str) -> int:
        row = self._one(
            "SELECT COUNT(*) FROM statuses WHERE repo_id = ? AND sha = ? AND context = ?",
            (repo_id, sha, context),
        )
        return int(row[0]) if row is not None else 0

    # -- check suites and runs -------------------------------------------------------------------

    def check_suite(self, repo_id: int, head_sha: str, app_id: int) -> int:
        """The id of the app's suite for a commit, created on first use (as GitHub does)."""
        with self.tx() as c:
            row = c.execute(
                "SELECT id FROM check_suites WHERE repo_id = ? AND head_sha = ? AND app_id = ?",
                (repo_id, head_sha, app_id),
            ).fetchone()
            if row is not None:
                return int(row[0])
            new = self._new_id(c, "check_suite")
            c.execute(
                "INSERT INTO check_suites VALUES (?, ?, ?, ?, ?)",
                (new, repo_id, head_sha, app_id, self.now()),
            )
            return new

    def add_check_run(self, values: dict[str, Any]) -> CheckRun:
        now = self.now()
        with self.tx() as c:
            new = self._new_id(c, "check_run")
            row = {"id": new, **values, "created_at": now, "updated_at": now}
            cols = ", ".join(row)
            c.execute(
                f"INSERT INTO check_runs ({cols}) VALUES ({', '.join('?' * len(row))})", tuple(row.values())
            )
        found = self.check_run_by_id(new)
        assert found is not None
        return found

    def check_run_by_id(self, run_id: int) -> CheckRun | None:
        row = self._one("SELECT * FROM check_runs WHERE id = ?", (run_id,))
        return None if row is None else _check_run(row)

    def update_check_run(self, run_id: int, values: dict[str, Any]) -> CheckRun:
        values = {**values, "updated_at": self.now()}
        with self.tx() as c:
            sets = ", ".join(f"{col} = ?" for col in values)
            c.execute(f"UPDATE check_runs SET {sets} WHERE id = ?", (*values.values(), run_id))
        found = self.check_run_by_id(run_id)
        assert found is not None
        return found

    def check_runs(self, repo_id: int, head_sha: str) -> list[CheckRun]:
        """Every check run of a commit, newest first."""
        rows = self._all(
            "SELECT * FROM check_runs WHERE repo_id = ? AND head_sha = ? ORDER BY id DESC",
            (repo_id, head_sha),
        )
        return [_check_run(r) for r in rows]

"""Tables of an issue's triage: repository labels and the labels on each issue, assignees, teams
and the review requests of pull requests (rows keep insertion order through SQLite's rowid)."""

from __future__ import annotations

import sqlite3
from typing import Any

from controller.localforge.database import Database, build
from controller.localforge.models import Label, Team


def _label(row: sqlite3.Row) -> Label:
    label = build(Label, row)
    return Label(**{**label.__dict__, "is_default": bool(row["is_default"])})


class IssueTables(Database):
    """Labels, assignees, teams and review requests."""

    # -- labels ----------------------------------------------------------------------------------

    def labels(self, repo_id: int) -> list[Label]:
        """A repository's labels, by name (case-insensitive), as GitHub lists them."""
        rows = self._all("SELECT * FROM labels WHERE repo_id = ? ORDER BY name, id", (repo_id,))
        return [_label(r) for r in rows]

    def label_by_name(self, repo_id: int, name: str) -> Label | None:
        row = self._one("SELECT * FROM labels WHERE repo_id = ? AND name = ?", (repo_id, name))
        return None if row is None else _label(row)

    def add_label(self, repo_id: int, name: str, color: str, description: str | None) -> Label:
        with self.tx() as c:
            new = self._new_id(c, "label")
            c.execute(
                "INSERT INTO labels (id, repo_id, name, color, description) VALUES (?, ?, ?, ?, ?)",
                (new, repo_id, name, color, description),
            )
        row = self._one("SELECT * FROM labels WHERE id = ?", (new,))
        assert row is not None
        return _label(row)

    def update_label(self, label_id: int, **values: Any) -> Label:
        with self.tx() as c:
            sets = ", ".join(f"{col} = ?" for col in values)
            c.execute(f"UPDATE labels SET {sets} WHERE id = ?", (*values.values(), label_id))
        row = self._one("SELECT * FROM labels WHERE id = ?", (label_id,))
        assert row is not None
        return _label(row)

    def delete_label(self, label_id: int) -> None:
        """A label and its use on every issue."""
        with self.tx() as c:
            c.execute("DELETE FROM issue_labels WHERE label_id = ?", (label_id,))
            c.execute("DELETE FROM labels WHERE id = ?", (label_id,))

    def issue_labels(self, repo_id: int, number: int) -> list[Label]:
        rows = self._all(
            "SELECT l.* FROM labels l JOIN issue_labels i ON i.label_id = l.id"
            " WHERE i.repo_id = ? AND i.number = ? ORDER BY l.name, l.id",
            (repo_id, number),
        )
        return [_label(r) for r in rows]

    def add_issue_labels(self, repo_id: int, number: int, label_ids: list[int]) -> list[int]:
        """Put labels on an issue; the ids that were not on it before, in the order given."""
        added = []
        with self.tx() as c:
            for label_id in label_ids:
                cur = c.execute(
                    "INSERT OR IGNORE INTO issue_labels VALUES (?, ?, ?)", (repo_id, number, label_id)
                )
                if cur.rowcount:
                    added.append(label_id)
        return added

    def remove_issue_labels(self, repo_id: int, number: int, label_ids: list[int]) -> list[int]:
        """Take labels off an issue; the ids that were on it."""
        removed = []
        with self.tx() as c:
            for label_id in label_ids:
                cur = c.execute(
                    "DELETE FROM issue_labels WHERE repo_id = ? AND number = ? AND label_id = ?",
                    (repo_id, number, label_id),
                )
                if cur.rowcount:
                    removed.append(label_id)
        return removed

    # -- assignees -------------------------------------------------------------------------------

    def assignees(self, repo_id: int, number: int) -> list[int]:
        """User ids assigned to an issue, in the order they were assigned."""
        rows = self._all(
            "SELECT user_id FROM assignees WHERE repo_id = ? AND number = ? ORDER BY rowid", (repo_id, number)
        )
        return [int(r["user_id"]) for r in rows]

    def add_assignees(self, repo_id: int, number: int, user_ids: list[int]) -> list[int]:
        added = []
        with self.tx() as c:
            for user_id in user_ids:
                cur = c.execute(
                    "INSERT OR IGNORE INTO assignees VALUES (?, ?, ?)", (repo_id, number, user_id)
                )
                if cur.rowcount:
                    added.append(user_id)
        return added

    def remove_assignees(self, repo_id: int, number: int, user_ids: list[int]) -> list[int]:
        removed = []
        with self.tx() as c:
            for user_id in user_ids:
                cur = c.execute(
                    "DELETE FROM assignees WHERE repo_id = ? AND number = ? AND user_id = ?",
                    (repo_id, number, user_id),
                )
                if cur.rowcount:
                    removed.append(user_id)
        return removed

    def issue_numbers(self, repo_id: int, *, label_ids: list[int], assignee_id: int | None) -> set[int]:
        """Numbers of the repository's issues carrying every label in ``label_ids`` and, when
        ``assignee_id`` is given, assigned to that user (0: assigned to anyone, -1: to no one)."""
        clauses, args = ["p.repo_id = ?"], [repo_id]
        for label_id in label_ids:
            clauses.append(
                "EXISTS (SELECT 1 FROM issue_labels i WHERE i.repo_id = p.repo_id"
                " AND i.number = p.number AND i.label_id = ?)"
            )
            args.append(label_id)
        if assignee_id is not None:
            exists = "EXISTS (SELECT 1 FROM assignees a WHERE a.repo_id = p.repo_id AND a.number = p.number"
            if assignee_id == -1:
                clauses.append(f"NOT {exists})")
            elif assignee_id == 0:
                clauses.append(f"{exists})")
            else:
                clauses.append(f"{exists} AND a.user_id = ?)")
                args.append(assignee_id)
        rows = self._all(f"SELECT p.number FROM pulls p WHERE {' AND '.join(clauses)}", tuple(args))
        return {int(r["number"]) for r in rows}

    # -- teams -----------------------------------------------------------------------------------

    def add_team(self, org_id: int, slug: str, name: str, description: str | None) -> Team:
        with self.tx() as c:
            new = self._new_id(c, "team")
            c.execute(
                "INSERT INTO teams VALUES (?, ?, ?, ?, ?, ?)",
                (new, org_id, slug, name, description, self.now()),
            )
        team = self.team_by_id(new)
        assert team is not None
        return team

    def team_by_id(self, team_id: int) -> Team | None:
        row = self._one("SELECT * FROM teams WHERE id = ?", (team_id,))
        return None if row is None else build(Team, row)

    def team_by_slug(self, org_id: int, slug: str) -> Team | None:
        row = self._one("SELECT * FROM teams WHERE org_id = ? AND slug = ?", (org_id, slug))
        return None if row is None else build(Team, row)

    def teams(self, org_id: int) -> list[Team]:
        """An organization's teams, by slug (``organization { teams }`` in GraphQL)."""
        rows = self._all("SELECT * FROM teams WHERE org_id = ? ORDER BY slug", (org_id,))
        return [build(Team, r) for r in rows]

    def add_team_member(self, team_id: int, user_id: int) -> None:
        with self.tx() as c:
            c.execute("INSERT OR IGNORE INTO team_members VALUES (?, ?)", (team_id, user_id))

    def team_members(self, team_id: int) -> list[int]:
        rows = self._all("SELECT user_id FROM team_members WHERE team_id = ? ORDER BY rowid", (team_id,))
        return [int(r["user_id"]) for r in rows]

    # -- review requests -------------------------------------------------------------------------

    def review_requests(self, pull_id: int, kind: str) -> list[int]:
        """Requested reviewers of ``kind`` (``user`` or ``team``), in the order requested."""
        rows = self._all(
            "SELECT reviewer_id FROM review_requests WHERE pull_id = ? AND kind = ? ORDER BY rowid",
            (pull_id, kind),
        )
        return [int(r["reviewer_id"]) for r in rows]

    def add_review_requests(self, pull_id: int, kind: str, ids: list[int]) -> list[int]:
        added = []
        with self.tx() as c:
            for reviewer in ids:
                cur = c.execute(
                    "INSERT OR IGNORE INTO review_requests VALUES (?, ?, ?)", (pull_id, kind, reviewer)
                )
                if cur.rowcount:
                    added.append(reviewer)
        return added

    def remove_review_requests(self, pull_id: int, kind: str, ids: list[int]) -> list[int]:
        removed = []
        with self.tx() as c:
            for reviewer in ids:
                cur = c.execute(
                    "DELETE FROM review_requests WHERE pull_id = ? AND kind = ? AND reviewer_id = ?",
                    (pull_id, kind, reviewer),
                )
                if cur.rowcount:
                    removed.append(reviewer)
        return removed

"""The forge's durable state: one SQLite file (``<root>/forge.db``) through the stdlib ``sqlite3``.

Independent of crucible's store on purpose: the forge stands in for GitHub, so it shares no code
or schema with the system under test. This module holds accounts, repositories, pull requests,
reviews, comments and hooks; labels, assignees and review requests live in ``store_issues``,
commit statuses and check runs in ``store_checks`` (the connection: ``database``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from controller.localforge.database import Clock, Database, build, iso, utc_now
from controller.localforge.models import (
    Account,
    AccountType,
    Hook,
    IssueComment,
    Pull,
    Repo,
    Review,
    ReviewComment,
    ReviewState,
    Role,
)
from controller.localforge.store_checks import CheckTables
from controller.localforge.store_issues import IssueTables

__all__ = ["Clock", "Storage", "iso", "utc_now"]


class Storage(IssueTables, CheckTables, Database):
    """Typed access to ``forge.db``. Every public method is one short transaction."""

    # -- accounts ------------------------------------------------------------------------------

    def add_account(self, login: str, type_: AccountType, *, site_admin: bool = False) -> Account:
        with self.tx() as c:
            new = self._new_id(c, "account")
            c.execute(
                "INSERT INTO accounts VALUES (?, ?, ?, ?, ?)",
                (new, login, type_.value, site_admin, self.now()),
            )
        account = self.account_by_id(new)
        assert account is not None
        return account

    def _account(self, row: sqlite3.Row | None) -> Account | None:
        if row is None:
            return None
        return Account(
            row["id"], row["login"], AccountType(row["type"]), bool(row["site_admin"]), row["created_at"]
        )

    def account_by_id(self, account_id: int) -> Account | None:
        return self._account(self._one("SELECT * FROM accounts WHERE id = ?", (account_id,)))

    def account_by_login(self, login: str) -> Account | None:
        return self._account(self._one("SELECT * FROM accounts WHERE login = ?", (login,)))

    def add_token(self, account_id: int, token_hash: str) -> None:
        with self.tx() as c:
            c.execute("INSERT OR REPLACE INTO tokens VALUES (?, ?)", (token_hash, account_id))

    def account_by_token(self, token_hash: str) -> Account | None:
        row = self._one(
            "SELECT a.* FROM accounts a JOIN tokens t ON t.account_id = a.id WHERE t.token_hash = ?",
            (token_hash,),
        )
        return self._account(row)

    def add_org_member(self, org_id: int, user_id: int) -> None:
        with self.tx() as c:
            c.execute("INSERT OR IGNORE INTO org_members VALUES (?, ?)", (org_id, user_id))

    def is_org_member(self, org_id: int, user_id: int) -> bool:
        return (
            self._one("SELECT 1 FROM org_members WHERE org_id = ? AND user_id = ?", (org_id, user_id))
            is not None
        )

    # -- repositories --------------------------------------------------------------------------

    _REPO_SELECT = "SELECT r.*, a.login AS owner_login FROM repos r JOIN accounts a ON a.id = r.owner_id"

    def _repo(self, row: sqlite3.Row | None) -> Repo | None:
        if row is None:
            return None
        repo = build(Repo, row)
        return Repo(**{**repo.__dict__, "private": bool(row["private"])})

    def add_repo(
        self,
        owner_id: int,
        name: str,
        *,
        description: str | None,
        private: bool,
        branch: str,
        parent_id: int | None = None,
    ) -> Repo:
        now = self.now()
        with self.tx() as c:
            new = self._new_id(c, "repo")
            c.execute(
                "INSERT INTO repos (id, owner_id, name, description, private, default_branch, created_at,"
                " updated_at, parent_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (new, owner_id, name, description, private, branch, now, now, parent_id),
            )
        repo = self.repo_by_id(new)
        assert repo is not None
        return repo

    def repo_by_id(self, repo_id: int) -> Repo | None:
        return self._repo(self._one(f"{self._REPO_SELECT} WHERE r.id = ?", (repo_id,)))

    def repo_by_name(self, owner: str, name: str) -> Repo | None:
        return self._repo(self._one(f"{self._REPO_SELECT} WHERE a.login = ? AND r.name = ?", (owner, name)))

    def network_repo(self, repo: Repo, owner_id: int) -> Repo | None:
        """The repository of ``owner_id`` in ``repo``'s fork network (parent, fork or sibling)."""
        root = repo.parent_id or repo.id
        row = self._one(
            f"{self._REPO_SELECT} WHERE r.owner_id = ? AND (r.id = ? OR r.parent_id = ?) ORDER BY r.id",
            (owner_id, root, root),
        )
        return self._repo(row)

    def repos_of(self, owner_id: int) -> list[Repo]:
        rows = self._all(f"{self._REPO_SELECT} WHERE r.owner_id = ? ORDER BY r.id", (owner_id,))
        return [r for r in map(self._repo, rows) if r is not None]

    def repos_for(self, user_id: int) -> list[tuple[Repo, str]]:
        """Repositories ``user_id`` owns, collaborates on or reaches as an organization member,
        each with that affiliation (``owner``, ``collaborator``, ``organization_member``)."""
        rows = self._all(
            f"SELECT * FROM (SELECT 'owner' AS affiliation, x.* FROM ({self._REPO_SELECT}) x"
            " WHERE x.owner_id = :u"
            f" UNION ALL SELECT 'collaborator', x.* FROM ({self._REPO_SELECT}) x"
            " JOIN collaborators c ON c.repo_id = x.id WHERE c.user_id = :u"
            f" UNION ALL SELECT 'organization_member', x.* FROM ({self._REPO_SELECT}) x"
            " JOIN org_members m ON m.org_id = x.owner_id WHERE m.user_id = :u) ORDER BY id",
            {"u": user_id},
        )
        out = []
        for row in rows:
            repo = self._repo(row)
            if repo is not None:
                out.append((repo, str(row["affiliation"])))
        return out

    def mark_pushed(self, repo_id: int) -> None:
        now = self.now()
        with self.tx() as c:
            c.execute("UPDATE repos SET pushed_at = ?, updated_at = ? WHERE id = ?", (now, now, repo_id))

    def next_number(self, c: sqlite3.Connection, repo_id: int) -> int:
        c.execute("UPDATE repos SET last_number = last_number + 1 WHERE id = ?", (repo_id,))
        row = c.execute("SELECT last_number FROM repos WHERE id = ?", (repo_id,)).fetchone()
        return int(row[0])

    # -- collaborators -------------------------------------------------------------------------

    def set_collaborator(self, repo_id: int, user_id: int, role: Role) -> bool:
        """Grant ``role``; True when the user was not a collaborator before."""
        with self.tx() as c:
            existed = c.execute(
                "SELECT 1 FROM collaborators WHERE repo_id = ? AND user_id = ?", (repo_id, user_id)
            ).fetchone()
            c.execute("INSERT OR REPLACE INTO collaborators VALUES (?, ?, ?)", (repo_id, user_id, role.value))
        return existed is None

    def collaborator_role(self, repo_id: int, user_id: int) -> Role | None:
        row = self._one(
            "SELECT role FROM collaborators WHERE repo_id = ? AND user_id = ?", (repo_id, user_id)
        )
        return None if row is None else Role(row["role"])

    # -- pulls ---------------------------------------------------------------------------------

    def _pull(self, row: sqlite3.Row | None) -> Pull | None:
        if row is None:
            return None
        pull = build(Pull, row)
        return Pull(**{**pull.__dict__, "draft": bool(row["draft"])})

    def add_pull(self, repo_id: int, user_id: int, values: dict[str, Any]) -> Pull:
        now = self.now()
        with self.tx() as c:
            new = self._new_id(c, "pull")
            number = self.next_number(c, repo_id)
            row = {"id": new, "repo_id": repo_id, "number": number, "user_id": user_id, "state": "open"}
            row.update(values, created_at=now, updated_at=now, closed_at=None)
            cols = ", ".join(row)
            c.execute(f"INSERT INTO pulls ({cols}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
        pull = self.pull_by_id(new)
        assert pull is not None
        return pull

    def pull_by_id(self, pull_id: int) -> Pull | None:
        return self._pull(self._one("SELECT * FROM pulls WHERE id = ?", (pull_id,)))

    def pull_by_number(self, repo_id: int, number: int) -> Pull | None:
        return self._pull(
            self._one("SELECT * FROM pulls WHERE repo_id = ? AND number = ?", (repo_id, number))
        )

    def pulls(self, repo_id: int, where: dict[str, Any], order: str) -> list[Pull]:
        """Pulls of a repository matching ``where`` (column = value), ordered by ``order`` (trusted)."""
        clauses = "".join(f" AND {col} = ?" for col in where)
        rows = self._all(
            f"SELECT * FROM pulls WHERE repo_id = ?{clauses} ORDER BY {order}", (repo_id, *where.values())
        )
        return [p for p in map(self._pull, rows) if p is not None]

    def pulls_on_branch(self, repo_id: int, branch: str) -> list[Pull]:
        """Open pulls whose head or base is ``branch`` of this repository."""
        rows = self._all(
            "SELECT * FROM pulls WHERE state = 'open' AND ((head_repo_id = ? AND head_ref = ?)"
            " OR (repo_id = ? AND base_ref = ?)) ORDER BY id",
            (repo_id, branch, repo_id, branch),
        )
        return [p for p in map(self._pull, rows) if p is not None]

    def update_pull(self, pull_id: int, **values: Any) -> Pull:
        values.setdefault("updated_at", self.now())
        with self.tx() as c:
            sets = ", ".join(f"{col} = ?" for col in values)
            c.execute(f"UPDATE pulls SET {sets} WHERE id = ?", (*values.values(), pull_id))
        pull = self.pull_by_id(pull_id)
        assert pull is not None
        return pull

    # -- reviews -------------------------------------------------------------------------------

    def _review(self, row: sqlite3.Row | None) -> Review | None:
        if row is None:
            return None
        review = build(Review, row)
        return Review(**{**review.__dict__, "state": ReviewState(row["state"])})

    def add_review(self, pull_id: int, user_id: int, body: str, state: ReviewState, commit_id: str) -> Review:
        submitted = None if state is ReviewState.PENDING else self.now()
        with self.tx() as c:
            new = self._new_id(c, "review")
            c.execute(
                "INSERT INTO reviews VALUES (?, ?, ?, ?, ?, ?, ?)",
                (new, pull_id, user_id, body, state.value, commit_id, submitted),
            )
            if submitted is not None:  # as on GitHub, activity on a PR moves its updated_at
                c.execute("UPDATE pulls SET updated_at = ? WHERE id = ?", (submitted, pull_id))
        review = self.review_by_id(new)
        assert review is not None
        return review

    def review_by_id(self, review_id: int) -> Review | None:
        return self._review(self._one("SELECT * FROM reviews WHERE id = ?", (review_id,)))

    def update_review(self, review_id: int, *, state: ReviewState, body: str, submit: bool) -> Review:
        """New state and body; ``submit`` stamps ``submitted_at`` and the PR's ``updated_at``."""
        with self.tx() as c:
            c.execute("UPDATE reviews SET state = ?, body = ? WHERE id = ?", (state.value, body, review_id))
            if submit:
                now = self.now()
                c.execute("UPDATE reviews SET submitted_at = ? WHERE id = ?", (now, review_id))
                c.execute(
                    "UPDATE pulls SET updated_at = ? WHERE id = (SELECT pull_id FROM reviews WHERE id = ?)",
                    (now, review_id),
                )
        review = self.review_by_id(review_id)
        assert review is not None
        return review

    def delete_review(self, review_id: int) -> None:
        """A (pending) review and its comments."""
        with self.tx() as c:
            c.execute("DELETE FROM review_comments WHERE review_id = ?", (review_id,))
            c.execute("DELETE FROM reviews WHERE id = ?", (review_id,))

    def reviews(self, pull_id: int) -> list[Review]:
        rows = self._all("SELECT * FROM reviews WHERE pull_id = ? ORDER BY id", (pull_id,))
        return [r for r in map(self._review, rows) if r is not None]

    # -- review comments -----------------------------------------------------------------------

    def add_review_comment(self, repo_id: int, values: dict[str, Any]) -> ReviewComment:
        now = self.now()
        with self.tx() as c:
            new = self._new_id(c, "review_comment")
            row = {"id": new, "repo_id": repo_id, **values, "created_at": now, "updated_at": now}
            cols = ", ".join(row)
            c.execute(
                f"INSERT INTO review_comments ({cols}) VALUES ({', '.join('?' * len(row))})",
                tuple(row.values()),
            )
            if "pull_id" in row:
                c.execute("UPDATE pulls SET updated_at = ? WHERE id = ?", (now, row["pull_id"]))
        comment = self.review_comment_by_id(new)
        assert comment is not None
        return comment

    def review_comment_by_id(self, comment_id: int) -> ReviewComment | None:
        row = self._one("SELECT * FROM review_comments WHERE id = ?", (comment_id,))
        return None if row is None else build(ReviewComment, row)

    def review_comments(self, where: dict[str, Any], since: str | None, order: str) -> list[ReviewComment]:
        rows = self._comment_rows("review_comments", where, since, order)
        return [build(ReviewComment, r) for r in rows]

    def update_review_comment(self, comment_id: int, body: str) -> None:
        with self.tx() as c:
            c.execute(
                "UPDATE review_comments SET body = ?, updated_at = ? WHERE id = ?",
                (body, self.now(), comment_id),
            )

    def delete_review_comment(self, comment_id: int) -> None:
        with self.tx() as c:
            c.execute("DELETE FROM review_comments WHERE id = ?", (comment_id,))

    # -- issue comments ------------------------------------------------------------------------

    def add_issue_comment(self, repo_id: int, number: int, user_id: int, body: str) -> IssueComment:
        now = self.now()
        with self.tx() as c:
            new = self._new_id(c, "issue_comment")
            c.execute(
                "INSERT INTO issue_comments VALUES (?, ?, ?, ?, ?, ?, ?)",
                (new, repo_id, number, user_id, body, now, now),
            )
            c.execute(
                "UPDATE pulls SET updated_at = ? WHERE repo_id = ? AND number = ?", (now, repo_id, number)
            )
        comment = self.issue_comment_by_id(new)
        assert comment is not None
        return comment

    def issue_comment_by_id(self, comment_id: int) -> IssueComment | None:
        row = self._one("SELECT * FROM issue_comments WHERE id = ?", (comment_id,))
        return None if row is None else build(IssueComment, row)

    def issue_comments(self, where: dict[str, Any], since: str | None, order: str) -> list[IssueComment]:
        return [build(IssueComment, r) for r in self._comment_rows("issue_comments", where, since, order)]

    def update_issue_comment(self, comment_id: int, body: str) -> None:
        with self.tx() as c:
            c.execute(
                "UPDATE issue_comments SET body = ?, updated_at = ? WHERE id = ?",
                (body, self.now(), comment_id),
            )

    def delete_issue_comment(self, comment_id: int) -> None:
        with self.tx() as c:
            c.execute("DELETE FROM issue_comments WHERE id = ?", (comment_id,))

    def count(self, table: str, where: dict[str, Any]) -> int:
        """Rows of ``table`` (trusted name) matching ``where``."""
        clauses = " AND ".join(f"{col} = ?" for col in where) or "1"
        row = self._one(f"SELECT COUNT(*) FROM {table} WHERE {clauses}", tuple(where.values()))
        return int(row[0]) if row is not None else 0

    def _comment_rows(
        self, table: str, where: dict[str, Any], since: str | None, order: str
    ) -> list[sqlite3.Row]:
        clauses = [f"{col} = ?" for col in where]
        args: list[Any] = list(where.values())
        if since is not None:
            clauses.append("updated_at >= ?")
            args.append(since)
        sql = f"SELECT * FROM {table} WHERE {' AND '.join(clauses) or '1'} ORDER BY {order}"
        return self._all(sql, tuple(args))

    # -- hooks ---------------------------------------------------------------------------------

    def _hook(self, row: sqlite3.Row) -> Hook:
        hook = build(Hook, row)
        events = tuple(e for e in row["events"].split(",") if e)
        return Hook(**{**hook.__dict__, "events": events, "active": bool(row["active"])})

    def add_hook(self, repo_id: int, url: str, secret: str | None, events: list[str], active: bool) -> Hook:
        now = self.now()
        with self.tx() as c:
            new = self._new_id(c, "hook")
            c.execute(
                "INSERT INTO hooks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (new, repo_id, url, secret, ",".join(events), active, now, now),
            )
        return self.hooks(repo_id, hook_id=new)[0]

    def hooks(self, repo_id: int, *, hook_id: int | None = None) -> list[Hook]:
        if hook_id is None:
            rows = self._all("SELECT * FROM hooks WHERE repo_id = ? ORDER BY id", (repo_id,))
        else:
            rows = self._all("SELECT * FROM hooks WHERE repo_id = ? AND id = ?", (repo_id, hook_id))
        return [self._hook(r) for r in rows]

    def update_hook(self, hook_id: int, **values: Any) -> None:
        """Set columns of a hook (``events`` as a list) and its ``updated_at``."""
        if "events" in values:
            values["events"] = ",".join(values["events"])
        values["updated_at"] = self.now()
        with self.tx() as c:
            sets = ", ".join(f"{col} = ?" for col in values)
            c.execute(f"UPDATE hooks SET {sets} WHERE id = ?", (*values.values(), hook_id))

    def allocate_id(self, kind: str) -> int:
        """A fresh id from the forge's one sequence, for objects the forge does not keep."""
        with self.tx() as c:
            return self._new_id(c, kind)

    def collaborators(self, repo_id: int) -> list[tuple[int, Role]]:
        rows = self._all(
            "SELECT user_id, role FROM collaborators WHERE repo_id = ? ORDER BY user_id", (repo_id,)
        )
        return [(int(r["user_id"]), Role(r["role"])) for r in rows]

    def org_members(self, org_id: int) -> list[int]:
        rows = self._all("SELECT user_id FROM org_members WHERE org_id = ? ORDER BY user_id", (org_id,))
        return [int(r["user_id"]) for r in rows]

    def delete_hook(self, hook_id: int) -> None:
        with self.tx() as c:
            c.execute("DELETE FROM hooks WHERE id = ?", (hook_id,))

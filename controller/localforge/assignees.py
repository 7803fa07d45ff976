"""Assignees of issues (pull requests), and who can be assigned.

GitHub's rules: anyone with write access to the repository is assignable (here: its owner, the
members of its owning organization and collaborators with push, maintain or admin); at most 10
assignees per issue; logins that cannot be assigned, and every change asked by someone without
write access, are silently dropped (the answer is the issue as it is). Each assignee added to or
removed from a pull request fires ``pull_request`` ``assigned``/``unassigned``.
"""

from __future__ import annotations

from typing import Any

from controller.localforge import render
from controller.localforge.errors import invalid_field
from controller.localforge.models import ROLE_RANK, Account, AccountType, Pull, Repo, Role
from controller.localforge.pulls import Pulls
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]

MAX_ASSIGNEES = 10


def logins(payload: Json, key: str = "assignees") -> list[str]:
    value = payload.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid_field("Issue", key)
    return list(dict.fromkeys(value))


class Assignees:
    """Assignee operations of one forge."""

    def __init__(self, forge: Forge, pulls: Pulls) -> None:
        self.forge = forge
        self.pulls = pulls

    def assignable(self, repo: Repo, account: Account | None) -> bool:
        """Write access to ``repo`` (site administrators only where they hold a role themselves)."""
        if account is None or account.type is AccountType.ORGANIZATION:
            return False
        role = self.forge.role(repo, account)
        explicit = account.id == repo.owner_id or self.forge.association(repo, account) != "NONE"
        return explicit and role is not None and ROLE_RANK[role] >= ROLE_RANK[Role.PUSH]

    def listing(self, repo: Repo) -> list[Account]:
        """``GET /assignees``: the owner (a user), organization members, writers; by login."""
        store = self.forge.store
        ids = {repo.owner_id}
        owner = self.forge.account(repo.owner_id)
        if owner.type is AccountType.ORGANIZATION:
            ids |= set(store.org_members(owner.id))
        ids |= {
            user_id
            for user_id, role in store.collaborators(repo.id)
            if ROLE_RANK[role] >= ROLE_RANK[Role.PUSH]
        }
        accounts = [self.forge.account(i) for i in ids]
        return sorted((a for a in accounts if self.assignable(repo, a)), key=lambda a: a.login.lower())

    def check(self, repo: Repo, login: str) -> bool:
        """``GET /assignees/{login}``: 204 when assignable, else 404."""
        return self.assignable(repo, self.forge.store.account_by_login(login))

    def _writer(self, ctx: Ctx, repo: Repo) -> bool:
        self.forge.require(ctx, repo, Role.PULL)
        role = self.forge.role(repo, ctx.actor)
        return role is not None and ROLE_RANK[role] >= ROLE_RANK[Role.PUSH]

    def _accounts(self, repo: Repo, names: list[str]) -> list[Account]:
        found = [self.forge.store.account_by_login(name) for name in names]
        return [a for a in found if a is not None and self.assignable(repo, a)]

    def add(self, ctx: Ctx, repo: Repo, number: int, names: list[str]) -> Pull:
        """``POST /issues/{n}/assignees``; the issue afterwards."""
        pull = self.pulls.get(repo, number)
        if not self._writer(ctx, repo):
            return pull
        current = self.forge.store.assignees(repo.id, number)
        wanted = [a.id for a in self._accounts(repo, names) if a.id not in current]
        added = self.forge.store.add_assignees(
            repo.id, number, wanted[: max(MAX_ASSIGNEES - len(current), 0)]
        )
        return self._emit(ctx, repo, pull, added, "assigned")

    def remove(self, ctx: Ctx, repo: Repo, number: int, names: list[str]) -> Pull:
        """``DELETE /issues/{n}/assignees``; the issue afterwards."""
        pull = self.pulls.get(repo, number)
        if not self._writer(ctx, repo):
            return pull
        ids = [a.id for a in (self.forge.store.account_by_login(n) for n in names) if a is not None]
        removed = self.forge.store.remove_assignees(repo.id, number, ids)
        return self._emit(ctx, repo, pull, removed, "unassigned")

    def replace(self, ctx: Ctx, repo: Repo, number: int, names: list[str]) -> Pull:
        """``PATCH /issues/{n}`` with ``assignees``: exactly these (those that can be assigned)."""
        pull = self.pulls.get(repo, number)
        if not self._writer(ctx, repo):
            return pull
        wanted = [a.id for a in self._accounts(repo, names)][:MAX_ASSIGNEES]
        current = self.forge.store.assignees(repo.id, number)
        removed = self.forge.store.remove_assignees(repo.id, number, [i for i in current if i not in wanted])
        self._emit(ctx, repo, pull, removed, "unassigned")
        added = self.forge.store.add_assignees(repo.id, number, wanted)
        return self._emit(ctx, repo, pull, added, "assigned")

    def _emit(self, ctx: Ctx, repo: Repo, pull: Pull, user_ids: list[int], action: str) -> Pull:
        fresh = self.pulls.get(repo, pull.number)
        for user_id in user_ids:
            assignee = render.user(ctx.urls, self.forge.account(user_id))
            self.pulls.emit(ctx, repo, fresh, action, assignee=assignee)
        return fresh

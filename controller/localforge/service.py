"""The forge's core: identity, permissions, repositories, forks, branches, hooks and events.

Routes call these with a ``Ctx`` (who is asking, and the URL root to render with); the checks
GitHub makes (visibility, write access, duplicate names) happen here. Every ref change, whether
by push (``smarthttp``) or through the refs API (``refs``), goes through ``refs_changed``, which
tells the ``ref_listeners`` (pull requests, push webhooks), so PRs follow their branches however
a branch moved. ``emit`` is the one way out for webhooks.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from controller.localforge import gitops, render
from controller.localforge.errors import Forbidden, Invalid, NotFound, Unauthorized, invalid_custom
from controller.localforge.models import ROLE_RANK, Account, AccountType, Hook, Repo, Role
from controller.localforge.storage import Clock, Storage, utc_now
from controller.localforge.webhooks import Dispatcher, Target

Json = dict[str, Any]
RefListener = Callable[["Ctx", Repo, dict[str, str], dict[str, str]], None]

REPO_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


def valid_repo_name(name: Any) -> bool:
    """GitHub's characters, and nothing git or a shell would misread: no ``.``/``..``, no name
    ending in ``.git`` (the clone URL adds it), no leading ``-`` (an option to git)."""
    return (
        isinstance(name, str)
        and REPO_NAME.fullmatch(name) is not None
        and name not in {".", ".."}
        and not name.lower().endswith(".git")
        and not name.startswith("-")
    )


@dataclass(frozen=True)
class Ctx:
    """One request's caller (None: anonymous) and URL root."""

    actor: Account | None
    urls: render.Urls


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def permission_name(role: Role | None) -> str:
    """The ``permission`` field of the collaborator-permission API for a role."""
    if role is None:
        return "none"
    return {Role.ADMIN: "admin", Role.MAINTAIN: "write", Role.PUSH: "write"}.get(role, "read")


class Forge:
    """Shared state of one forge root: storage, git repositories, webhook dispatch."""

    def __init__(
        self,
        root: Path,
        *,
        webhook: Target | None = None,
        clock: Clock = utc_now,
        webhook_timeout: float = 5.0,
    ) -> None:
        self.root = root
        self.store = Storage(root / "forge.db", clock=clock)
        self.git_root = root / "git"
        self.dispatcher = Dispatcher(timeout=webhook_timeout)
        self.global_target = webhook
        self.ref_listeners: list[RefListener] = []
        self._locks: dict[int, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def close(self) -> None:
        self.dispatcher.close()
        self.store.close()

    def repo_path(self, repo: Repo) -> Path:
        return self.git_root / repo.owner_login / f"{repo.name}.git"

    def repo_lock(self, repo: Repo) -> threading.Lock:
        """Serialises ref changes (pushes, REST ref updates) per repository."""
        with self._locks_guard:
            return self._locks.setdefault(repo.id, threading.Lock())

    # -- identity and permissions --------------------------------------------------------------

    def authenticate(self, token: str | None) -> Account | None:
        """The account of ``token``; None without a token; 401 for an unknown token."""
        if not token:
            return None
        account = self.store.account_by_token(token_hash(token))
        if account is None:
            raise Unauthorized("Bad credentials")
        return account

    def account(self, account_id: int) -> Account:
        account = self.store.account_by_id(account_id)
        if account is None:
            raise NotFound()
        return account

    def role(self, repo: Repo, account: Account | None) -> Role | None:
        """The caller's effective role; public repositories give everyone ``pull``."""
        public = None if repo.private else Role.PULL
        if account is None:
            return public
        if account.site_admin or account.id == repo.owner_id:
            return Role.ADMIN
        owner = self.account(repo.owner_id)
        if owner.type is AccountType.ORGANIZATION and self.store.is_org_member(owner.id, account.id):
            return Role.ADMIN
        return self.store.collaborator_role(repo.id, account.id) or public

    def association(self, repo: Repo, account: Account) -> str:
        """``author_association``: OWNER, MEMBER (org member), COLLABORATOR or NONE."""
        if account.id == repo.owner_id:
            return "OWNER"
        owner = self.account(repo.owner_id)
        if owner.type is AccountType.ORGANIZATION and self.store.is_org_member(owner.id, account.id):
            return "MEMBER"
        if self.store.collaborator_role(repo.id, account.id) is not None:
            return "COLLABORATOR"
        return "NONE"

    def require(self, ctx: Ctx, repo: Repo, minimum: Role) -> Account:
        """The caller, who must hold at least ``minimum`` (404 when they cannot even see the repo)."""
        role = self.role(repo, ctx.actor)
        if role is None:
            raise NotFound()
        if ctx.actor is None:
            raise Unauthorized("Requires authentication")
        if ROLE_RANK[role] < ROLE_RANK[minimum]:
            need = "admin rights to" if minimum is Role.ADMIN else "push access to"
            raise Forbidden(f"Must have {need} repository.")
        return ctx.actor

    def signed_in(self, ctx: Ctx) -> Account:
        if ctx.actor is None:
            raise Unauthorized("Requires authentication")
        return ctx.actor

    def find_repo(self, ctx: Ctx, owner: str, name: str) -> Repo:
        repo = self.store.repo_by_name(owner, name)
        if repo is None or self.role(repo, ctx.actor) is None:
            raise NotFound()
        return repo

    # -- rendering helpers ---------------------------------------------------------------------

    def repo_json(self, ctx: Ctx, repo: Repo) -> Json:
        role = self.role(repo, ctx.actor) if ctx.actor is not None else None
        permissions = None
        if role is not None:
            rank = ROLE_RANK[role]
            permissions = {"admin": rank >= 5, "maintain": rank >= 4, "push": rank >= 3, "triage": rank >= 2}
            permissions["pull"] = True
        open_issues = self.store.count("pulls", {"repo_id": repo.id, "state": "open"})
        owner = self.account(repo.owner_id)
        parent = self.store.repo_by_id(repo.parent_id) if repo.parent_id else None
        source = self.repo_json(ctx, parent) if parent is not None else None
        return render.repository(
            ctx.urls, repo, owner, open_issues=open_issues, permissions=permissions, source=source
        )

    # -- repositories --------------------------------------------------------------------------

    def create_repo(self, ctx: Ctx, org: str | None, payload: Json) -> Repo:
        """``POST /user/repos`` (org None) or ``POST /orgs/{org}/repos``."""
        actor = self.signed_in(ctx)
        owner = actor if org is None else self._org_for(actor, org)
        name = payload.get("name")
        if not isinstance(name, str) or not valid_repo_name(name):
            raise Invalid(
                [{"resource": "Repository", "code": "custom", "field": "name", "message": "name is invalid"}]
            )
        if self.store.repo_by_name(owner.login, name) is not None:
            raise invalid_custom("Repository", "name already exists on this account", "name")
        private = bool(payload.get("private", False)) or payload.get("visibility") == "private"
        description = payload.get("description")
        branch = "main"
        repo = self.store.add_repo(
            owner.id,
            name,
            description=description if isinstance(description, str) else None,
            private=private,
            branch=branch,
        )
        path = self.repo_path(repo)
        gitops.init_bare(path, branch)
        if payload.get("auto_init"):
            gitops.auto_init(path, branch, actor.login, f"{actor.login}@users.noreply.localforge", name)
            self.store.mark_pushed(repo.id)
        fresh = self.store.repo_by_id(repo.id)
        assert fresh is not None
        return fresh

    def _org_for(self, actor: Account, login: str) -> Account:
        """The organization ``login``; created on first use with the caller as its member."""
        org = self.store.account_by_login(login)
        if org is None:
            org = self.store.add_account(login, AccountType.ORGANIZATION)
            self.store.add_org_member(org.id, actor.id)
            return org
        if org.type is not AccountType.ORGANIZATION:
            raise NotFound()
        if not (actor.site_admin or self.store.is_org_member(org.id, actor.id)):
            raise Forbidden("You need admin access to the organization before adding a repository to it.")
        return org

    def add_collaborator(self, ctx: Ctx, repo: Repo, login: str, permission: str) -> bool:
        """``PUT /collaborators/{user}``; True when the user was newly added."""
        self.require(ctx, repo, Role.ADMIN)
        account = self.store.account_by_login(login)
        if account is None or account.type is AccountType.ORGANIZATION:
            raise NotFound()
        aliases = {"read": Role.PULL, "write": Role.PUSH}
        role = aliases.get(permission) or (
            Role(permission) if permission in {r.value for r in Role} else None
        )
        if role is None:
            raise Invalid([{"resource": "Repository", "code": "invalid", "field": "permission"}])
        return self.store.set_collaborator(repo.id, account.id, role)

    def permission_of(self, ctx: Ctx, repo: Repo, login: str) -> tuple[Account, Role | None]:
        """``GET /collaborators/{user}/permission``: the user and their effective role."""
        self.require(ctx, repo, Role.PULL)
        account = self.store.account_by_login(login)
        if account is None:
            raise NotFound(f"{login} is not a user")
        return account, self.role(repo, account)

    def fork(self, ctx: Ctx, repo: Repo, payload: Json) -> Repo:
        """``POST /forks``: a copy owned by the caller (or ``organization``); an existing fork is reused."""
        actor = self.signed_in(ctx)
        org = payload.get("organization")
        owner = self._org_for(actor, org) if isinstance(org, str) and org else actor
        source = self.store.repo_by_id(repo.parent_id) if repo.parent_id else repo
        assert source is not None
        existing = self.store.network_repo(source, owner.id)
        if existing is not None:
            return existing
        name = payload.get("name") if isinstance(payload.get("name"), str) else repo.name
        if not valid_repo_name(name):
            raise Invalid(
                [{"resource": "Repository", "code": "custom", "field": "name", "message": "name is invalid"}]
            )
        if self.store.repo_by_name(owner.login, str(name)) is not None:
            raise invalid_custom("Repository", "name already exists on this account", "name")
        fork = self.store.add_repo(
            owner.id,
            str(name),
            description=repo.description,
            private=repo.private,
            branch=repo.default_branch,
            parent_id=source.id,
        )
        gitops.clone_bare(self.repo_path(repo), self.repo_path(fork))
        self.store.mark_pushed(fork.id)
        fresh = self.store.repo_by_id(fork.id)
        assert fresh is not None
        return fresh

    # -- refs and branches ---------------------------------------------------------------------

    def refs_changed(self, ctx: Ctx, repo: Repo, before: dict[str, str], after: dict[str, str]) -> None:
        """Announce the refs that moved (called with the repository lock held)."""
        if before == after:
            return
        self.store.mark_pushed(repo.id)
        for listener in self.ref_listeners:
            listener(ctx, repo, before, after)

    def branches(self, repo: Repo) -> list[tuple[str, str]]:
        path = self.repo_path(repo)
        return [(name.removeprefix("refs/heads/"), sha) for name, sha, _ in gitops.refs(path, "refs/heads/")]

    def branch(self, repo: Repo, name: str) -> gitops.CommitInfo:
        path = self.repo_path(repo)
        sha = dict(self.branches(repo)).get(name)
        if sha is None:
            raise NotFound("Branch not found")
        return gitops.commit_info(path, sha)

    def commit(self, repo: Repo, ref: str) -> tuple[gitops.CommitInfo, list[gitops.FileChange]]:
        """A commit (by sha, branch or tag) and its changes against its first parent."""
        path = self.repo_path(repo)
        sha = gitops.resolve(path, ref) if not ref.startswith("-") else None
        if sha is None or gitops.object_type(path, sha) != "commit":
            raise Invalid(message=f"No commit found for SHA: {ref}")
        info = gitops.commit_info(path, sha)
        parent = info.parents[0] if info.parents else gitops.EMPTY_TREE
        return info, gitops.diff_files(path, parent, sha)

    # -- webhooks ------------------------------------------------------------------------------

    def _target(self, hook: Hook) -> Target:
        return Target(hook.url, hook.secret, hook.events, hook_id=hook.id, repo_id=hook.repo_id)

    def envelope(self, ctx: Ctx, repo: Repo) -> Json:
        owner = self.account(repo.owner_id)
        out: Json = {"repository": self.repo_json(Ctx(None, ctx.urls), repo)}
        if owner.type is AccountType.ORGANIZATION:
            out["organization"] = render.organization(ctx.urls, owner)
        if ctx.actor is not None:
            out["sender"] = render.user(ctx.urls, ctx.actor)
        return out

    def emit(self, ctx: Ctx, repo: Repo, event: str, payload: Json) -> None:
        """Send ``event`` with ``payload`` plus ``repository``/``organization``/``sender`` to every hook."""
        targets = [self._target(h) for h in self.store.hooks(repo.id) if h.active]
        if self.global_target is not None:
            targets.append(Target(**{**self.global_target.__dict__, "repo_id": repo.id}))
        if not targets:
            return
        envelope = self.envelope(ctx, repo)
        if event == "push":  # GitHub's push payloads carry these two as Unix timestamps
            shown = envelope["repository"]
            shown.update(created_at=_epoch(shown["created_at"]), pushed_at=_epoch(shown["pushed_at"]))
        self.dispatcher.send(targets, event, {**payload, **envelope})


def _epoch(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())

"""Pull requests: create, list, read, edit, draft state, and the git views (files, commits, diff).

A PR's ``head.sha`` and ``base.sha`` are taken from the forge's own repositories when the PR is
opened and whenever its branches move (by ``git push`` or the refs API); the client never sets
them. Files and commits use GitHub's three-dot semantics: from the merge base of base and head.
The head commit is also kept under ``refs/pull/N/head`` of the base repository, as on GitHub, so
the PR stays readable after its branch is deleted and works for heads in another repository.
"""

from __future__ import annotations

from typing import Any

from controller.localforge import gitfiles, gitops, render, render_pulls, triage_view
from controller.localforge.errors import Forbidden, NotFound, invalid_custom, invalid_field
from controller.localforge.models import ROLE_RANK, Pull, Repo, Role
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]

_SORTS = {"created": "created_at", "updated": "updated_at", "popularity": "id", "long-running": "created_at"}


class Pulls:
    """Pull-request operations of one forge."""

    def __init__(self, forge: Forge) -> None:
        self.forge = forge
        forge.ref_listeners.append(self.on_refs_changed)

    # -- reading -------------------------------------------------------------------------------

    def get(self, repo: Repo, number: int) -> Pull:
        pull = self.forge.store.pull_by_number(repo.id, number)
        if pull is None:
            raise NotFound()
        return pull

    def listing(self, repo: Repo, params: dict[str, str]) -> list[Pull]:
        """``GET /pulls`` filters; ``head`` needs ``owner:branch`` (a bare branch is ignored, like GitHub)."""
        where: dict[str, Any] = {}
        state = params.get("state", "open")
        if state in {"open", "closed"}:
            where["state"] = state
        head = params.get("head", "")
        if ":" in head:
            owner, branch = head.split(":", 1)
            head_repo = self.head_repo(repo, owner)
            where.update(head_repo_id=head_repo.id if head_repo else -1, head_ref=branch)
        if params.get("base"):
            where["base_ref"] = params["base"]
        sort = params.get("sort", "created")
        column = _SORTS.get(sort, "created_at")
        default = "desc" if sort == "created" else "asc"
        direction = params.get("direction", default)
        direction = direction if direction in {"asc", "desc"} else default
        return self.forge.store.pulls(repo.id, where, f"{column} {direction}, id {direction}")

    def merge_base(self, repo: Repo, pull: Pull) -> str:
        path = self.forge.repo_path(repo)
        return gitops.merge_base(path, pull.base_sha, pull.head_sha) or pull.base_sha

    def files(self, repo: Repo, pull: Pull) -> list[gitops.FileChange]:
        return gitops.diff_files(self.forge.repo_path(repo), self.merge_base(repo, pull), pull.head_sha)

    def commits(self, repo: Repo, pull: Pull) -> list[gitops.CommitInfo]:
        return gitops.commits_between(self.forge.repo_path(repo), pull.base_sha, pull.head_sha)

    def diff(self, repo: Repo, pull: Pull) -> str:
        return gitops.diff_text(self.forge.repo_path(repo), self.merge_base(repo, pull), pull.head_sha)

    def patch(self, repo: Repo, pull: Pull) -> str:
        return gitops.format_patch(self.forge.repo_path(repo), self.merge_base(repo, pull), pull.head_sha)

    def stats(self, repo: Repo, pull: Pull) -> Json:
        path = self.forge.repo_path(repo)
        files, additions, deletions = gitops.shortstat(path, self.merge_base(repo, pull), pull.head_sha)
        store = self.forge.store
        return {
            "comments": store.count("issue_comments", {"repo_id": repo.id, "number": pull.number}),
            "review_comments": store.count("review_comments", {"pull_id": pull.id}),
            "commits": gitops.count_commits(path, pull.base_sha, pull.head_sha),
            "additions": additions,
            "deletions": deletions,
            "changed_files": files,
            # GitHub computes this in the background and answers null until it has; here it is
            # computed on each read (a trial merge writes objects, never a ref). Closed: null.
            "mergeable": gitfiles.merges_cleanly(path, pull.base_sha, pull.head_sha)
            if pull.state == "open"
            else None,
        }

    def to_json(self, ctx: Ctx, pull: Pull, *, full: bool = True) -> Json:
        """``pull-request`` (full) or ``pull-request-simple`` JSON of ``pull``."""
        forge, urls = self.forge, ctx.urls
        repo = self._repo(pull.repo_id)
        head_repo = repo if pull.head_repo_id == repo.id else self._repo(pull.head_repo_id)
        base_json = forge.repo_json(ctx, repo)
        head_json = base_json if head_repo is repo else forge.repo_json(ctx, head_repo)
        author = forge.account(pull.user_id)
        head_owner, base_owner = forge.account(head_repo.owner_id), forge.account(repo.owner_id)
        parts = {
            "repo": repo,
            "user": render.user(urls, author),
            "head": render_pulls.pr_side(
                urls, head_repo, head_owner, pull.head_ref, pull.head_sha, head_json
            ),
            "base": render_pulls.pr_side(urls, repo, base_owner, pull.base_ref, pull.base_sha, base_json),
            "triage": triage_view.pull_fields(forge, ctx, repo, pull),
        }
        stats = self.stats(repo, pull) if full else None
        return render_pulls.pull_request(urls, pull, parts, forge.association(repo, author), stats)

    def _repo(self, repo_id: int) -> Repo:
        repo = self.forge.store.repo_by_id(repo_id)
        if repo is None:
            raise NotFound()
        return repo

    # -- writing -------------------------------------------------------------------------------

    def head_repo(self, repo: Repo, owner: str, name: Any = None) -> Repo | None:
        """``owner``'s repository in ``repo``'s fork network (``name`` picks one explicitly)."""
        account = self.forge.store.account_by_login(owner)
        if account is None:
            return None
        if isinstance(name, str) and name:
            return self.forge.store.repo_by_name(account.login, name)
        return self.forge.store.network_repo(repo, account.id)

    def _head(self, ctx: Ctx, repo: Repo, head: Any, head_repo_name: Any) -> tuple[Repo, str]:
        if not isinstance(head, str) or not head:
            raise invalid_field("PullRequest", "head", "missing_field")
        owner, _, branch = head.rpartition(":")
        if not owner and not head_repo_name:
            return repo, branch
        found = self.head_repo(repo, owner or repo.owner_login, head_repo_name)
        if found is None or self.forge.role(found, ctx.actor) is None:
            raise invalid_field("PullRequest", "head")
        return found, branch

    def create(self, ctx: Ctx, repo: Repo, payload: Json) -> Pull:
        """``POST /pulls`` with GitHub's validation order and its duplicate-PR 422."""
        actor = self.forge.require(ctx, repo, Role.PULL)
        title = payload.get("title")
        if not isinstance(title, str) or not title.strip():
            raise invalid_field("PullRequest", "title", "missing_field")
        base = payload.get("base")
        if not isinstance(base, str) or not base:
            raise invalid_field("PullRequest", "base", "missing_field")
        head_repo, head_ref = self._head(ctx, repo, payload.get("head"), payload.get("head_repo"))
        base_sha = dict(self.forge.branches(repo)).get(base)
        if base_sha is None:
            raise invalid_field("PullRequest", "base")
        head_sha = dict(self.forge.branches(head_repo)).get(head_ref)
        if head_sha is None:
            raise invalid_field("PullRequest", "head")
        label = f"{head_repo.owner_login}:{head_ref}"
        if self._open_duplicate(repo, head_repo, head_ref, base) is not None:
            raise invalid_custom("PullRequest", f"A pull request already exists for {label}.")
        path = self.forge.repo_path(repo)
        if head_repo is not repo:
            gitops.fetch_commit(path, self.forge.repo_path(head_repo), head_sha)
        if gitops.is_ancestor(path, head_sha, base_sha):
            raise invalid_custom("PullRequest", f"No commits between {base} and {head_ref}")
        body = payload.get("body")
        values = {
            "title": title,
            "body": body if isinstance(body, str) else None,
            "draft": bool(payload.get("draft")),
            "head_repo_id": head_repo.id,
            "head_ref": head_ref,
            "head_sha": head_sha,
            "base_ref": base,
            "base_sha": base_sha,
        }
        pull = self.forge.store.add_pull(repo.id, actor.id, values)
        gitops.set_ref(path, f"refs/pull/{pull.number}/head", head_sha)
        self.emit(ctx, repo, pull, "opened")
        return pull

    def _open_duplicate(self, repo: Repo, head_repo: Repo, head_ref: str, base: str) -> Pull | None:
        where = {"state": "open", "head_repo_id": head_repo.id, "head_ref": head_ref, "base_ref": base}
        found = self.forge.store.pulls(repo.id, where, "id")
        return found[0] if found else None

    def _require_editor(self, ctx: Ctx, repo: Repo, pull: Pull) -> None:
        actor = self.forge.require(ctx, repo, Role.PULL)
        role = self.forge.role(repo, actor) or Role.PULL
        if actor.id != pull.user_id and ROLE_RANK[role] < ROLE_RANK[Role.PUSH]:
            raise Forbidden("Must have push access to edit this pull request.")

    def update(self, ctx: Ctx, repo: Repo, pull: Pull, payload: Json) -> Pull:
        """``PATCH /pulls/{n}``: title, body, base, state (closed/open)."""
        self._require_editor(ctx, repo, pull)
        values: dict[str, Any] = {}
        changes: Json = {}
        for key in ("title", "body"):
            if key in payload and payload[key] != getattr(pull, key):
                if not isinstance(payload[key], str) and not (key == "body" and payload[key] is None):
                    raise invalid_field("PullRequest", key)
                values[key] = payload[key]
                changes[key] = {"from": getattr(pull, key)}
        if "base" in payload and payload["base"] != pull.base_ref:
            sha = dict(self.forge.branches(repo)).get(str(payload["base"]))
            if sha is None:
                raise invalid_field("PullRequest", "base")
            values.update(base_ref=payload["base"], base_sha=sha)
            changes["base"] = {"ref": {"from": pull.base_ref}, "sha": {"from": pull.base_sha}}
        action = self._state_change(repo, pull, payload.get("state"), values)
        if action == "closed" and ctx.actor is not None:
            values["closed_by"] = ctx.actor.id
        if not values:
            return pull
        updated = self.forge.store.update_pull(pull.id, **values)
        if changes:
            self.emit(ctx, repo, updated, "edited", changes=changes)
        if action is not None:
            self.emit(ctx, repo, updated, action)
        return updated

    def _state_change(self, repo: Repo, pull: Pull, state: Any, values: dict[str, Any]) -> str | None:
        if state is None or state == pull.state:
            return None
        if state == "closed":
            values.update(state="closed", closed_at=self.forge.store.now())
            return "closed"
        if state == "open":
            head_repo = self._repo(pull.head_repo_id)
            if self._open_duplicate(repo, head_repo, pull.head_ref, values.get("base_ref", pull.base_ref)):
                label = f"{head_repo.owner_login}:{pull.head_ref}"
                raise invalid_custom("PullRequest", f"A pull request already exists for {label}.")
            values.update(state="open", closed_at=None, closed_by=None)
            return "reopened"
        raise invalid_field("PullRequest", "state")

    def set_draft(self, ctx: Ctx, pull: Pull, draft: bool) -> Pull:
        """The GraphQL draft mutations; GitHub fires ``converted_to_draft`` / ``ready_for_review``."""
        repo = self._repo(pull.repo_id)
        self._require_editor(ctx, repo, pull)
        if pull.draft == draft:
            return pull
        updated = self.forge.store.update_pull(pull.id, draft=draft)
        self.emit(ctx, repo, updated, "converted_to_draft" if draft else "ready_for_review")
        return updated

    def emit(self, ctx: Ctx, repo: Repo, pull: Pull, action: str, **extra: Any) -> None:
        payload = {"action": action, "number": pull.number, **extra, "pull_request": self.to_json(ctx, pull)}
        self.forge.emit(ctx, repo, "pull_request", payload)

    # -- following branches --------------------------------------------------------------------

    def on_refs_changed(self, ctx: Ctx, repo: Repo, before: dict[str, str], after: dict[str, str]) -> None:
        """Move PR heads and bases with their branches; a moved head fires ``synchronize``."""
        for ref in sorted(set(before) | set(after)):
            new = after.get(ref)
            if not ref.startswith("refs/heads/") or new is None or before.get(ref) == new:
                continue
            branch = ref.removeprefix("refs/heads/")
            for pull in self.forge.store.pulls_on_branch(repo.id, branch):
                if pull.head_repo_id == repo.id and pull.head_ref == branch:
                    self._move_head(ctx, repo, pull, new)
                if pull.repo_id == repo.id and pull.base_ref == branch:
                    self.forge.store.update_pull(pull.id, base_sha=new, updated_at=pull.updated_at)

    def _move_head(self, ctx: Ctx, head_repo: Repo, pull: Pull, sha: str) -> None:
        base_repo = head_repo if pull.repo_id == head_repo.id else self._repo(pull.repo_id)
        path = self.forge.repo_path(base_repo)
        ref = f"refs/pull/{pull.number}/head"
        if base_repo is head_repo:
            gitops.set_ref(path, ref, sha)
        else:
            gitops.fetch_commit(path, self.forge.repo_path(head_repo), sha)
            gitops.set_ref(path, ref, sha)
        updated = self.forge.store.update_pull(pull.id, head_sha=sha)
        self.emit(ctx, base_repo, updated, "synchronize", before=pull.head_sha, after=sha)

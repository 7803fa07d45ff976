"""The git references API (``/git/ref``, ``/git/refs``, ``/git/matching-refs``).

Ref updates through REST obey the same rule as pushes: no non-fast-forward move without
``force``. Every change is announced through ``Forge.refs_changed`` exactly like a push, so pull
requests follow their branches however a branch moved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.localforge import gitops
from controller.localforge.errors import Conflict, Invalid, NotFound
from controller.localforge.models import Repo, Role
from controller.localforge.service import Ctx, Forge


def _writable(ref: str) -> None:
    """``refs/pull/*`` belong to the forge (they pin PR heads): no client may write them."""
    if ref.startswith("refs/pull/"):
        raise Invalid(message="Reference cannot be updated")


class Refs:
    """Reference operations of one forge."""

    def __init__(self, forge: Forge) -> None:
        self.forge = forge

    def _nonempty(self, repo: Repo) -> Path:
        path = self.forge.repo_path(repo)
        if not gitops.refs(path, "refs/heads/"):
            raise Conflict("Git Repository is empty.")
        return path

    def get_ref(self, repo: Repo, ref: str) -> tuple[str, str, str]:
        """``GET /git/ref/{ref}`` with ``ref`` like ``heads/main``."""
        full = f"refs/{ref.removeprefix('refs/')}"
        for name, sha, kind in gitops.refs(self._nonempty(repo), full):
            if name == full:
                return name, sha, kind
        raise NotFound()

    def matching_refs(self, repo: Repo, prefix: str) -> list[tuple[str, str, str]]:
        full = f"refs/{prefix.removeprefix('refs/')}"
        return [r for r in gitops.refs(self._nonempty(repo)) if r[0].startswith(full)]

    def create_ref(self, ctx: Ctx, repo: Repo, ref: Any, sha: Any) -> tuple[str, str, str]:
        self.forge.require(ctx, repo, Role.PUSH)
        if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2:
            raise Invalid(message="Reference name must start with 'refs/' and have at least two slashes.")
        _writable(ref)
        path = self.forge.repo_path(repo)
        kind = gitops.object_type(path, sha) if isinstance(sha, str) else None
        if kind is None or not isinstance(sha, str):
            raise Invalid(message="Object does not exist")
        with self.forge.repo_lock(repo):
            before = gitops.snapshot(path)
            if not gitops.update_ref(path, ref, sha, None):
                raise Invalid(message="Reference already exists")
            self.forge.refs_changed(ctx, repo, before, gitops.snapshot(path))
        return ref, sha, kind

    def update_ref(self, ctx: Ctx, repo: Repo, ref: str, sha: Any, force: bool) -> tuple[str, str, str]:
        self.forge.require(ctx, repo, Role.PUSH)
        path = self.forge.repo_path(repo)
        full = f"refs/{ref.removeprefix('refs/')}"
        _writable(full)
        if not isinstance(sha, str) or gitops.object_type(path, sha) is None:
            raise Invalid(message="Object does not exist")
        with self.forge.repo_lock(repo):
            before = gitops.snapshot(path)
            old = before.get(full)
            if old is None:
                raise Invalid(message="Reference does not exist")
            if not force and not gitops.is_ancestor(path, old, sha):
                raise Invalid(message="Update is not a fast forward")
            if not gitops.update_ref(path, full, sha, old):
                raise Invalid(message="Reference cannot be updated")
            self.forge.refs_changed(ctx, repo, before, gitops.snapshot(path))
        return full, sha, gitops.object_type(path, sha) or "commit"

    def delete_ref(self, ctx: Ctx, repo: Repo, ref: str) -> None:
        self.forge.require(ctx, repo, Role.PUSH)
        path = self.forge.repo_path(repo)
        full = f"refs/{ref.removeprefix('refs/')}"
        with self.forge.repo_lock(repo):
            before = gitops.snapshot(path)
            if full not in before or full.startswith("refs/pull/"):
                raise Invalid(message="Reference does not exist")
            gitops.delete_ref(path, full, before[full])
            self.forge.refs_changed(ctx, repo, before, gitops.snapshot(path))


class PushEvents:
    """Sends GitHub's ``push`` webhook for every branch or tag a change moved (not ``refs/pull``)."""

    MAX_COMMITS = 20  # GitHub lists at most 20 commits in a push payload

    def __init__(self, forge: Forge) -> None:
        self.forge = forge
        forge.ref_listeners.append(self.on_refs_changed)

    def on_refs_changed(self, ctx: Ctx, repo: Repo, before: dict[str, str], after: dict[str, str]) -> None:
        for ref in sorted(set(before) | set(after)):
            old, new = before.get(ref), after.get(ref)
            if old != new and ref.startswith(("refs/heads/", "refs/tags/")):
                self.forge.emit(ctx, repo, "push", self._payload(ctx, repo, ref, old, new))

    def _payload(self, ctx: Ctx, repo: Repo, ref: str, old: str | None, new: str | None) -> dict[str, Any]:
        path = self.forge.repo_path(repo)
        web = f"{ctx.urls.web}/{repo.full_name}"
        infos = gitops.commits_between(path, old, new) if old and new else []
        if new and not old:
            infos = [gitops.commit_info(path, new)]
        commits = [self._commit(web, info) for info in infos[-self.MAX_COMMITS :]]
        login = ctx.actor.login if ctx.actor else "localforge"
        return {
            "ref": ref,
            "before": old or gitops.ZERO_SHA,
            "after": new or gitops.ZERO_SHA,
            "created": old is None,
            "deleted": new is None,
            "forced": bool(old and new and not gitops.is_ancestor(path, old, new)),
            "base_ref": None,
            "compare": f"{web}/compare/{(old or gitops.ZERO_SHA)[:12]}...{(new or gitops.ZERO_SHA)[:12]}",
            "commits": commits,
            "head_commit": commits[-1] if commits else None,
            "pusher": {"name": login, "email": f"{login}@users.noreply.localforge"},
        }

    def _commit(self, web: str, info: gitops.CommitInfo) -> dict[str, Any]:
        return {
            "id": info.sha,
            "tree_id": info.tree,
            "distinct": True,
            "message": info.message,
            "timestamp": info.committer_date,
            "url": f"{web}/commit/{info.sha}",
            "author": {"name": info.author_name, "email": info.author_email},
            "committer": {"name": info.committer_name, "email": info.committer_email},
        }

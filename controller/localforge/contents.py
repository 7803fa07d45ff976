"""The contents API (read a file or a directory, create or update one file) and ``compare``.

Both exist for bots that work without a checkout: a bot reads a config file, writes one file on a
branch and opens a pull request from it, all over REST, as Renovate and Dependabot's smaller cousins
do. A write is a commit on the branch's head made with git plumbing (``gitfiles``) and announced
through ``Forge.refs_changed`` like a push, so ``push`` webhooks fire and open pull requests follow.
GitHub's rules: updating an existing file needs its blob ``sha`` (409 when it is stale), a new file
must not pass one, ``content`` is base64, ``message`` is required.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from controller.localforge import gitfiles, gitops, render
from controller.localforge.errors import Conflict, Invalid, NotFound, invalid_custom
from controller.localforge.gitfiles import Person, TreeEntry
from controller.localforge.models import Repo, Role
from controller.localforge.render import Urls
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]

_KINDS = {"blob": "file", "tree": "dir", "commit": "submodule"}


@dataclass(frozen=True)
class Found:
    """What a contents read found: one file (``entry.kind == "blob"``) or a directory's entries."""

    repo: Repo
    commit: str
    entry: TreeEntry
    children: list[TreeEntry]


def _clean_path(path: str) -> str:
    parts = [p for p in path.strip("/").split("/") if p]
    if any(p in {".", ".."} for p in parts):
        raise NotFound()
    return "/".join(parts)


class Contents:
    """Contents and compare operations of one forge."""

    def __init__(self, forge: Forge) -> None:
        self.forge = forge

    def _commit(self, repo: Repo, ref: str | None) -> str:
        path = self.forge.repo_path(repo)
        wanted = ref or repo.default_branch
        sha = gitops.resolve(path, wanted) if not wanted.startswith("-") else None
        if sha is None:
            if not gitops.refs(path, "refs/heads/"):
                raise NotFound("This repository is empty.")
            raise NotFound(f"No commit found for the ref {wanted}")
        return sha

    def read(self, repo: Repo, filepath: str, ref: str | None) -> Found:
        """The file or directory at ``filepath`` of ``ref`` (default: the default branch)."""
        commit = self._commit(repo, ref)
        clean = _clean_path(filepath)
        path = self.forge.repo_path(repo)
        found = gitfiles.entry(path, commit, clean)
        if found is None:
            raise NotFound()
        kids = gitfiles.children(path, commit, clean) if found.kind == "tree" else []
        return Found(repo, commit, found, kids)

    def raw(self, found: Found) -> bytes:
        return gitfiles.blob(self.forge.repo_path(found.repo), found.entry.sha)

    def write(self, ctx: Ctx, repo: Repo, filepath: str, body: Json) -> tuple[bool, str, TreeEntry]:
        """``PUT /contents/{path}``: ``(created, commit sha, the file's new entry)``."""
        actor = self.forge.require(ctx, repo, Role.PUSH)
        clean = _clean_path(filepath)
        if not clean:
            raise NotFound()
        message, content = body.get("message"), body.get("content")
        for name, value in (("message", message), ("content", content)):
            if not isinstance(value, str):
                raise Invalid(message=f'Invalid request.\n\n"{name}" wasn\'t supplied.')
        assert isinstance(message, str) and isinstance(content, str)
        try:
            data = base64.b64decode(content, validate=False)
        except (binascii.Error, ValueError):
            raise invalid_custom("Content", "content is not valid Base64", "content") from None
        branch = body.get("branch") or repo.default_branch
        if not isinstance(branch, str):
            raise Invalid(message="Invalid request.\n\nFor 'properties/branch', it is not a string.")
        default = Person(actor.login, f"{actor.login}@users.noreply.localforge")
        committer = _person(body.get("committer"), "committer", default)
        author = _person(body.get("author"), "author", committer)
        path = self.forge.repo_path(repo)
        ref = f"refs/heads/{branch}"
        with self.forge.repo_lock(repo):
            before = gitops.snapshot(path)
            parent = before.get(ref)
            if parent is None:
                raise NotFound(f"Branch {branch} not found")
            existing = gitfiles.entry(path, parent, clean)
            if existing is not None and existing.kind != "blob":
                raise invalid_custom("Content", f"{clean} is a directory", "path")
            self._check_sha(clean, existing, body.get("sha"))
            sha = gitfiles.commit_file(path, parent, clean, data, message, author, committer)
            if not gitops.update_ref(path, ref, sha, parent):
                raise Conflict(f"{branch} was updated meanwhile; try again")
            self.forge.refs_changed(ctx, repo, before, gitops.snapshot(path))
        written = gitfiles.entry(path, sha, clean)
        assert written is not None
        return existing is None, sha, written

    @staticmethod
    def _check_sha(filepath: str, existing: TreeEntry | None, given: Any) -> None:
        if existing is None:
            if given is not None:
                raise Conflict(f"{filepath} does not match {given}")
            return
        if given is None:
            raise Invalid(message='Invalid request.\n\n"sha" wasn\'t supplied.')
        if given != existing.sha:
            raise Conflict(f"{filepath} does not match {given}")

    def compare(self, repo: Repo, basehead: str) -> tuple[str, str, str]:
        """``(base sha, head sha, merge base)`` of ``BASE...HEAD`` (``owner:branch`` sides must name
        this repository's owner or a fork's, whose commits are fetched in as for pull requests)."""
        base, sep, head = basehead.partition("...")
        if not sep or not base or not head:
            raise NotFound()
        base_sha, head_sha = self._side(repo, base), self._side(repo, head)
        merge_base = gitops.merge_base(self.forge.repo_path(repo), base_sha, head_sha)
        if merge_base is None:
            raise NotFound(f"No common ancestor between {base} and {head}.")
        return base_sha, head_sha, merge_base

    def _side(self, repo: Repo, side: str) -> str:
        owner, colon, ref = side.rpartition(":")
        path = self.forge.repo_path(repo)
        if colon and owner.lower() != repo.owner_login.lower():
            account = self.forge.store.account_by_login(owner)
            fork = self.forge.store.network_repo(repo, account.id) if account is not None else None
            if fork is None:
                raise NotFound()
            sha = gitops.resolve(self.forge.repo_path(fork), ref)
            if sha is None:
                raise NotFound()
            gitops.fetch_commit(path, self.forge.repo_path(fork), sha)
            return sha
        sha = gitops.resolve(path, ref) if not ref.startswith("-") else None
        if sha is None:
            raise NotFound()
        return sha


def _person(value: Any, name: str, default: Person) -> Person:
    if value is None:
        return default
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise Invalid(message=f'Invalid request.\n\n"name" wasn\'t supplied for "{name}".')
    if not isinstance(value.get("email"), str):
        raise Invalid(message=f'Invalid request.\n\n"email" wasn\'t supplied for "{name}".')
    date = value.get("date")
    return Person(value["name"], value["email"], date if isinstance(date, str) else None)


# -- rendering ---------------------------------------------------------------------------------


def item(urls: Urls, repo: Repo, ref: str, entry: TreeEntry, content: bytes | None = None) -> Json:
    """GitHub's ``content-file`` (with ``content``) or an item of ``content-directory``."""
    api = urls.repo_api(repo)
    kind = _KINDS.get(entry.kind, "file")
    quoted = quote(entry.path)
    self_url = f"{api}/contents/{quoted}?ref={quote(ref)}"
    git_kind = {"file": "blobs", "dir": "trees"}.get(kind)
    git_url = f"{api}/git/{git_kind}/{entry.sha}" if git_kind else None
    web = f"{urls.web}/{repo.full_name}"
    html_url = f"{web}/{'tree' if kind == 'dir' else 'blob'}/{quote(ref)}/{quoted}"
    out: Json = {
        "type": kind,
        "size": entry.size,
        "name": entry.name,
        "path": entry.path,
        "sha": entry.sha,
        "url": self_url,
        "git_url": git_url,
        "html_url": html_url,
        "download_url": f"{web}/raw/{quote(ref)}/{quoted}" if kind == "file" else None,
        "_links": {"self": self_url, "git": git_url, "html": html_url},
    }
    if content is not None:
        encoded = base64.b64encode(content).decode()
        # GitHub wraps the base64 at 60 characters a line, each line ending in "\n".
        out["content"] = "".join(encoded[i : i + 60] + "\n" for i in range(0, len(encoded), 60))
        out["encoding"] = "base64"
    return out


def file_commit(urls: Urls, repo: Repo, branch: str, info: gitops.CommitInfo, entry: TreeEntry) -> Json:
    """GitHub's ``file-commit``: the new file and the git commit that wrote it."""
    shown = render.commit(urls, repo, info)
    commit = dict(shown["commit"])
    commit.update(sha=info.sha, node_id=shown["node_id"], html_url=shown["html_url"])
    commit["parents"] = shown["parents"]
    commit.pop("comment_count", None)
    return {"content": item(urls, repo, branch, entry), "commit": commit}

"""Fixtures for the forge adapter's tests: the local forge served over real HTTP in this process
(with a request log), ``GithubForge`` pointed at it, ``FakeForge``, and a ``Harness`` that lets one
contract suite set the scene (push a branch, add a collaborator, close a PR as a person) on either.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
import requests
from starlette.types import ASGIApp, Receive, Scope, Send

from controller.forge.auth import ForgeCredentials
from controller.forge.base import Forge
from controller.forge.github import GithubForge
from controller.localforge.app import create_app
from controller.localforge.server import ForgeHandle, serve_in_thread
from controller.localforge.users import add_user
from tests.conftest import git
from tests.forge.fakes import FakeForge, fake_sha
from tests.support.clock import Ahead, Sleeps

OWNER, COLLABORATOR, STRANGER = "alice", "bob", "carol"
REPO = f"{OWNER}/demo"


class RequestLog:
    """ASGI middleware in front of the forge: every ``/api/`` request as (method, path, query)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[tuple[str, str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            self.seen.append((scope["method"], scope["path"], scope.get("query_string", b"").decode()))
        await self.app(scope, receive, send)

    def count(self, method: str, suffix: str = "") -> int:
        return sum(1 for m, path, _ in self.seen if m == method and path.endswith(suffix))


@dataclass
class LocalForge:
    """A running local forge with users alice (owner of alice/demo), bob and carol."""

    handle: ForgeHandle
    log: RequestLog
    tokens: dict[str, str]
    work: Path
    checkout: Path
    clock: Ahead  # the forge's: ``clock.advance(1.1)`` is past the second of its last write, no sleep

    def api(self, method: str, path: str, user: str = OWNER, **kwargs: Any) -> requests.Response:
        """A raw REST call as ``user`` (test set-up only; the adapter is what is under test)."""
        headers = {"Authorization": f"token {self.tokens[user]}"}
        response = requests.request(
            method, f"{self.handle.api_url}{path}", headers=headers, timeout=10, **kwargs
        )
        assert response.status_code < 300, (method, path, response.status_code, response.text)
        return response

    def forge(self, sleeps: Sleeps | None = None, user: str = OWNER, **options: Any) -> GithubForge:
        sleeps = sleeps or Sleeps()
        options = {"write_interval": 0.0, "sleep": sleeps.sleep, "clock": sleeps.clock, **options}
        return GithubForge(self.handle.api_url, ForgeCredentials.for_token(self.tokens[user]), **options)

    def push_branch(self, branch: str, files: dict[str, str]) -> str:
        """A new commit on ``branch`` (started from main if new), pushed as alice over git."""
        existing = git(self.checkout, "branch", "--list", branch)
        if existing:
            git(self.checkout, "checkout", "-q", branch)
        else:
            git(self.checkout, "checkout", "-q", "-b", branch, "origin/main")
        for rel, text in files.items():
            (self.checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.checkout / rel).write_text(text)
        git(self.checkout, "add", "-A")
        git(self.checkout, "commit", "-q", "--allow-empty", "-m", f"change on {branch}")
        header = f"http.extraHeader=Authorization: Bearer {self.tokens[OWNER]}"
        git(self.checkout, "-c", header, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
        return git(self.checkout, "rev-parse", "HEAD")


@pytest.fixture
def local_forge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalForge]:
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    root, work = tmp_path / "forge", tmp_path / "work"
    work.mkdir()
    tokens = {user: add_user(root, user) for user in (OWNER, COLLABORATOR, STRANGER)}
    clock = Ahead()
    app = create_app(root, clock=clock)
    log = RequestLog(app)
    with serve_in_thread(log) as url:
        handle = ForgeHandle(url, f"{url}/api/v3", root, app)
        checkout = work / "checkout"
        forge = LocalForge(handle, log, tokens, work, checkout, clock)
        forge.api("POST", "/user/repos", json={"name": "demo", "auto_init": True})
        git(work, "clone", "-q", f"{url}/{REPO}.git", str(checkout))
        git(checkout, "config", "user.email", "dev@example.com")
        git(checkout, "config", "user.name", "Dev")
        log.seen.clear()
        yield forge


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


# -- the contract harness -------------------------------------------------------------------------


class Harness(Protocol):
    """One ``Forge`` implementation plus the means to act as the people around it."""

    @property
    def forge(self) -> Forge: ...

    @property
    def full_name(self) -> str: ...

    @property
    def owner(self) -> str: ...

    def main_sha(self) -> str: ...

    def push_branch(self, branch: str, files: dict[str, str]) -> str: ...

    def add_collaborator(self, login: str, role: str) -> None: ...

    def close_pull(self, number: int) -> None: ...

    def triage(self, number: int) -> Triage: ...

    def statuses(self, sha: str) -> list[tuple[str, str, str, str]]:
        """(context, state, description, target_url) of every commit status on ``sha``, newest first."""
        ...


@dataclass(frozen=True)
class Triage:
    """A PR's labels, requested reviewers (teams as ``team:<slug>``) and assignees, sorted."""

    labels: tuple[str, ...]
    requested: tuple[str, ...]
    assignees: tuple[str, ...]


@dataclass
class LocalHarness:
    local: LocalForge
    sleeps: Sleeps
    forge: Forge = field(init=False)
    full_name: str = REPO
    owner: str = OWNER

    def __post_init__(self) -> None:
        self.forge = self.local.forge(self.sleeps)

    def main_sha(self) -> str:
        return git(self.local.checkout, "rev-parse", "origin/main")

    def push_branch(self, branch: str, files: dict[str, str]) -> str:
        return self.local.push_branch(branch, files)

    def add_collaborator(self, login: str, role: str) -> None:
        self.local.api("PUT", f"/repos/{REPO}/collaborators/{login}", json={"permission": role})

    def close_pull(self, number: int) -> None:
        self.local.api("PATCH", f"/repos/{REPO}/pulls/{number}", json={"state": "closed"})

    def triage(self, number: int) -> Triage:
        labels = self.local.api("GET", f"/repos/{REPO}/issues/{number}/labels").json()
        requested = self.local.api("GET", f"/repos/{REPO}/pulls/{number}/requested_reviewers").json()
        issue = self.local.api("GET", f"/repos/{REPO}/issues/{number}").json()
        return Triage(
            tuple(sorted(label["name"] for label in labels)),
            tuple(
                sorted(
                    [user["login"] for user in requested["users"]]
                    + [f"team:{team['slug']}" for team in requested["teams"]]
                )
            ),
            tuple(sorted(user["login"] for user in issue["assignees"])),
        )

    def statuses(self, sha: str) -> list[tuple[str, str, str, str]]:
        listed = self.local.api("GET", f"/repos/{REPO}/commits/{sha}/statuses").json()
        return [(s["context"], s["state"], s["description"], s["target_url"] or "") for s in listed]


@dataclass
class FakeHarness:
    forge: FakeForge = field(default_factory=lambda: FakeForge(login=OWNER))
    full_name: str = REPO
    owner: str = OWNER
    pushes: int = 0

    def __post_init__(self) -> None:
        self.forge.add_repo(REPO)
        for login in (COLLABORATOR, STRANGER):
            self.forge.add_user(login)

    def main_sha(self) -> str:
        return self.forge.repos[REPO].branches["main"]

    def push_branch(self, branch: str, files: dict[str, str]) -> str:
        self.pushes += 1
        sha = fake_sha(f"{branch} {sorted(files.items())} {self.pushes}")
        self.forge.set_branch(REPO, branch, sha)
        return sha

    def add_collaborator(self, login: str, role: str) -> None:
        self.forge.add_collaborator(REPO, login, role)

    def close_pull(self, number: int) -> None:
        self.forge.close_pull(REPO, number)

    def triage(self, number: int) -> Triage:
        pull = self.forge._pull(REPO, number)
        return Triage(
            tuple(sorted(pull.labels)), tuple(sorted(pull.requested)), tuple(sorted(pull.assignees))
        )

    def statuses(self, sha: str) -> list[tuple[str, str, str, str]]:
        found = self.forge.reports.get(f"{REPO}@{sha}", [])
        return [(r.name, r.state, r.title, r.details_url) for r in reversed(found) if r.kind == "status"]


@pytest.fixture(params=["github-local", "fake"])
def harness(request: pytest.FixtureRequest, sleeps: Sleeps) -> Harness:
    if request.param == "fake":
        return FakeHarness()
    local: LocalForge = request.getfixturevalue("local_forge")
    return LocalHarness(local, sleeps)


def environ_with(extra: dict[str, str]) -> dict[str, str]:
    """The current environment plus ``extra`` (for git subprocesses)."""
    return {**os.environ, **extra}

"""Fixtures for the local forge: a forge served over real HTTP (uvicorn in a thread), its users,
PyGithub clients, git working copies that push over smart HTTP, and a webhook receiver.

Every ``/api/v3`` answer of a test is recorded and, at teardown, each JSON answer whose operation
is in GitHub's OpenAPI subset is validated against it: a shape error fails the test that caused it.
"""

from __future__ import annotations

import http.server
import json
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from github import Auth, Github
from github.PullRequest import PullRequest
from github.Repository import Repository

from controller.localforge.app import create_app
from controller.localforge.server import ForgeHandle, serve_in_thread
from controller.localforge.tls import ensure_certificate
from controller.localforge.users import add_org, add_team, add_user
from tests.conftest import git, make_repo
from tests.localforge.oracle import Recorder, validate
from tests.support import Clock
from tests.support.waiting import SHUTDOWN_POLL_S

USERS = ("alice", "bob", "carol")
BOT = "ci[bot]"


# The forge's clock (``tests.support.Clock``) starts here and moves only when a test says so.
FORGE_T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> str:
        return self.headers["x-github-event"]

    @property
    def payload(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A tiny webhook endpoint (stdlib ``http.server``) collecting deliveries."""

    url: str
    inbox: queue.Queue[Received] = field(default_factory=queue.Queue)

    def drain(self) -> list[Received]:
        items = []
        while not self.inbox.empty():
            items.append(self.inbox.get_nowait())
        return items


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    inbox: queue.Queue[Received] = queue.Queue()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            inbox.put(Received({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
    )
    thread.start()
    try:
        yield Receiver(f"http://127.0.0.1:{server.server_address[1]}/hook", inbox)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class Forge:
    """A running forge and helpers to act on it as its users."""

    handle: ForgeHandle
    recorder: Recorder
    tokens: dict[str, str]
    clock: Clock
    work: Path

    @property
    def url(self) -> str:
        return self.handle.url

    def gh(self, user: str = "alice", **kwargs: Any) -> Github:
        # PyGithub paces itself for github.com (0.25 s between requests, 1 s between writes): not here.
        options = {"retry": None, "seconds_between_requests": 0, "seconds_between_writes": 0, **kwargs}
        if self.handle.ca_file is not None:  # served with --tls: trust its certificate
            options.setdefault("verify", str(self.handle.ca_file))
        return Github(base_url=self.handle.api_url, auth=Auth.Token(self.tokens[user]), **options)

    def auth_header(self, user: str) -> str:
        return f"http.extraHeader=Authorization: Bearer {self.tokens[user]}"

    def clone(self, full_name: str, name: str) -> Path:
        dest = self.work / name
        trust = ["-c", f"http.sslCAInfo={self.handle.ca_file}"] if self.handle.ca_file else []
        git(self.work, *trust, "clone", "-q", f"{self.url}/{full_name}.git", str(dest))
        if self.handle.ca_file is not None:
            git(dest, "config", "http.sslCAInfo", str(self.handle.ca_file))
        git(dest, "config", "user.email", "dev@example.com")
        git(dest, "config", "user.name", "Dev")
        return dest

    def commit(self, checkout: Path, files: dict[str, str], message: str = "change") -> str:
        for rel, text in files.items():
            (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            (checkout / rel).write_text(text)
        git(checkout, "add", "-A")
        git(checkout, "commit", "-q", "-m", message)
        return git(checkout, "rev-parse", "HEAD")

    def push(self, checkout: Path, refspec: str, user: str = "alice") -> None:
        git(checkout, "-c", self.auth_header(user), "push", "-q", "origin", refspec)

    def repo_with_branch(
        self, name: str = "demo", files: dict[str, str] | None = None
    ) -> tuple[Repository, Path]:
        """alice/NAME with ``main`` (a README) and ``feature`` (adding ``files``), both pushed over git."""
        repo = self.gh().get_user().create_repo(name)
        checkout = make_repo(self.work / f"{name}-alice", {"README.md": f"# {name}\n"})
        if self.handle.ca_file is not None:
            git(checkout, "config", "http.sslCAInfo", str(self.handle.ca_file))
        git(checkout, "remote", "add", "origin", f"{self.url}/{repo.full_name}.git")
        git(checkout, "checkout", "-q", "-b", "feature")
        self.commit(checkout, files or {"app.py": "one\ntwo\nthree\n"}, "feature work")
        git(checkout, "-c", self.auth_header("alice"), "push", "-q", "origin", "main", "feature")
        return repo, checkout

    def team_repo_with_feature(self) -> Repository:
        """acme/lib, of the organization acme (alice a member) with its team perf-team ("Performance":
        bob), and a pushed ``feature`` branch: what a team review request needs."""
        add_org(self.handle.root, "acme", ["alice"])
        add_team(self.handle.root, "acme", "perf-team", ["bob"], name="Performance")
        repo = self.gh().get_organization("acme").create_repo("lib", auto_init=True)
        checkout = self.clone("acme/lib", "lib")
        git(checkout, "checkout", "-q", "-b", "feature")
        self.commit(checkout, {"app.py": "print(1)\n"})
        self.push(checkout, "feature")
        return repo

    def open_pull(self, name: str = "demo", **kwargs: Any) -> tuple[PullRequest, Path]:
        repo, checkout = self.repo_with_branch(name)
        pull = repo.create_pull(title="Speed up", body="Body", head="feature", base="main", **kwargs)
        return pull, checkout


class ForgeStarter:
    """Starts forges on one root (starting again after ``stop_all`` is a restart)."""

    def __init__(self, root: Path, work: Path) -> None:
        self.root, self.work = root, work
        self.tokens = {user: add_user(root, user) for user in USERS}
        self.tokens["admin"] = add_user(root, "admin", admin=True)
        self.tokens[BOT] = add_user(root, BOT)  # a GitHub App's bot: only Apps create check runs
        self.clock = Clock(FORGE_T0)
        self.recorders: list[Recorder] = []
        self._running: list[Any] = []

    def __call__(self, *, tls: bool = False, **options: Any) -> Forge:
        app = create_app(self.root, clock=self.clock, **options)
        recorder = Recorder(app)
        self.recorders.append(recorder)
        files = ensure_certificate(self.root) if tls else None
        context = serve_in_thread(recorder, tls=files)
        url = context.__enter__()
        self._running.append(context)
        handle = ForgeHandle(url, f"{url}/api/v3", self.root, app, files.cert if files else None)
        return Forge(handle, recorder, self.tokens, self.clock, self.work)

    def stop_all(self) -> None:
        while self._running:
            self._running.pop().__exit__(None, None, None)


@pytest.fixture
def forge_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ForgeStarter]:
    """Start forges; every started forge's answers are validated against the oracle at teardown."""
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    (tmp_path / "work").mkdir()
    starter = ForgeStarter(tmp_path / "forge", tmp_path / "work")
    try:
        yield starter
    finally:
        starter.stop_all()
    failures = [f for r in starter.recorders for f in validate(r.exchanges)[0]]
    assert not failures, "answers that do not match GitHub's OpenAPI description:\n" + "\n".join(failures)


@pytest.fixture
def forge(forge_factory: ForgeStarter) -> Forge:
    return forge_factory()


@pytest.fixture
def api(forge: Forge) -> Iterator[Any]:
    """``api(user)``: an httpx client on the forge's REST root, authenticated as ``user``."""
    clients: list[httpx.Client] = []

    def client(user: str = "alice") -> httpx.Client:
        headers = {"Authorization": f"token {forge.tokens[user]}"}
        made = httpx.Client(base_url=forge.handle.api_url, headers=headers, timeout=30)
        clients.append(made)
        return made

    yield client
    for made in clients:
        made.close()

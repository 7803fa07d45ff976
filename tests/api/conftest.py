"""Fixtures of the API tests: ``create_app`` over a real store, served by uvicorn on a loopback socket.

``Recorder`` stands in for the scheduler behind the ``RunControl`` port where a test is about the HTTP
edge (auth, errors, pages, events) rather than about driving runs; the scheduler's own tests drive runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.config.settings import ApiSettings, Settings
from controller.localforge.server import serve_in_thread
from controller.services.views.schemas import RoundRequest
from controller.store import NewRun, Store
from tests.conftest import make_repo

ADMIN = "admin-token-0123456789"
READER = "reader-token-0123456789"
SPEC = """
objective = "make it faster"
turns = 2
[agent]
command = "true"
[sandbox]
mode = "none"
[metric]
command = "echo METRIC m=1"
name = "m"
direction = "minimize"
[[component]]
name = "app"
repo = "."
base = "main"
mutable = ["src/**"]
"""


@dataclass
class Recorder:
    """A ``RunControl`` that records what the routes asked of it."""

    calls: list[tuple[str, str]] = field(default_factory=list)

    def cancel(self, run_id: str) -> str:
        self.calls.append(("cancel", run_id))
        return "cancelling"

    def resume(self, run_id: str) -> str:
        self.calls.append(("resume", run_id))
        return "resuming"

    def steer(self, run_id: str, text: str, component: str | None = None) -> RoundRequest:
        self.calls.append(("steer", run_id))
        return RoundRequest(
            run_id=run_id,
            component=component or "app",
            pr_number=1,
            feedback=1,
            after_round=0,
            message="round requested",
        )

    def wake(self) -> None:
        self.calls.append(("wake", ""))


@dataclass
class Api:
    url: str
    store: Store
    control: Recorder
    repo: Path

    def client(self, token: str | None = ADMIN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def new_run(store: Store, run_id: str, objective: str = "o") -> str:
    store.create_run(
        NewRun(
            id=run_id,
            spec_text="",
            spec_fingerprint="f",
            spec_path=None,
            objective=objective,
            metric_name="m",
            direction="minimize",
            turns_planned=3,
        )
    )
    return run_id


@pytest.fixture
def api(tmp_path: Path, database_url: str, store: Store) -> Iterator[Api]:
    # SPEC runs unsandboxed, which the operator allows here: these tests are about the HTTP edge
    # (test_admission holds a strict controller's refusals).
    settings = Settings(
        home=tmp_path / "crucible-home", database_url=database_url, api=ApiSettings(allow_unsandboxed=True)
    )
    repo = make_repo(tmp_path / "app", {"src/a.py": "x = 1\n", "crucible.toml": SPEC})
    control = Recorder()
    app = create_app(settings, store, ApiTokens(ADMIN, READER), control, events_poll_s=0.02)
    with serve_in_thread(app) as url:
        yield Api(url, store, control, repo)

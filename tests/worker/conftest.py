"""Fixtures of the remote-round tests: the controller's app with its worker routes, served by uvicorn.

``Controller`` is a real store (SQLite and PostgreSQL) behind ``create_app(..., remote=...)`` on a
loopback socket, with a clock the test moves (token expiry) instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.config.settings import Settings
from controller.domain.enums import RunStatus
from controller.domain.jobs import RoundJob
from controller.localforge.server import serve_in_thread
from controller.services.remote.remote_rounds import RemoteRounds
from controller.services.views.schemas import RoundRequest
from controller.store import ComponentRecord, NewRun, Store
from tests.support import Clock, spec_text

OPERATOR = "operator-token-0123456789"
# A run's spec as the controller reads it when it checks a worker's report (``services.remote.recount``).
SPEC = spec_text(samples=3, sections={"metric": ["sequential = false"]})


# The remote rounds' clock (token expiry) starts here and moves only by hand (``tests.support.Clock``).
START = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@dataclass
class Controller:
    url: str
    store: Store
    remote: RemoteRounds
    settings: Settings
    clock: Clock

    def seed_run(
        self,
        run_id: str,
        *,
        repo: str = "/src/app",
        sha: str = "a" * 40,
        spec_text: str = SPEC,
    ) -> str:
        self.store.create_run(
            NewRun(
                id=run_id,
                spec_text=spec_text,
                spec_fingerprint="fp",
                spec_path=None,
                objective="o",
                metric_name="m",
                direction="minimize",
                turns_planned=3,
            )
        )
        self.store.add_component(
            ComponentRecord(
                run_id=run_id, name="app", repo=repo, base_ref="main", base_sha=sha, head_sha=sha, extra={}
            )
        )
        self.store.set_run_status(run_id, RunStatus.RUNNING)
        return run_id

    def mint(self, run_id: str, round: int = 0, *, sha: str = "a" * 40) -> dict[str, str]:
        job = RoundJob(run_id=run_id, round=round, turns=3, first_turn=1, heads={"app": sha})
        return self.remote.mint_worker_env(job)

    def client(self, token: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture
def controller(tmp_path: Path, database_url: str, store: Store) -> Iterator[Controller]:
    """The controller's worker API over the shared ``store`` fixture (``tests/support``), served."""
    settings = Settings(home=tmp_path / "home", database_url=database_url)
    clock = Clock(START)
    remote = RemoteRounds(settings, store, controller_url="http://unused", token_ttl_s=3600, clock=clock)
    app = create_app(settings, store, ApiTokens(OPERATOR), _Control(), remote=remote)
    with serve_in_thread(app) as url:
        remote.controller_url = url
        yield Controller(url, store, remote, settings, clock)


class _Control:
    def cancel(self, run_id: str) -> str:
        return "cancelling"

    def resume(self, run_id: str) -> str:
        return "resuming"

    def steer(self, run_id: str, text: str, component: str | None = None) -> RoundRequest:
        raise AssertionError("not used")

    def wake(self) -> None:
        return None

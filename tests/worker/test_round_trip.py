"""A round executed by ``crucible worker`` (a child process of the subprocess broker) against the
controller's app over HTTP, compared with the same round run locally (ADR-0014).

Real parts only: git repositories, SQLite/PostgreSQL, uvicorn, and ``crucible worker`` as its own
process with the environment a loop pod gets (no database URL, no forge or API credential).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.brokers.local import LocalBroker
from controller.brokers.subprocess import SubprocessBroker
from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import RunStatus, StopReason
from controller.localforge.server import serve_in_thread
from controller.services.control.service import RunService
from controller.services.remote.remote_rounds import RemoteRounds
from controller.store import Store, TurnRecord
from controller.wiring import compose_service
from tests.conftest import git, make_repo
from tests.worker.conftest import OPERATOR, _Control
from tests.worker.knobs_round import BENCH, KNOBS_SPEC

pytestmark = pytest.mark.slow


# The controller's own credentials: the broker must not hand them to the worker, which needs none.
CONTROLLER_SECRETS = {
    "CRUCIBLE_DATABASE_URL": "postgresql+psycopg://crucible:hunter2@nowhere.invalid/crucible",
    "CRUCIBLE_GITHUB_TOKEN": "ghp_0123456789abcdef0123456789abcdef0123",
    "CRUCIBLE_API_TOKEN": "operator-token-0123456789",
}


@dataclass
class Sides:
    local: RunService
    remote: RunService
    remote_rounds: RemoteRounds
    store: Store
    spec_path: Path


@pytest.fixture
def sides(tmp_path: Path, database_url: str) -> Iterator[Sides]:
    repo = make_repo(tmp_path / "app", {"conf.json": json.dumps({"a": 1}), "bench.py": BENCH})
    spec_path = repo / "crucible.toml"
    spec_path.write_text(KNOBS_SPEC)
    git(repo, "add", "crucible.toml")
    git(repo, "commit", "-q", "-m", "spec")
    environ = {**os.environ, **CONTROLLER_SECRETS}
    with Store.open(database_url, upgrade=True) as store:
        local_settings = Settings(home=tmp_path / "home-local", database_url=database_url)
        settings = Settings(home=tmp_path / "home-remote", database_url=database_url)
        remote = RemoteRounds(settings, store, controller_url="http://unused")
        app = create_app(settings, store, ApiTokens(OPERATOR), _Control(), remote=remote)
        with serve_in_thread(app) as url:
            remote.controller_url = url
            local = compose_service(
                local_settings,
                store,
                environ=environ,
                forge_for=_no_forge,
                broker=lambda runner: LocalBroker(runner, inline=True),
            )

            def subprocess_broker(_runner: object) -> SubprocessBroker:
                return SubprocessBroker(
                    mint_worker_env=remote.mint_worker_env,
                    remote_outcome=remote.remote_outcome,
                    revoke=remote.revoke,
                    root=tmp_path / "pods",
                    environ=environ,
                    command=(sys.executable, "-m", "controller.cli.main", "worker"),
                )

            service = compose_service(
                settings, store, environ={}, forge_for=_no_forge, broker=subprocess_broker
            )
            yield Sides(local, service, remote, store, spec_path)


def _no_forge(spec: object) -> object:
    raise AssertionError("these runs do not publish")


def _run(service: RunService, spec_path: Path) -> str:
    spec = load_spec(spec_path)
    run_id = service.create(spec, spec_path.read_text(), spec_path, RunOptions())
    result = service.drive(run_id)
    assert result.status is RunStatus.COMPLETED, result.message
    return run_id


def _decisions(turns: list[TurnRecord]) -> list[tuple[object, ...]]:
    return [(t.number, t.round, t.outcome, t.reason, t.value, t.hypothesis, t.changed_paths) for t in turns]


def test_a_round_run_by_the_worker_decides_as_the_local_round(sides: Sides) -> None:
    """The controller's environment holds a database URL and forge/API tokens; the broker passes none
    of them (``tests/brokers/test_subprocess_contract.py`` shows the child's environment) and the
    worker, which needs none, runs the round to the same decisions."""
    local_id = _run(sides.local, sides.spec_path)
    remote_id = _run(sides.remote, sides.spec_path)
    store = sides.store
    local_turns, remote_turns = store.list_turns(local_id), store.list_turns(remote_id)
    assert len(remote_turns) == 4
    assert _decisions(remote_turns) == _decisions(local_turns)
    assert any(t.commits for t in remote_turns), "the seed keeps at least one turn"
    local_run, remote_run = store.get_run(local_id), store.get_run(remote_id)
    assert (remote_run.stop_reason, remote_run.champion_value, remote_run.champion_turn) == (
        local_run.stop_reason,
        local_run.champion_value,
        local_run.champion_turn,
    )
    assert remote_run.stop_reason is StopReason.MAX_TURNS
    # Same commits: the champion of each side holds the same tree, and the remote one is in the
    # controller's own clone (the verified bundle brought it), where publishing would find it.
    local_clone = sides.local.settings.run_dir(local_id) / "arms" / "candidate" / "app"
    remote_clone = sides.remote.settings.run_dir(remote_id) / "arms" / "candidate" / "app"
    local_head = store.list_components(local_id)[0].head_sha
    remote_head = store.list_components(remote_id)[0].head_sha
    assert git(remote_clone, "rev-parse", f"{remote_head}^{{tree}}") == git(
        local_clone, "rev-parse", f"{local_head}^{{tree}}"
    )
    assert git(remote_clone, "rev-parse", f"refs/crucible/{remote_id}/worker/app") == remote_head
    assert git(remote_clone, "rev-parse", "HEAD") == remote_head, "the controller's checkout follows"
    # The round's token died with it.
    outcome = sides.remote_rounds.remote_outcome(remote_id, 0)
    assert outcome is not None and outcome.run_status is RunStatus.COMPLETED

"""The worker's token is out of its agent's reach without a sandbox (issue 21, ADR-0026).

A round runs through ``SubprocessBroker`` with ``sandbox.mode = "none"``: ``crucible worker`` and its
agent as one unprivileged user (as in a loop pod; the test drops root with ``setpriv`` when it has it).
The agent (``hunter.py``) reads every ``/proc/<pid>/environ`` it can, its ancestors' ``mem``, and every
file under the round's directory, ``HOME`` and its workspace (and ``/tmp`` in the last turn), then
tries each token it found on the worker API. A decoy process of the same user, holding a token in its
environment as the worker did before, shows the hunt works: the decoy's token is found (and refused: it
is no token of this run). The worker's own token is found nowhere, no try is accepted, and the round
completes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.brokers.subprocess import SubprocessBroker
from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import RunStatus
from controller.localforge.server import serve_in_thread
from controller.services.remote.remote_rounds import RemoteRounds
from controller.store import Store
from controller.wiring import compose_service
from tests.conftest import git, make_repo
from tests.worker.conftest import OPERATOR, _Control
from tests.worker.hunt import (
    HUNTER_PYTHON,
    NOBODY,
    SPEC,
    assert_hunt_found_no_token,
    assert_token_in_no_file,
    copy_hunter,
    decoy_process,
    minting,
    no_forge,
    shared_directory,
    unprivileged,
)

pytestmark = pytest.mark.slow

DECOY = "decoy-token-of-another-round-0123456789"


def _as_user(argv: list[str]) -> list[str]:
    """``argv`` as the unprivileged user when the test runs as root (a loop pod's worker is not root);
    as it is otherwise."""
    return unprivileged(argv) if os.geteuid() == 0 else argv


@pytest.fixture
def shared() -> Iterator[Path]:
    with shared_directory() as path:
        yield path


@pytest.fixture
def decoy(shared: Path) -> Iterator[None]:
    yield from decoy_process(DECOY, shared, _as_user)


def _unprivileged_import_fails() -> str | None:
    """Why the unprivileged user cannot run ``crucible worker`` from this checkout, or None.

    A clone under a private directory (``mktemp -d`` makes it 0700, as does a home directory) is out
    of that user's reach, and so is the interpreter a venv links into a private home."""
    probe = _as_user([sys.executable, "-c", "import controller.cli.main"])
    done = subprocess.run(probe, capture_output=True, text=True, cwd="/", check=False)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["exit 1"])[-1]


def test_a_hostile_agent_without_a_sandbox_finds_no_worker_token(
    tmp_path: Path, shared: Path, decoy: None
) -> None:
    unreachable = _unprivileged_import_fails()
    if unreachable is not None:
        pytest.skip(f"the unprivileged user cannot import crucible from this checkout: {unreachable}")
    pods, reports = shared / "pods", shared / "reports"
    pods.mkdir(mode=0o755)
    reports.mkdir(mode=0o777)
    reports.chmod(0o777)
    hunter = copy_hunter(shared)
    url_db = f"sqlite:///{tmp_path / 'crucible.db'}"
    minted: list[str] = []
    with Store.open(url_db, upgrade=True) as store:
        settings = Settings(home=tmp_path / "home", database_url=url_db)
        remote = RemoteRounds(settings, store, controller_url="http://unused")
        mint = minting(remote, minted)

        app = create_app(settings, store, ApiTokens(OPERATOR), _Control(), remote=remote)
        with serve_in_thread(app) as url:
            remote.controller_url = url
            spec_text = SPEC.format(python=HUNTER_PYTHON, hunter=hunter, url=url, reports=reports, root=pods)
            repo = make_repo(tmp_path / "app", {"src/a.txt": "0\n", "crucible.toml": spec_text})
            git(repo, "add", "crucible.toml")
            # The worker runs as the unprivileged user in its directory (made by the broker as root).
            worker = _as_user([sys.executable, "-m", "controller.cli.main", "worker"])
            command = ("sh", "-c", f'chown -R {NOBODY}:{NOBODY} . 2>/dev/null; exec "$@"', "worker", *worker)
            environ = {**os.environ, "HOME": str(shared)}

            def broker(_runner: object) -> SubprocessBroker:
                return SubprocessBroker(
                    mint_worker_env=mint,
                    remote_outcome=remote.remote_outcome,
                    revoke=remote.revoke,
                    root=pods,
                    environ=environ,
                    command=command,
                )

            service = compose_service(settings, store, environ={}, forge_for=no_forge, broker=broker)
            spec_path = repo / "crucible.toml"
            run_id = service.create(load_spec(spec_path), spec_text, spec_path, RunOptions())
            result = service.drive(run_id)
            log = "\n".join(f"{p}: {p.read_text(errors='replace')[-600:]}" for p in pods.rglob("*agent*.log"))
            assert result.status is RunStatus.COMPLETED, (result.message, log)

    assert minted, "the broker minted the round's token"
    token = minted[-1]
    turns = sorted(reports.glob("turn-*.json"))
    assert len(turns) == 2, (list(reports.iterdir()), log)
    assert [json.loads(p.read_text())["walked"] for p in turns] == [[], ["/tmp"]], "the last turn's walk"
    assert_hunt_found_no_token(turns, token, DECOY)
    assert_token_in_no_file([*pods.rglob("*"), *reports.rglob("*")], token)

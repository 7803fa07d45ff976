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
import shutil
import subprocess
import sys
import tempfile
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
from controller.domain.jobs import RoundJob
from controller.localforge.server import serve_in_thread
from controller.services.remote.remote_rounds import RemoteRounds
from controller.store import Store
from controller.wiring import compose_service
from tests.conftest import git, make_repo
from tests.worker.conftest import OPERATOR, _Control

pytestmark = pytest.mark.slow

HUNTER = Path(__file__).with_name("hunter.py")
NOBODY = 65534
# The hunter needs only the standard library; the system interpreter is reachable by any user (a venv's
# may link into root's home).
HUNTER_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
DECOY = "decoy-token-of-another-round-0123456789"
SPEC = """
objective = "find the token"
turns = 2
[agent]
command = "{python} {hunter} {url} {reports} 2 {root}"
[sandbox]
mode = "none"
[metric]
command = "echo METRIC m=1"
name = "m"
direction = "minimize"
samples = 1
warmups = 0
confidence = 0
interleave = false
[[component]]
name = "app"
repo = "."
mutable = ["src/**"]
"""


def _as_user(argv: list[str]) -> list[str]:
    """``argv`` as the unprivileged user when the test runs as root (a loop pod's worker is not root);
    as it is otherwise."""
    if os.geteuid() != 0:
        return argv
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all"]
    return [*drop, "--bounding-set=-all", *argv]


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory the unprivileged user can reach (pytest's own temp root is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="crucible-reach-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def decoy(shared: Path) -> Iterator[None]:
    env = {"PATH": os.environ["PATH"], "CRUCIBLE_WORKER_TOKEN": DECOY}
    proc = subprocess.Popen(_as_user(["sleep", "600"]), env=env, cwd=shared)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


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
    hunter = shared / "hunter.py"
    shutil.copy(HUNTER, hunter)
    hunter.chmod(0o644)
    url_db = f"sqlite:///{tmp_path / 'crucible.db'}"
    minted: list[str] = []
    with Store.open(url_db, upgrade=True) as store:
        settings = Settings(home=tmp_path / "home", database_url=url_db)
        remote = RemoteRounds(settings, store, controller_url="http://unused")

        def mint(job: RoundJob) -> dict[str, str]:
            env = remote.mint_worker_env(job)
            minted.append(env["CRUCIBLE_WORKER_TOKEN"])
            return env

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

            service = compose_service(settings, store, environ={}, forge_for=_no_forge, broker=broker)
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
    for path in turns:
        report = json.loads(path.read_text())
        if os.geteuid() == 0:
            assert report["uid"] == NOBODY, "the agent ran unprivileged"
        assert report["found"].get(DECOY, "").endswith("/environ"), (
            "the hunt reads what a same-user process shows"
        )
        assert token not in report["found"], (
            f"the agent found the worker's token at {report['found'].get(token)}"
        )
        worker_procs = [
            p for p in report["ancestors"].values() if "controller.cli.main worker" in p["cmdline"]
        ]
        assert worker_procs, report["ancestors"]
        for proc in worker_procs:
            assert (proc["environ"], proc["mem"]) == ("EACCES", "EACCES"), proc
        assert report["tries"], "the agent tried the worker API"
        assert all(status in (401, 403) for status in report["tries"].values()), report["tries"]
    for path in [*pods.rglob("*"), *reports.rglob("*")]:
        if path.is_file() and not path.is_symlink():
            assert token.encode() not in path.read_bytes(), f"the token is in {path}"


def _no_forge(spec: object) -> object:
    raise AssertionError("this run does not publish")

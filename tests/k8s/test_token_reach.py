"""The worker's token is out of its agent's reach in a loop pod of the real control plane (issue 21).

``tests/worker/test_token_reach.py`` hunts for the token under ``SubprocessBroker``; here the same
hostile agent (``tests/worker/hunter.py``) runs in a round that is a Job: the process node starts the
pod's command with the pod's environment, the token coming from the round's Secret by
``secretKeyRef`` as a kubelet gives it. The process node runs pods as its own user (root) and ignores
``securityContext``, so the pod's command drops to an unprivileged user itself, as ``runAsUser`` would,
and works in a directory that user can reach (the node's pod directories are under root's home). The
agent reads every ``/proc/<pid>/environ`` and its ancestors' ``mem``, every file of the round's
directories and ``HOME`` (and ``/tmp`` in the last turn), and tries each token it found on the worker
API: a decoy's token is found (the hunt works), the worker's never is, and the round completes.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.brokers.kubernetes.broker import KubernetesBroker
from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import RunStatus
from controller.localforge.server import serve_in_thread
from controller.services.remote.remote_rounds import RemoteRounds
from controller.services.views.specs import stored_spec
from controller.store import Store
from controller.wiring import compose_service
from tests.conftest import git, make_repo
from tests.k8s.broker_harness import RESTRICTED
from tests.k8s.conftest import ControlPlane
from tests.support.fixtures import migrated_sqlite_url
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

DECOY = "decoy-token-of-another-pod-0123456789abc"
POD_SPEC = (
    SPEC
    + """[broker]
kind = "kubernetes"
image = "crucible:test"
namespace = "{namespace}"
resources = {{ requests = {{ cpu = "10m", memory = "64Mi" }}, limits = {{ memory = "1Gi" }} }}
deadline = "10m"
"""
)


@pytest.fixture
def shared() -> Iterator[Path]:
    with shared_directory() as path:
        yield path


@pytest.fixture
def decoy(shared: Path) -> Iterator[None]:
    yield from decoy_process(DECOY, shared, unprivileged)


def _pod_command(work: Path, home: Path) -> tuple[str, ...]:
    """The pod's command: ``crucible worker`` as the unprivileged user in ``work``; the node appends
    ``--workdir <its emptyDir>`` (under root's home), which the script leaves unused."""
    worker = unprivileged([sys.executable, "-m", "controller.cli.main", "worker", "--workdir", str(work)])
    script = f"cd {shlex.quote(str(work))} && HOME={home} TMPDIR={home} exec {shlex.join(worker)}"
    return ("sh", "-c", script, "worker")


def test_a_hostile_agent_in_a_loop_pod_finds_no_worker_token(
    tmp_path: Path,
    shared: Path,
    decoy: None,
    control_plane: ControlPlane,
    namespace: Callable[..., str],
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the pod drops to an unprivileged user, which needs root (as the process node runs)")
    probe = unprivileged([sys.executable, "-c", "import controller.cli.main"])
    if subprocess.run(probe, capture_output=True, cwd="/", check=False).returncode != 0:
        pytest.skip("the unprivileged user cannot import crucible from this checkout")
    ns = namespace(labels=RESTRICTED)
    work, home, reports = shared / "work", shared / "home", shared / "reports"
    for folder in (work, home, reports):
        folder.mkdir()
        os.chown(folder, NOBODY, NOBODY)
    hunter = copy_hunter(shared)
    url_db = migrated_sqlite_url(tmp_path / "crucible.db")
    minted: list[str] = []
    with Store.open(url_db, upgrade=True) as store:
        settings = Settings(home=tmp_path / "home", database_url=url_db)
        remote = RemoteRounds(settings, store, controller_url="http://unused")
        mint = minting(remote, minted)

        app = create_app(settings, store, ApiTokens(OPERATOR), _Control(), remote=remote)
        brokers: list[KubernetesBroker] = []
        with serve_in_thread(app) as url:
            remote.controller_url = url
            spec_text = POD_SPEC.format(
                python=HUNTER_PYTHON, hunter=hunter, url=url, reports=reports, root=shared, namespace=ns
            )
            repo = make_repo(tmp_path / "app", {"src/a.txt": "0\n", "crucible.toml": spec_text})
            git(repo, "add", "crucible.toml")

            def broker(_runner: object) -> KubernetesBroker:
                made = KubernetesBroker(
                    control_plane.api,
                    mint_worker_env=mint,
                    remote_outcome=remote.remote_outcome,
                    revoke=remote.revoke,
                    spec_for=lambda run_id: stored_spec(store, run_id).broker,
                    command=_pod_command(work, home),
                )
                brokers.append(made)
                return made

            service = compose_service(settings, store, environ={}, forge_for=no_forge, broker=broker)
            spec_path = repo / "crucible.toml"
            try:
                run_id = service.create(load_spec(spec_path), spec_text, spec_path, RunOptions())
                result = service.drive(run_id)
            finally:
                for made in brokers:
                    made.close()
            assert result.status is RunStatus.COMPLETED, result.message

    assert minted, "the broker minted the round's token"
    token = minted[-1]
    turns = sorted(reports.glob("turn-*.json"))
    assert len(turns) == 2, list(reports.iterdir())
    assert_hunt_found_no_token(turns, token, DECOY)
    assert_token_in_no_file(shared.rglob("*"), token)

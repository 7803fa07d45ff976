"""The broker contract suite (``tests/brokers``) run against ``SubprocessBroker``: each round is a real
child process. The child is the Kubernetes tests' stand-in for ``crucible worker`` (``round_pod.py``),
which reaches a small stand-in controller over HTTP with the minted token; that controller runs the
suite's scripted runner, so the tests' gates decide when a round ends (``tests/k8s/broker_harness``,
minus the pods). ``tests/worker`` runs the real ``crucible worker`` through this broker."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.brokers.subprocess import SubprocessBroker
from controller.domain.jobs import RoundState
from tests.brokers import test_contract as contract
from tests.brokers.test_contract import Script, Subject
from tests.k8s.broker_harness import POD_COMMAND, FakeController

# Collect every test of the contract here too, with this module's ``subject``.
globals().update({name: getattr(contract, name) for name in dir(contract) if name.startswith("test_")})


class ChildController(FakeController):
    """The harness's controller with no cluster: a child that called ``/start`` is running."""

    def __init__(self, script: Script) -> None:
        super().__init__(script, core=None, namespace="")  # type: ignore[arg-type]

    def _pod_running(self, job_name: str) -> bool:
        return True


@pytest.fixture
def subject(tmp_path: Path) -> Iterator[Subject]:
    script = Script()
    controller = ChildController(script)
    environ = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    broker = SubprocessBroker(
        mint_worker_env=controller.mint_worker_env,
        remote_outcome=controller.remote_outcome,
        revoke=controller.revoke,
        root=tmp_path / "children",
        environ=environ,
        command=POD_COMMAND,
        kill_after_s=20,
    )
    yield Subject(broker, script, broker.capabilities.concurrent)
    for release in script.release.values():
        release.set()
    for cancel in controller.cancel.values():
        cancel.set()
    controller.close()


def test_the_child_gets_no_credential_whatever_the_controller_holds(tmp_path: Path) -> None:
    """The child's real environment (it prints it): the minted variables and a pod's few basics."""
    controller_env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")},
        "CRUCIBLE_DATABASE_URL": "postgresql+psycopg://crucible:hunter2@db/crucible",
        "CRUCIBLE_GITHUB_TOKEN": "ghp_0123456789abcdef0123456789abcdef0123",
        "CRUCIBLE_API_TOKEN": "operator-token-0123456789",
        "AWS_SECRET_ACCESS_KEY": "x" * 40,
    }
    minted = {"CRUCIBLE_CONTROLLER_URL": "http://127.0.0.1:9", "CRUCIBLE_WORKER_TOKEN": "t" * 43}
    broker = SubprocessBroker(
        mint_worker_env=lambda job: dict(minted, CRUCIBLE_RUN_ID=job.run_id, CRUCIBLE_ROUND=str(job.round)),
        remote_outcome=lambda run_id, round: None,
        root=tmp_path / "children",
        environ=controller_env,
        command=(sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"),
    )
    broker.launch(contract.job())
    report = broker.wait("r1", 0, contract.WAIT)
    assert report.state is RoundState.FAILED and "reported no outcome" in (report.error or "")
    seen = json.loads((tmp_path / "children" / "r1" / "round-0-0" / "worker.log").read_text())
    assert set(seen) - {"PWD", "SHLVL", "_", "LC_CTYPE"} == {
        "PATH",
        "HOME",
        "LANG",
        "CRUCIBLE_CONTROLLER_URL",
        "CRUCIBLE_WORKER_TOKEN",
        "CRUCIBLE_RUN_ID",
        "CRUCIBLE_ROUND",
    }

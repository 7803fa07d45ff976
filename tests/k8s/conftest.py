"""Fixtures for the tests against the real control plane that ``scripts/k8s/up`` starts.

``scripts/k8s/env`` says where it is (the same lines a developer evals). When it is not reachable the tests
fail where the control plane is expected (CI, or ``CRUCIBLE_K8S_REQUIRED=1``, which ``scripts/test.sh``
sets after bringing it up) and are skipped elsewhere with the command that starts it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.support.waiting import wait_until as support_wait_until

REPO = Path(__file__).resolve().parents[2]
START_HINT = "start it with `bash scripts/k8s/up` (builds the pinned binaries once, then 15-30 s)"


def _required() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("CRUCIBLE_K8S_REQUIRED") == "1"


def _absent(reason: str) -> None:
    if _required():
        pytest.fail(f"the Kubernetes control plane is required here but {reason}; {START_HINT}")
    pytest.skip(f"{reason}; {START_HINT}")


@pytest.fixture(scope="session")
def k8s_env() -> dict[str, str]:
    """The variables ``scripts/k8s/env`` exports (read before any test changes HOME)."""
    out = subprocess.run(["bash", str(REPO / "scripts/k8s/env")], capture_output=True, text=True, check=True)
    values = {}
    for line in out.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        values[name] = shlex.split(value)[0] if value else ""
    return values


@pytest.fixture(scope="session")
def kubectl(k8s_env: dict[str, str]) -> str:
    """The pinned release's kubectl (built by scripts/k8s/build), else the one on PATH."""
    path = shutil.which(k8s_env["CRUCIBLE_K8S_KUBECTL"])
    if path is None:
        _absent("no kubectl was found")
    assert path is not None
    return path


@dataclass(frozen=True)
class ControlPlane:
    kubeconfig: Path
    kubectl: str
    api: client.ApiClient
    node: str  # the process node's name

    def run_kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.kubectl, "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc


@pytest.fixture(scope="session")
def control_plane(k8s_env: dict[str, str], kubectl: str) -> Iterator[ControlPlane]:
    kubeconfig = Path(k8s_env["CRUCIBLE_K8S_KUBECONFIG"])
    if not kubeconfig.exists():
        _absent(f"there is no kubeconfig at {kubeconfig}")
    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        client.VersionApi(api).get_code(_request_timeout=5)
    except Exception as exc:
        api.close()
        _absent(f"the API server of {kubeconfig} does not answer ({type(exc).__name__}: {exc})")
    yield ControlPlane(kubeconfig=kubeconfig, kubectl=kubectl, api=api, node=k8s_env["CRUCIBLE_K8S_NODE"])
    api.close()


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[Callable[..., str]]:
    """``namespace(labels={...})`` -> the name of a fresh namespace, deleted after the test."""
    core = client.CoreV1Api(control_plane.api)
    made: list[str] = []

    def make(labels: dict[str, str] | None = None) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
        made.append(name)
        wait_until(lambda: _has_default_account(core, name), what=f"default ServiceAccount in {name}")
        return name

    yield make
    for name in made:
        core.delete_namespace(name, propagation_policy="Background")


def _has_default_account(core: client.CoreV1Api, ns: str) -> bool:
    return any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(ns).items)


def wait_until(predicate: Callable[[], bool], *, what: str, timeout: float = 60.0) -> None:
    """Poll ``predicate`` until true; the timeout only bounds a hang, no assertion is timed. The shared
    ``tests.support.wait_until``, looking every 0.1 s (each look may be a request to the API server)."""
    support_wait_until(predicate, what, timeout=timeout, interval=0.1)

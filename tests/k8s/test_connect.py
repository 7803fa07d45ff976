"""The Kubernetes broker's client from the settings, and the composition root's choice of broker per run."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from controller.brokers.kubernetes.connect import connect
from controller.domain.errors import SpecError
from tests.k8s.conftest import ControlPlane


def test_a_kubeconfig_connects_and_names_the_controllers_namespace(control_plane: ControlPlane) -> None:
    api, namespace = connect(control_plane.kubeconfig, None)
    assert client.VersionApi(api).get_code().major == "1"
    assert namespace == "default", "the admin context names none"
    assert connect(control_plane.kubeconfig, "crucible")[1] == "crucible"
    api.close()


def test_without_a_kubeconfig_or_a_service_account_the_error_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        connect(None, None, service_account=tmp_path / "none")
    assert caught.value.key == "CRUCIBLE_KUBECONFIG"
    with pytest.raises(SpecError, match="no such file"):
        connect(tmp_path / "missing.kubeconfig", None)

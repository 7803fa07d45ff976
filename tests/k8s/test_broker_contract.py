"""The broker contract suite (``tests/brokers``) run against ``KubernetesBroker`` on the real control plane
(``broker_harness``: real Jobs, pods run by the process node, a stand-in controller over HTTP)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokers import test_contract as contract
from tests.brokers.test_contract import Script, Subject
from tests.k8s.broker_harness import FakeController, harness, make_broker
from tests.k8s.conftest import ControlPlane

__all__ = ["harness"]

# Collect every test of the contract here too, with this module's ``subject``.
globals().update({name: getattr(contract, name) for name in dir(contract) if name.startswith("test_")})


@pytest.fixture
def subject(control_plane: ControlPlane, harness: tuple[FakeController, Script]) -> Iterator[Subject]:
    controller, script = harness
    broker = make_broker(control_plane, controller)
    yield Subject(broker, script, broker.capabilities.concurrent)
    broker.close()

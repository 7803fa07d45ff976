"""``RoutedBroker``: each run's rounds go to the broker of its spec's kind, built on first use."""

from __future__ import annotations

import pytest

from controller.brokers.base import Broker
from controller.brokers.local import LocalBroker
from controller.brokers.routing import RoutedBroker
from controller.domain.errors import NotFoundError, SpecError
from controller.domain.jobs import RoundState
from tests.brokers.test_contract import Script, job


def test_rounds_go_to_the_broker_of_their_runs_kind_and_stay_there() -> None:
    scripts = {"a": Script(blocking=False), "b": Script(blocking=False)}
    built: list[str] = []

    def factory(kind: str) -> Broker:
        built.append(kind)
        return LocalBroker(scripts[kind], inline=True)

    kinds = {"r1": "a", "r2": "b"}
    routed = RoutedBroker(
        {k: (lambda k=k: factory(k)) for k in scripts}, lambda run, _round: kinds[run], concurrent=False
    )
    assert built == [], "nothing is built before a run needs it"
    routed.launch(job("r1"))
    assert routed.wait("r1", 0, 5).state is RoundState.SUCCEEDED
    assert scripts["a"].ran == [("r1", 0, 0)] and scripts["b"].ran == []
    routed.launch(job("r2"))
    assert scripts["b"].ran == [("r2", 0, 0)]
    assert built == ["a", "b"]
    assert routed.capabilities_for("r2", 0) == routed.broker_for("r2", 0).capabilities
    with pytest.raises(NotFoundError):
        routed.status("r1", 7)


def test_a_kind_this_controller_does_not_run_is_a_spec_error_naming_the_key() -> None:
    routed = RoutedBroker(
        {"local": lambda: LocalBroker(Script(), inline=True)}, lambda *_: "kubernetes", concurrent=False
    )
    with pytest.raises(SpecError) as caught:
        routed.launch(job())
    assert caught.value.key == "broker.kind"


def test_a_run_may_keep_some_rounds_on_another_kind() -> None:
    remote, local = Script(blocking=False), Script(blocking=False)
    routed = RoutedBroker(
        {
            "kubernetes": lambda: LocalBroker(remote, inline=True),
            "local": lambda: LocalBroker(local, inline=True),
        },
        lambda _run, round: "kubernetes" if round == 0 else "local",
        concurrent=False,
    )
    routed.launch(job("r1", 0))
    routed.launch(job("r1", 1, hold=None))
    assert (remote.ran, local.ran) == ([("r1", 0, 0)], [("r1", 1, 0)])
    assert routed.status("r1", 1).state is RoundState.SUCCEEDED

"""The forged-keep attack of issue 21 through the real control plane, against confirmations (ADR-0043).

As ``tests/worker/test_forged_keep.py``, with each round a Job of the process node and each
confirmation a Job of its own (``ConfirmPods``): the attacker holds each round's token as it is
minted, uploads a real commit that makes the value worse and claims it kept with made-up samples
that agree; the confirmation's pod measures the worse value, the claim is refused, and the run's
turns, champion and PR end as the honest steered run's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from controller.brokers.kubernetes.broker import KubernetesBroker
from controller.brokers.kubernetes.confirmations import ConfirmPods
from controller.brokers.kubernetes.manifest import LABEL_CONFIRM, LABEL_ROUND, LABEL_TURN
from controller.config.broker import BrokerSpec
from controller.domain.jobs import RoundJob
from controller.services.remote.remote_rounds import RemoteRounds
from controller.services.views.specs import stored_spec
from controller.store import Store
from tests.api.sqlite_only import SQLITE_ONLY
from tests.forgekit import app_forge
from tests.k8s.broker_harness import RESTRICTED
from tests.k8s.conftest import ControlPlane
from tests.k8s.test_e2e_rounds import BROKER_TABLE
from tests.worker.steered_round import check_steered, run_steered
from tests.worker.test_forged_keep import WORSE, KeepForger
from tests.worker.test_forged_reports import GATED_AGENT

pytestmark = pytest.mark.slow

WORKER = (sys.executable, "-m", "controller.cli.main", "worker")


@SQLITE_ONLY
def test_a_forged_keep_is_refused_by_a_confirmation_pod_and_the_run_ends_as_an_honest_one(
    tmp_path: Path, control_plane: ControlPlane, namespace: Callable[..., str], database_url: str
) -> None:
    ns = namespace(labels=RESTRICTED)
    tail = BROKER_TABLE.format(namespace=ns)
    gate = tmp_path / "gate"
    gate.mkdir()
    forger = KeepForger(gate, tmp_path / "mallory")
    brokers: list[KubernetesBroker] = []
    confirm_pods: list[ConfirmPods] = []

    def kubernetes(remote: RemoteRounds, mint: Callable[[RoundJob], dict[str, str]]) -> KubernetesBroker:
        broker = KubernetesBroker(
            control_plane.api,
            mint_worker_env=forger.minting(mint),
            remote_outcome=remote.remote_outcome,
            revoke=remote.revoke,
            spec_for=lambda run_id: stored_spec(remote.store, run_id).broker,
            command=WORKER,
        )
        brokers.append(broker)
        if not confirm_pods:
            spec_for = lambda run_id: stored_spec(remote.store, run_id).broker  # noqa: E731
            confirm_pods.append(ConfirmPods(control_plane.api, spec_for=spec_for, command=WORKER))
        return broker

    with app_forge(tmp_path) as forge:
        try:
            steered = run_steered(
                tmp_path,
                forge,
                database_url,
                kubernetes,
                spec_tail=tail,
                agent=GATED_AGENT.format(gate=gate),
                confirmations=lambda _run: confirm_pods[0],
            )
        finally:
            for broker in brokers:
                broker.close()
            for pods in confirm_pods:
                pods.close()
        forger.join()
        assert forger.errors == []
        check_steered(steered, tmp_path, forge, database_url)
    assert set(forger.answers) == {0, 1}, "both rounds were attacked"
    for round, answer in forger.answers.items():
        assert answer.status_code == 403 and answer.json()["kind"] == "unconfirmed", (round, answer.text)
        assert f"claimed keep; the confirmation measured {WORSE:g}" in answer.json()["detail"], answer.text
    with Store.open(database_url) as store:
        run = store.get_run(steered.run_id)
        assert (run.champion_value, run.champion_turn) == (8.0, 2), "the honest steered run's"
        kept = {t.commits.get("app") for t in store.list_turns(steered.run_id)}
        assert not kept & set(forger.commits.values())
    # Each round ran as its Job; each claim (the forged one and the honest keep, per round) was
    # measured in a Job of its own, which completed.
    jobs = client.BatchV1Api(control_plane.api).list_namespaced_job(ns).items
    confirming = [j for j in jobs if LABEL_CONFIRM in (j.metadata.labels or {})]
    assert len(confirming) == 4, sorted(j.metadata.name for j in jobs)
    assert all(j.metadata.name.startswith(f"crucible-{steered.run_id}-") for j in confirming)
    # A restarted controller (a new launcher, knowing nothing) finds each confirmation's Job by the
    # name of its claim, as the keep gate asks for it, instead of starting a second.
    successor = ConfirmPods(control_plane.api, spec_for=lambda _run: _broker(database_url, steered.run_id))
    try:
        for job in confirming:
            assert any(c.type == "Complete" and c.status == "True" for c in job.status.conditions or [])
            env = job.spec.template.spec.containers[0].env_from
            assert env is None, "no agent Secret in a confirmation's pod"
            labels = job.metadata.labels
            turn, claim = int(labels[LABEL_TURN]), labels[LABEL_CONFIRM]
            round = int(labels[LABEL_ROUND])
            assert successor.confirmation_status(steered.run_id, round, turn, claim).finished
    finally:
        successor.close()


def _broker(database_url: str, run_id: str) -> BrokerSpec:
    with Store.open(database_url) as store:
        return stored_spec(store, run_id).broker

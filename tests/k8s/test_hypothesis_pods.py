"""``HypothesisPods`` on the real control plane (ADR-0018, ADR-0034): a warm Job per parallel index that
later turns' hypotheses are offered to, adopted by its labels after a restart, started again within
the turn when its pod fails, left alone by the round broker's reconciliation, cancelled with its pod."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from controller.brokers.kubernetes import manifest
from controller.brokers.kubernetes.broker import KubernetesBroker
from controller.brokers.kubernetes.hypotheses import HypothesisPods
from controller.config.spec import parse_spec
from controller.domain.errors import NotFoundError
from controller.domain.jobs import RoundJob
from controller.services.control.dryrun import round_manifests
from tests.k8s.broker_harness import RESTRICTED, loop_spec
from tests.k8s.conftest import ControlPlane, wait_until

SLEEP = (sys.executable, "-c", "import time; time.sleep(120)")
DONE = (sys.executable, "-c", "pass")
JOB = RoundJob(run_id="r1", round=0, turns=1, first_turn=3, heads={"app": "a" * 40})


FAIL = (sys.executable, "-c", "raise SystemExit(3)")


class Minted:
    """The slot tokens minted (``RemoteRounds.mint_slot_env``)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, job: RoundJob, index: int) -> dict[str, str]:
        self.calls.append((job.first_turn, index))
        return {"CRUCIBLE_WORKER_TOKEN": f"slot-{index}", "CRUCIBLE_PARALLEL_INDEX": str(index)}


class Offers:
    """What the launcher offered each slot (``services.remote.slots.Slots``'s side of the contract)."""

    def __init__(self) -> None:
        self.offered: list[tuple[int, int, Mapping[str, Any] | None]] = []

    def offer(self, job: RoundJob, turn: int, index: int, proposal: Mapping[str, Any] | None) -> None:
        self.offered.append((turn, index, proposal))

    def wait_for_reports(self, timeout: float) -> None:
        raise AssertionError("the launcher waits only when a turn follows its pods")

    def withdraw(
        self, job: RoundJob, turn: int, count: int, wanted: Mapping[int, Mapping[str, Any] | None]
    ) -> int:
        raise AssertionError("only a turn that starts withdraws what it is not played with")


def _pods(
    control_plane: ControlPlane,
    ns: str,
    command: tuple[str, ...],
    minted: Minted,
    offers: Offers | None = None,
) -> HypothesisPods:
    spec = loop_spec(ns)
    return HypothesisPods(
        control_plane.api,
        mint_slot_env=minted,
        slots=offers or Offers(),
        spec_for=lambda _run: spec,
        command=command,
    )


def test_hypothesis_job_names_are_dns_labels_apart_from_the_rounds() -> None:
    name = manifest.hypothesis_job_name("rsm2k4f-3fa9c1", 0, 12, 3)
    assert name == "crucible-rsm2k4f-3fa9c1-0-t12-h3"
    odd = manifest.hypothesis_job_name("Run_With.Odd/Chars" * 5, 0, 120, 3)
    assert len(odd) <= 63 and odd.endswith("-0-t120-h3")
    names = {manifest.hypothesis_job_name("r1", 0, t, i) for t in (1, 2) for i in (0, 1)}
    assert len(names) == 4 and manifest.job_name("r1", 0) not in names


def test_a_launch_of_a_started_hypothesis_adopts_its_job_and_the_round_broker_ignores_it(
    control_plane: ControlPlane, namespace: Any
) -> None:
    ns = namespace(labels=RESTRICTED)
    minted, offers = Minted(), Offers()
    first = _pods(control_plane, ns, SLEEP, minted, offers)
    proposal = {"file": "conf.json", "key": "a", "old": 1, "new": 3}
    assert not first.launch_hypothesis(JOB, 3, 1, proposal).finished
    first.close()  # the controller dies; the pod runs on
    second = _pods(control_plane, ns, SLEEP, minted, offers)
    assert not second.launch_hypothesis(JOB, 3, 1, proposal).finished
    assert minted.calls == [(3, 1)], "no second pod nor token: the running pod's stays good"
    # The next turn's hypothesis of index 1 goes to the same pod: warm, no new Job.
    assert not second.launch_hypothesis(JOB, 4, 1, None).finished
    assert offers.offered == [(3, 1, proposal), (3, 1, proposal), (4, 1, None)]
    assert minted.calls == [(3, 1)]
    batch = client.BatchV1Api(control_plane.api)
    (job,) = batch.list_namespaced_job(ns).items
    assert job.metadata.name == "crucible-r1-0-t3-h1"
    labels = job.metadata.labels
    assert (labels[manifest.LABEL_TURN], labels[manifest.LABEL_INDEX]) == ("3", "1")
    env = {e.name: e for e in job.spec.template.spec.containers[0].env}
    assert env["CRUCIBLE_WORKER_TOKEN"].value_from.secret_key_ref.name == "crucible-r1-0-t3-h1-token"
    rounds = KubernetesBroker(
        control_plane.api,
        mint_worker_env=lambda job: {},
        remote_outcome=lambda run, round: None,
        spec_for=lambda _run: loop_spec(ns),
    )
    assert rounds.in_flight(ns) == [], "a hypothesis's Job is not a round to adopt"
    with pytest.raises(NotFoundError):
        rounds.status("r1", 0)  # nor the round's Job, found by its labels
    rounds.close()
    # Cancelled with the run: the Job goes, foreground, and the hypothesis is finished naming why.
    second.cancel_hypothesis("r1", 0, 4, 1)
    wait_until(lambda: not batch.list_namespaced_job(ns).items, what="the Job deleted")
    state = second.hypothesis_status("r1", 0, 4, 1)
    assert state.finished and (state.error or "").startswith("job_deleted")
    with pytest.raises(NotFoundError):
        second.hypothesis_status("r1", 0, 3, 0)
    second.close()


def test_a_pod_that_exits_zero_without_taking_its_offer_gets_one_new_pod_then_ends_without_error(
    control_plane: ControlPlane, namespace: Any
) -> None:
    """The race of a warm pod's idle exit with an offer: the launcher saw the slot's pod running and
    only offered the hypothesis, and the pod exited 0 without taking it (``DONE`` exits at once, as
    a pod idling out just then does). The offer gets a new pod within the turn, not a report of a
    lost hypothesis; a second exit 0 is final (finished without error, which the turn reports as
    lost), so a slot whose run stopped does not start pods forever."""
    ns = namespace(labels=RESTRICTED)
    minted, offers = Minted(), Offers()
    pods = _pods(control_plane, ns, DONE, minted, offers)
    pods.launch_hypothesis(JOB, 1, 0, None)
    wait_until(lambda: pods.hypothesis_status("r1", 0, 1, 0).finished, what="the pods' end", timeout=180)
    assert pods.hypothesis_status("r1", 0, 1, 0).error is None
    batch = client.BatchV1Api(control_plane.api)
    names = sorted(j.metadata.name for j in batch.list_namespaced_job(ns).items)
    assert names == ["crucible-r1-0-t1-h0", "crucible-r1-0-t1-h0-a1"], "one new pod for the offer"
    assert minted.calls == [(1, 0), (1, 0)]
    assert offers.offered == [(1, 0, None)], "offered once: the new pod takes the standing offer"
    pods.close()


def test_a_slot_whose_pod_failed_gets_a_new_pod_within_the_turn(
    control_plane: ControlPlane, namespace: Any
) -> None:
    ns = namespace(labels=RESTRICTED)
    minted = Minted()
    pods = _pods(control_plane, ns, FAIL, minted)
    pods.launch_hypothesis(JOB, 2, 0, None)
    wait_until(lambda: pods.hypothesis_status("r1", 0, 2, 0).finished, what="the pod's end", timeout=120)
    state = pods.hypothesis_status("r1", 0, 2, 0)
    assert state.error is not None and state.error.startswith("worker_failed"), state.error
    batch = client.BatchV1Api(control_plane.api)
    names = sorted(j.metadata.name for j in batch.list_namespaced_job(ns).items)
    assert names == ["crucible-r1-0-t2-h0", "crucible-r1-0-t2-h0-a1"], "started again in the same turn"
    assert minted.calls == [(2, 0), (2, 0)]
    pods.close()


def test_the_dry_run_of_a_parallel_run_prints_a_hypothesis_job_the_api_server_accepts(
    control_plane: ControlPlane, namespace: Any, tmp_path: Path
) -> None:
    text = 'objective = "x"\n[agent]\ncommand = "true"\n[metric]\ncommand = "true"\nname = "m"\n'
    text += 'samples = 10\n[[component]]\nname = "app"\nrepo = "."\n'
    text += '[broker]\nkind = "kubernetes"\nimage = "crucible:test"\n'
    text += "parallel = 3\n"
    manifests = round_manifests(parse_spec(text, tmp_path), {"app": "0" * 40}, 5)
    assert manifests is not None
    job, _secret = manifests
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["CRUCIBLE_SLOT"], env["CRUCIBLE_PARALLEL_INDEX"]) == ("1", "0")
    ns = namespace(labels=RESTRICTED)
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
    out = control_plane.run_kubectl("-n", ns, "apply", "--dry-run=server", "-f", "-", input=listed).stdout
    assert "job.batch/crucible-r0-dry-run-0-t1-h0 created (server dry run)" in out
    assert "secret/crucible-r0-dry-run-0-t1-h0-token created (server dry run)" in out


def test_warm_starts_each_slots_pod_before_any_offer_and_the_first_turn_starts_no_second(
    control_plane: ControlPlane, namespace: Any
) -> None:
    ns = namespace(labels=RESTRICTED)
    minted, offers = Minted(), Offers()
    first = _pods(control_plane, ns, SLEEP, minted, offers)
    job = RoundJob(run_id="r1", round=0, turns=1, first_turn=1, heads={"app": "a" * 40})
    first.warm(job, 2)
    assert minted.calls == [(1, 0), (1, 1)] and offers.offered == [], "pods, and nothing offered"
    first.close()
    # A restarted controller warming again (its baseline was cut off) adopts them and starts none.
    second = _pods(control_plane, ns, SLEEP, minted, offers)
    second.warm(job, 2)
    assert not second.launch_hypothesis(job, 1, 0, None).finished
    assert not second.launch_hypothesis(job, 1, 1, None).finished
    assert minted.calls == [(1, 0), (1, 1)], "the first turn's hypotheses went to the warm pods"
    assert offers.offered == [(1, 0, None), (1, 1, None)]
    batch = client.BatchV1Api(control_plane.api)
    names = sorted(j.metadata.name for j in batch.list_namespaced_job(ns).items)
    assert names == ["crucible-r1-0-t1-h0", "crucible-r1-0-t1-h1"]
    second.close()

"""``KubernetesBroker`` beyond the contract, on the real control plane: the pod passes Pod Security
"restricted", the token stays out of the pod spec, a restarted controller adopts its Jobs, and pods that
end badly (deleted, evicted, OOM-killed, past the deadline) are FAILED rounds with a named reason."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from controller.brokers.kubernetes import manifest
from controller.brokers.kubernetes.broker import FailureReason, KubernetesBroker
from controller.config.agent import PRESET_NAMES
from controller.config.spec import parse_spec
from controller.domain.errors import ConflictError
from controller.domain.jobs import RoundState
from controller.services.control.dryrun import round_manifests
from tests.brokers.test_contract import WAIT, Script, job
from tests.k8s.broker_harness import RESTRICTED, FakeController, harness, loop_spec, make_broker
from tests.k8s.conftest import ControlPlane, wait_until

__all__ = ["harness"]
Harness = tuple[FakeController, Script]


def started(script: Script, key: tuple[str, int, int] = ("r1", 0, 0)) -> None:
    assert script.gate(key)[0].wait(WAIT), f"round {key} started"


def jobs_of(control_plane: ControlPlane, ns: str) -> list[Any]:
    return list(client.BatchV1Api(control_plane.api).list_namespaced_job(ns).items)


def the_pod(control_plane: ControlPlane, ns: str, name: str = "crucible-r1-0") -> Any:
    core = client.CoreV1Api(control_plane.api)
    (pod,) = core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items
    return pod


def test_the_pod_passes_pod_security_restricted_and_a_weaker_one_would_not(
    control_plane: ControlPlane, namespace: Callable[..., str]
) -> None:
    ns = namespace(labels=RESTRICTED)
    core = client.CoreV1Api(control_plane.api)
    spec = loop_spec(ns)
    env = {"CRUCIBLE_CONTROLLER_URL": "http://c", "CRUCIBLE_RUN_ID": "r1", "CRUCIBLE_ROUND": "0"}
    template = manifest.job_manifest(job(), spec, env)["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": template["spec"]}
    core.create_namespaced_pod(ns, pod, dry_run="All")  # admitted
    weaker = copy.deepcopy(pod)
    del weaker["spec"]["containers"][0]["securityContext"]["capabilities"]
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(ns, weaker, dry_run="All")
    assert refused.value.status == 403 and "restricted" in str(refused.value.body)


def test_the_token_is_in_a_secret_owned_by_the_job_not_in_the_pod_spec(
    control_plane: ControlPlane, harness: Harness
) -> None:
    controller, script = harness
    broker = make_broker(control_plane, controller)
    broker.launch(job())
    started(script)
    (created,) = jobs_of(control_plane, controller.namespace)
    text = str(created.to_dict())
    (token,) = controller.tokens
    assert token not in text
    labels = created.spec.template.metadata.labels
    assert labels["app.kubernetes.io/component"] == "loop" and labels[manifest.LABEL_ROUND] == "0"
    pod_spec = created.spec.template.spec
    assert pod_spec.automount_service_account_token is False
    assert (created.spec.backoff_limit, created.spec.ttl_seconds_after_finished) == (0, 600)
    secret = client.CoreV1Api(control_plane.api).read_namespaced_secret(
        manifest.secret_name("r1", 0), controller.namespace
    )
    (owner,) = secret.metadata.owner_references
    assert (owner.kind, owner.uid) == ("Job", created.metadata.uid)
    script.gate(("r1", 0, 0))[1].set()
    assert broker.wait("r1", 0, WAIT).state is RoundState.SUCCEEDED
    broker.close()


def test_a_restarted_controller_adopts_the_running_job_and_creates_no_second(
    control_plane: ControlPlane, harness: Harness
) -> None:
    controller, script = harness
    first = make_broker(control_plane, controller)
    first.launch(job())
    started(script)
    first.close()  # the controller dies; its Job runs on

    second = make_broker(control_plane, controller)
    (adopted,) = second.in_flight(controller.namespace)
    assert (adopted.run_id, adopted.round, adopted.state) == ("r1", 0, RoundState.RUNNING)
    assert second.launch(job()).state is RoundState.RUNNING, "the relaunch finds the Job"
    with pytest.raises(ConflictError):
        second.launch(job(turns=9))
    script.gate(("r1", 0, 0))[1].set()
    report = second.wait("r1", 0, WAIT)
    assert report.state is RoundState.SUCCEEDED and report.outcome is not None
    assert len(jobs_of(control_plane, controller.namespace)) == 1
    assert controller.minted == [("r1", 0)], "no second token, so the running worker's stays good"
    assert controller.revoked == [("r1", 0)], "the round is over: its token is revoked once"
    assert script.ran == [("r1", 0, 0)]
    second.close()


def test_a_fresh_controller_asked_about_a_finished_round_reads_it_from_the_cluster(
    control_plane: ControlPlane, harness: Harness
) -> None:
    controller, script = harness
    script.gate(("r1", 0, 0))[1].set()
    first = make_broker(control_plane, controller)
    first.launch(job())
    done = first.wait("r1", 0, WAIT)
    first.close()
    second = make_broker(control_plane, controller)
    assert second.status("r1", 0) == done
    second.close()


def _gone_or_deleting(control_plane: ControlPlane, ns: str, name: str) -> bool:
    found = {j.metadata.name: j for j in jobs_of(control_plane, ns)}.get(name)
    return found is None or found.metadata.deletion_timestamp is not None


def _no_pod_runs(control_plane: ControlPlane, ns: str, name: str) -> bool:
    pods = (
        client.CoreV1Api(control_plane.api).list_namespaced_pod(ns, label_selector=f"job-name={name}").items
    )
    return all(p.metadata.deletion_timestamp is not None or p.status.phase != "Running" for p in pods)


def test_a_takeover_adopts_the_latest_attempts_job_not_the_first(
    control_plane: ControlPlane, harness: Harness
) -> None:
    controller, script = harness
    first = make_broker(control_plane, controller)
    first.launch(job())
    started(script)
    client.CoreV1Api(control_plane.api).delete_namespaced_pod(
        the_pod(control_plane, controller.namespace).metadata.name, controller.namespace
    )
    assert first.wait("r1", 0, WAIT).state is RoundState.FAILED
    first.launch(job(attempt=1))  # the relaunch after the lost pod
    started(script, ("r1", 0, 1))
    first.close()  # then this controller dies

    second = make_broker(control_plane, controller)
    report = second.status("r1", 0)
    assert report.state is RoundState.RUNNING, "the running attempt 1, not the failed attempt 0"
    script.gate(("r1", 0, 1))[1].set()
    assert second.wait("r1", 0, WAIT).state is RoundState.SUCCEEDED
    assert sorted(j.metadata.name for j in jobs_of(control_plane, controller.namespace)) == [
        "crucible-r1-0",
        "crucible-r1-0-a1",
    ]
    second.close()


def test_a_new_attempt_deletes_the_job_an_earlier_controller_left_running(
    control_plane: ControlPlane, harness: Harness
) -> None:
    controller, script = harness
    first = make_broker(control_plane, controller)
    first.launch(job())
    started(script)
    first.close()  # the controller dies; its Job runs on

    second = make_broker(control_plane, controller)  # the replica that took the run over
    second.launch(job(attempt=1))
    ns = controller.namespace
    wait_until(lambda: _gone_or_deleting(control_plane, ns, "crucible-r1-0"), what="attempt 0's Job deleted")
    wait_until(lambda: _no_pod_runs(control_plane, ns, "crucible-r1-0"), what="attempt 0's pod stopped")
    started(script, ("r1", 0, 1))
    script.gate(("r1", 0, 1))[1].set()
    assert second.wait("r1", 0, WAIT).state is RoundState.SUCCEEDED
    wait_until(
        lambda: [j.metadata.name for j in jobs_of(control_plane, ns)] == ["crucible-r1-0-a1"],
        what="only the new attempt's Job left (foreground deletion done)",
    )
    second.close()


def test_a_cancel_deletes_every_attempts_job(control_plane: ControlPlane, harness: Harness) -> None:
    controller, script = harness
    ns = controller.namespace
    first = make_broker(control_plane, controller)
    first.launch(job())
    started(script)
    first.close()
    # A later attempt's Job some other controller created (its pod waits for a token Secret that
    # never came: it stays unfinished).
    orphan = manifest.job_manifest(
        job(attempt=1), loop_spec(ns), {"CRUCIBLE_RUN_ID": "r1"}, command=("true",)
    )
    client.BatchV1Api(control_plane.api).create_namespaced_job(ns, orphan)

    second = make_broker(control_plane, controller)
    second.cancel("r1", 0)
    assert second.wait("r1", 0, WAIT).state is RoundState.CANCELLED
    wait_until(lambda: not jobs_of(control_plane, ns), what="every attempt's Job deleted")
    second.close()


def failed_reason(broker: KubernetesBroker) -> str:
    report = broker.wait("r1", 0, WAIT)
    assert report.state is RoundState.FAILED, report
    assert report.error is not None
    return report.error


def test_a_pod_deleted_mid_round_is_a_failed_round_naming_it(
    control_plane: ControlPlane, harness: Harness
) -> None:
    controller, script = harness
    broker = make_broker(control_plane, controller)
    broker.launch(job())
    started(script)
    client.CoreV1Api(control_plane.api).delete_namespaced_pod(
        the_pod(control_plane, controller.namespace).metadata.name, controller.namespace
    )
    assert failed_reason(broker).startswith(f"{FailureReason.POD_LOST}: the pod was deleted")
    broker.close()


def test_an_evicted_pod_is_a_failed_round_naming_the_eviction(
    control_plane: ControlPlane, harness: Harness
) -> None:
    controller, script = harness
    broker = make_broker(control_plane, controller)
    broker.launch(job())
    started(script)
    name = the_pod(control_plane, controller.namespace).metadata.name
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=controller.namespace))
    client.CoreV1Api(control_plane.api).create_namespaced_pod_eviction(name, controller.namespace, eviction)
    assert failed_reason(broker).startswith(f"{FailureReason.EVICTED}: ")
    broker.close()


def test_an_oom_killed_pod_is_a_failed_round_naming_the_memory_limit(
    control_plane: ControlPlane, harness: Harness
) -> None:
    """The process node enforces no limits (ADR-0006): the API reports the kill, as a kubelet would."""
    controller, script = harness
    broker = make_broker(control_plane, controller)
    broker.launch(job())
    started(script)
    pod = the_pod(control_plane, controller.namespace)
    terminated = {"exitCode": 137, "reason": "OOMKilled", "startedAt": None, "finishedAt": None}
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": manifest.CONTAINER,
                "image": "crucible:test",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        ],
    }
    client.CoreV1Api(control_plane.api).patch_namespaced_pod_status(
        pod.metadata.name, controller.namespace, {"status": status}
    )
    error = failed_reason(broker)
    assert error.startswith(f"{FailureReason.OOM_KILLED}: ") and "limits.memory" in error
    broker.close()


def test_a_round_past_its_deadline_is_a_failed_round_naming_it(
    control_plane: ControlPlane, harness: Harness
) -> None:
    controller, _ = harness
    controller.deadline = 2
    broker = make_broker(control_plane, controller)
    broker.launch(job())
    assert failed_reason(broker).startswith(f"{FailureReason.DEADLINE_EXCEEDED}: ")
    wait_until(
        lambda: not any(p.status.phase == "Running" for p in _pods(control_plane, controller)),
        what="pod gone",
    )
    broker.close()


def _pods(control_plane: ControlPlane, controller: FakeController) -> list[Any]:
    return list(client.CoreV1Api(control_plane.api).list_namespaced_pod(controller.namespace).items)


def test_a_job_deleted_by_someone_else_is_a_failed_round(
    control_plane: ControlPlane, harness: Harness
) -> None:
    controller, script = harness
    broker = make_broker(control_plane, controller)
    broker.launch(job())
    started(script)
    client.BatchV1Api(control_plane.api).delete_namespaced_job(
        "crucible-r1-0", controller.namespace, propagation_policy="Foreground"
    )
    error = failed_reason(broker)
    assert error.split(":")[0] in (FailureReason.JOB_DELETED, FailureReason.POD_LOST), error
    broker.close()


@pytest.mark.parametrize("hypothesis", [None, (3, 1)])
def test_the_token_reaches_the_worker_only_as_an_environment_variable_never_a_volume(
    hypothesis: tuple[int, int] | None,
) -> None:
    """Issue 21: a file in the pod is readable by the agent; the worker takes its token out of its own
    environment and closes its /proc (``workspace.selfguard``), which a mounted file would defeat."""
    env = {"CRUCIBLE_CONTROLLER_URL": "http://c", "CRUCIBLE_WORKER_TOKEN": "t0k3n-of-the-round-0123456789"}
    spec = loop_spec("ns").model_copy(update={"agent_secret": "agent-keys"})
    created = manifest.job_manifest(job(), spec, env, hypothesis=hypothesis)
    pod = created["spec"]["template"]["spec"]
    assert "t0k3n" not in json.dumps(pod)
    assert all(set(volume) == {"name", "emptyDir"} for volume in pod["volumes"]), pod["volumes"]
    (container,) = pod["containers"]
    token_refs = [e for e in container["env"] if e["name"] == manifest.TOKEN_VARIABLE]
    assert token_refs == [
        {
            "name": manifest.TOKEN_VARIABLE,
            "valueFrom": {"secretKeyRef": {"name": created["metadata"]["name"] + "-token", "key": "token"}},
        }
    ]
    assert container["envFrom"] == [{"secretRef": {"name": "agent-keys"}}]  # the agent's keys, not the token


def test_round_job_names_are_dns_labels_and_stable() -> None:
    assert manifest.job_name("rsm2k4f-3fa9c1", 2) == "crucible-rsm2k4f-3fa9c1-2"
    odd = manifest.job_name("Run_With.Odd/Chars" * 5, 12)
    assert len(odd) <= 63 and odd == manifest.job_name("Run_With.Odd/Chars" * 5, 12)
    assert odd != manifest.job_name("run-with-odd-chars" * 5, 12), "a digest keeps slugged ids apart"


@pytest.mark.parametrize("agent", ['command = "true"', *(f'preset = "{name}"' for name in PRESET_NAMES)])
def test_the_dry_runs_manifests_are_accepted_by_the_api_server_as_printed(
    control_plane: ControlPlane, namespace: Callable[..., str], tmp_path: Path, agent: str
) -> None:
    text = f'objective = "x"\n[agent]\n{agent}\n[metric]\ncommand = "true"\nname = "m"\n'
    text += (
        '[[component]]\nname = "app"\nrepo = "."\n[broker]\nkind = "kubernetes"\nimage = "crucible:test"\n'
    )
    text += 'agent_secret = "loop-agent"\ntolerations = [{ key = "gpu", operator = "Exists" }]\n'
    manifests = round_manifests(parse_spec(text, tmp_path), {"app": "0" * 40}, 3)
    assert manifests is not None
    ns = namespace(labels=RESTRICTED)
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
    out = control_plane.run_kubectl("-n", ns, "apply", "--dry-run=server", "-f", "-", input=listed).stdout
    assert "job.batch/crucible-r0-dry-run-0 created (server dry run)" in out
    assert "secret/crucible-r0-dry-run-0-token created (server dry run)" in out
    (container,) = manifests[0]["spec"]["template"]["spec"]["containers"]
    assert container["envFrom"] == [{"secretRef": {"name": "loop-agent"}}]  # a preset's key comes from it

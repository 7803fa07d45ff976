"""Contract smoke tests against the real API server and Job controller, with the process node running pods.

These pin the Kubernetes behaviours the broker relies on: Pod Security admission at "restricted", a Job's
pod running its command with the pod's environment and reporting its exit code, Complete and Failed Jobs
(backoffLimit 0, activeDeadlineSeconds), logs through the API, and foreground deletion removing the pods
and killing their processes.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.k8s.conftest import ControlPlane, wait_until

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def restricted_container(name: str, command: list[str], **extra: Any) -> client.V1Container:
    """A container spec that satisfies Pod Security "restricted" (what the broker's loop pods look like)."""
    return client.V1Container(
        name=name,
        image="crucible:test",
        command=command,
        security_context=client.V1SecurityContext(
            allow_privilege_escalation=False,
            run_as_non_root=True,
            run_as_user=10001,
            read_only_root_filesystem=True,
            capabilities=client.V1Capabilities(drop=["ALL"]),
            seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
        ),
        resources=client.V1ResourceRequirements(
            requests={"cpu": "10m", "memory": "32Mi"}, limits={"memory": "256Mi"}
        ),
        **extra,
    )


def job(name: str, command: list[str], *, deadline: int | None = None, **container: Any) -> client.V1Job:
    pod = client.V1PodSpec(
        restart_policy="Never",
        automount_service_account_token=False,
        containers=[restricted_container("round", command, **container)],
    )
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name, labels={"crucible.dev/run": "r1"}),
        spec=client.V1JobSpec(
            backoff_limit=0,
            active_deadline_seconds=deadline,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"crucible.dev/run": "r1"}), spec=pod
            ),
        ),
    )


def job_condition(batch: client.BatchV1Api, ns: str, name: str) -> client.V1JobCondition | None:
    status = batch.read_namespaced_job_status(name, ns).status
    for cond in status.conditions or []:
        if cond.type in ("Complete", "Failed") and cond.status == "True":
            return cond
    return None


def finished(batch: client.BatchV1Api, ns: str, name: str) -> client.V1JobCondition:
    wait_until(lambda: job_condition(batch, ns, name) is not None, what=f"job {name} to finish", timeout=120)
    cond = job_condition(batch, ns, name)
    assert cond is not None
    return cond


def job_pods(core: client.CoreV1Api, ns: str, name: str) -> list[client.V1Pod]:
    return list(core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items)


def test_restricted_namespace_accepts_a_restricted_pod_and_refuses_a_privileged_one(
    control_plane: ControlPlane, namespace: Callable[..., str]
) -> None:
    ns = namespace(labels=RESTRICTED)
    core = client.CoreV1Api(control_plane.api)
    good = client.V1Pod(
        metadata=client.V1ObjectMeta(name="restricted"),
        spec=client.V1PodSpec(
            restart_policy="Never",
            automount_service_account_token=False,
            containers=[restricted_container("main", ["true"])],
        ),
    )
    core.create_namespaced_pod(ns, good)
    bad = client.V1Pod(
        metadata=client.V1ObjectMeta(name="privileged"),
        spec=client.V1PodSpec(
            restart_policy="Never",
            containers=[
                client.V1Container(
                    name="main",
                    image="crucible:test",
                    command=["true"],
                    security_context=client.V1SecurityContext(privileged=True),
                )
            ],
        ),
    )
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(ns, bad)
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert 'violates PodSecurity "restricted:latest"' in message
    assert "must not set securityContext.privileged=true" in message
    # a restricted-looking pod missing one requirement (seccomp) is refused too
    almost = client.V1Pod(metadata=client.V1ObjectMeta(name="almost"), spec=good.spec)
    almost.spec.containers[0].security_context.seccomp_profile = None
    with pytest.raises(client.ApiException) as refused_again:
        core.create_namespaced_pod(ns, almost)
    message = json.loads(refused_again.value.body)["message"]
    assert "seccompProfile" in message and "privileged" not in message


def test_a_job_runs_its_command_with_the_pods_environment_and_completes(
    control_plane: ControlPlane, namespace: Callable[..., str]
) -> None:
    ns = namespace(labels=RESTRICTED)
    core, batch = client.CoreV1Api(control_plane.api), client.BatchV1Api(control_plane.api)
    secret = f"agent-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_secret(
        ns, client.V1Secret(metadata=client.V1ObjectMeta(name=secret), string_data={"AGENT_KEY": "s3cret"})
    )
    env = [
        client.V1EnvVar(name="GREETING", value="hello"),
        client.V1EnvVar(name="WHO", value="$(GREETING) crucible"),
        client.V1EnvVar(
            name="POD",
            value_from=client.V1EnvVarSource(
                field_ref=client.V1ObjectFieldSelector(field_path="metadata.name")
            ),
        ),
    ]
    env_from = [client.V1EnvFromSource(secret_ref=client.V1SecretEnvSource(name=secret))]
    script = 'echo "who=$WHO pod=$POD key=$AGENT_KEY"; test -z "$KUBECONFIG"'
    batch.create_namespaced_job(ns, job("ok", ["sh", "-c", script], env=env, env_from=env_from))
    cond = finished(batch, ns, "ok")
    assert cond.type == "Complete", cond
    (pod,) = job_pods(core, ns, "ok")
    assert pod.status.phase == "Succeeded"
    assert pod.spec.node_name == control_plane.node
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (0, "Completed")
    log = core.read_namespaced_pod_log(pod.metadata.name, ns)
    assert log == f"who=hello crucible pod={pod.metadata.name} key=s3cret\n"


def test_a_failing_command_fails_the_job_at_once_with_its_exit_code(
    control_plane: ControlPlane, namespace: Callable[..., str]
) -> None:
    ns = namespace()
    core, batch = client.CoreV1Api(control_plane.api), client.BatchV1Api(control_plane.api)
    batch.create_namespaced_job(ns, job("bad", ["sh", "-c", "echo about to fail; exit 3"]))
    cond = finished(batch, ns, "bad")
    assert (cond.type, cond.reason) == ("Failed", "BackoffLimitExceeded")
    (pod,) = job_pods(core, ns, "bad")  # backoffLimit 0: no second pod
    assert pod.status.phase == "Failed"
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (3, "Error")
    assert batch.read_namespaced_job_status("bad", ns).status.failed == 1


def test_a_missing_command_fails_the_pod_with_a_start_error(
    control_plane: ControlPlane, namespace: Callable[..., str]
) -> None:
    ns = namespace()
    core, batch = client.CoreV1Api(control_plane.api), client.BatchV1Api(control_plane.api)
    batch.create_namespaced_job(ns, job("nocmd", ["/nonexistent/crucible-worker"]))
    assert finished(batch, ns, "nocmd").type == "Failed"
    (pod,) = job_pods(core, ns, "nocmd")
    assert pod.status.container_statuses[0].state.terminated.reason == "StartError"


# Kubernetes turns $$ into $ in a command ($(VAR) expands), so the shell's own pid is $$$$ in a pod spec.
def running_pid(core: client.CoreV1Api, ns: str, name: str, pid_file: Path) -> int:
    def started() -> bool:
        pods = job_pods(core, ns, name)
        return (
            bool(pods)
            and pods[0].status.phase == "Running"
            and pid_file.exists()
            and pid_file.read_text() != ""
        )

    wait_until(started, what=f"job {name}'s pod to run")
    return int(pid_file.read_text())


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_foreground_deletion_removes_the_pods_and_kills_their_processes(
    control_plane: ControlPlane, namespace: Callable[..., str], tmp_path: Path
) -> None:
    ns = namespace()
    core, batch = client.CoreV1Api(control_plane.api), client.BatchV1Api(control_plane.api)
    pid_file = tmp_path / "pid"
    batch.create_namespaced_job(ns, job("long", ["sh", "-c", f"echo $$$$ > {pid_file}; exec sleep 300"]))
    pid = running_pid(core, ns, "long", pid_file)
    assert alive(pid)
    answer = batch.delete_namespaced_job("long", ns, propagation_policy="Foreground", _preload_content=False)
    # foreground: the Job stays, marked, until the garbage collector has removed its pods
    marked = json.loads(answer.data)
    assert marked["kind"] == "Job" and "foregroundDeletion" in marked["metadata"]["finalizers"]

    def gone() -> bool:
        try:
            batch.read_namespaced_job("long", ns)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    wait_until(gone, what="the job to be deleted")
    assert job_pods(core, ns, "long") == []
    wait_until(lambda: not alive(pid), what=f"process {pid} to end", timeout=30)


def test_active_deadline_fails_the_job_and_stops_its_pod(
    control_plane: ControlPlane, namespace: Callable[..., str], tmp_path: Path
) -> None:
    ns = namespace()
    core, batch = client.CoreV1Api(control_plane.api), client.BatchV1Api(control_plane.api)
    pid_file = tmp_path / "pid"
    batch.create_namespaced_job(
        ns, job("slow", ["sh", "-c", f"echo $$$$ > {pid_file}; exec sleep 300"], deadline=2)
    )
    pid = running_pid(core, ns, "slow", pid_file)
    cond = finished(batch, ns, "slow")
    assert (cond.type, cond.reason) == ("Failed", "DeadlineExceeded")
    wait_until(lambda: not alive(pid), what=f"process {pid} to end", timeout=30)


def test_deleting_a_running_pod_fails_its_job_without_a_second_pod(
    control_plane: ControlPlane, namespace: Callable[..., str], tmp_path: Path
) -> None:
    # What the broker sees when a loop pod is lost mid-turn (deleted, evicted, its node gone).
    ns = namespace()
    core, batch = client.CoreV1Api(control_plane.api), client.BatchV1Api(control_plane.api)
    pid_file = tmp_path / "pid"
    batch.create_namespaced_job(ns, job("lost", ["sh", "-c", f"echo $$$$ > {pid_file}; exec sleep 300"]))
    pid = running_pid(core, ns, "lost", pid_file)
    (pod,) = job_pods(core, ns, "lost")
    core.delete_namespaced_pod(pod.metadata.name, ns)
    cond = finished(batch, ns, "lost")
    assert (cond.type, cond.reason) == ("Failed", "BackoffLimitExceeded")
    wait_until(lambda: not alive(pid), what=f"process {pid} to end", timeout=30)
    assert [p.metadata.uid for p in job_pods(core, ns, "lost")] in ([], [pod.metadata.uid])


def test_deleting_a_pod_also_ends_what_it_started_in_a_session_of_its_own(
    control_plane: ControlPlane, namespace: Callable[..., str], tmp_path: Path
) -> None:
    # A worker runs its agent in a session of its own (to kill it alone); a runtime ending the
    # container ends the agent with it, and so must the process node, or agents outlive their pods.
    ns = namespace()
    core, batch = client.CoreV1Api(control_plane.api), client.BatchV1Api(control_plane.api)
    pid_file = tmp_path / "pid"
    script = (
        "import subprocess, sys\n"
        "agent = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "open(sys.argv[1], 'w').write(str(agent.pid))\n"
        "agent.wait()\n"
    )
    batch.create_namespaced_job(ns, job("agent", [sys.executable, "-c", script, str(pid_file)]))
    agent = running_pid(core, ns, "agent", pid_file)
    assert alive(agent)
    (pod,) = job_pods(core, ns, "agent")
    core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=1)
    wait_until(lambda: not alive(agent), what=f"the agent {agent} to end with its pod", timeout=30)


def test_following_a_pods_log_streams_until_its_process_ends(
    control_plane: ControlPlane, namespace: Callable[..., str], tmp_path: Path
) -> None:
    ns = namespace()
    core, batch = client.CoreV1Api(control_plane.api), client.BatchV1Api(control_plane.api)
    gate = tmp_path / "gate"
    script = f"echo $$$$ > {tmp_path / 'pid'}; echo one; while [ ! -e {gate} ]; do sleep 0.05; done; echo two"
    batch.create_namespaced_job(ns, job("chatty", ["sh", "-c", script]))
    running_pid(core, ns, "chatty", tmp_path / "pid")
    (pod,) = job_pods(core, ns, "chatty")
    stream = core.read_namespaced_pod_log(pod.metadata.name, ns, follow=True, _preload_content=False)
    first = stream.read(4)
    gate.touch()  # the second line is written only after the first was received
    rest = stream.read()
    assert first + rest == b"one\ntwo\n"
    assert core.read_namespaced_pod_log(pod.metadata.name, ns, tail_lines=1) == "two\n"

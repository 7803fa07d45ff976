"""What a round's pod showed before it ended: the evidence behind a FAILED round's named reason.

A Job whose pod failed says only ``BackoffLimitExceeded``; the reason a person can act on (evicted,
OOM-killed, deleted, exited 3 with this message) is on the pod, and an evicted or deleted pod is gone
from the API moments later. So the broker watches the loop pods of every namespace it uses and keeps,
per Job, the strongest evidence it saw: a later "deleted" does not hide an earlier "evicted".
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from kubernetes import client, watch

LOOP_PODS = "app.kubernetes.io/component=loop,app.kubernetes.io/managed-by=crucible"
LOG_LINES = 5
WATCH_S = 60  # a watch is renewed this often (the API server ends long ones anyway)
START_FAILURES = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "StartError", "ContainerCannotRun"}
# Stronger evidence wins: an eviction or an OOM kill explains the exit code and the deletion after it.
_STRENGTH = {
    "evicted": 5,
    "oom_killed": 5,
    "deadline_exceeded": 4,
    "start_failed": 3,
    "worker_failed": 2,
    "pod_lost": 1,
}


@dataclass
class PodEvidence:
    """``reason`` is a ``FailureReason`` value (None while nothing went wrong); ``running`` once the
    pod was seen Running."""

    reason: str | None = None
    detail: str = ""
    running: bool = False


def classify(pod: Any, deleted: bool = False) -> tuple[str, str] | None:
    """``(reason, detail)`` when ``pod`` shows why it failed; None for a healthy or succeeded pod."""
    status = pod.status
    if status is None:
        return ("pod_lost", "the pod was deleted before it started") if deleted else None
    for condition in status.conditions or []:
        if condition.type == "DisruptionTarget" and condition.status == "True":
            return "evicted", f"{condition.reason}: {condition.message or 'the pod was disrupted'}"
    if status.reason == "Evicted":
        return "evicted", status.message or "the node evicted the pod"
    if status.reason == "DeadlineExceeded":
        return "deadline_exceeded", status.message or "the pod ran past broker.deadline"
    for container in status.container_statuses or []:
        state = container.state
        if state is None:
            continue
        if state.terminated is not None:
            term = state.terminated
            if term.reason == "OOMKilled":
                return "oom_killed", "the worker ran out of its memory limit (broker.resources.limits.memory)"
            if term.reason in START_FAILURES:
                return "start_failed", f"{term.reason}: {term.message or 'the container could not start'}"
            if term.reason == "ProcessNodeRestarted":
                return "pod_lost", "the pod's node restarted while it ran"
            if term.exit_code:
                return "worker_failed", f"crucible worker exited {term.exit_code}"
        if state.waiting is not None and state.waiting.reason in START_FAILURES:
            return "start_failed", f"{state.waiting.reason}: {state.waiting.message or ''}".strip()
    if deleted and status.phase not in ("Succeeded", "Failed"):
        return "pod_lost", "the pod was deleted before it finished"
    return None


class PodWatch:
    """Watches loop pods per namespace (``follow``) and keeps the evidence per Job name."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self._core = core
        self._evidence: dict[tuple[str, str], PodEvidence] = {}
        self._namespaces: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def follow(self, namespace: str) -> None:
        with self._lock:
            if namespace in self._namespaces:
                return
            self._namespaces.add(namespace)
        thread = threading.Thread(
            target=self._watch, args=(namespace,), name=f"pods-{namespace}", daemon=True
        )
        thread.start()

    def evidence(self, namespace: str, job: str) -> PodEvidence:
        """What was seen of ``job``'s pod, after reading its pods once more (the watch may lag)."""
        try:
            pods = self._core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
        except client.ApiException:
            pods = []
        pod: Any
        for pod in pods:
            self._record(namespace, pod, deleted=pod.metadata.deletion_timestamp is not None)
        with self._lock:
            seen = self._evidence.get((namespace, job), PodEvidence())
            return PodEvidence(seen.reason, seen.detail, seen.running)

    def close(self) -> None:
        self._stop.set()

    def _watch(self, namespace: str) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    listed: Any = self._core.list_namespaced_pod(namespace, label_selector=LOOP_PODS)
                    for pod in listed.items:
                        self._record(namespace, pod)
                    version = listed.metadata.resource_version
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self._core.list_namespaced_pod,
                    namespace,
                    label_selector=LOOP_PODS,
                    resource_version=version,
                    timeout_seconds=WATCH_S,
                )
                for event in stream:
                    pod = event["object"]
                    version = pod.metadata.resource_version
                    self._record(namespace, pod, deleted=event["type"] == "DELETED")
                    if self._stop.is_set():
                        return
            except client.ApiException as exc:
                if exc.status == 410:  # too old: relist
                    version = ""
                else:
                    self._stop.wait(1.0)
            except Exception:  # a dropped connection: watch again from where it was
                self._stop.wait(1.0)

    def _record(self, namespace: str, pod: Any, deleted: bool = False) -> None:
        job = (pod.metadata.labels or {}).get("job-name")
        if job is None:
            return
        found = classify(pod, deleted)
        running = pod.status is not None and pod.status.phase == "Running"
        with self._lock:
            seen = self._evidence.setdefault((namespace, job), PodEvidence())
            seen.running = seen.running or running
            if found is not None and _STRENGTH[found[0]] > _STRENGTH.get(seen.reason or "", 0):
                seen.reason, seen.detail = found
                if found[0] == "worker_failed":
                    seen.detail += self._log_tail(namespace, pod.metadata.name)

    def _log_tail(self, namespace: str, pod: str) -> str:
        try:
            text = self._core.read_namespaced_pod_log(pod, namespace, tail_lines=LOG_LINES)
        except client.ApiException:
            return ""
        lines = [line for line in str(text).splitlines() if line.strip()]
        return (": " + " | ".join(lines))[:600] if lines else ""

"""``ConfirmPods``: confirmations of claimed keeps as Kubernetes Jobs (ADR-0043).

A confirmation is ``crucible worker`` with a confirmation's token, in a pod of its own: the round's
pod spec (the Pod Security "restricted" profile, the image, requests, limits, deadline, TTL,
``backoffLimit: 0``), named ``crucible-<run>-<round>-t<turn>-c<claim>`` after the claim it
measures, without the agent's Secret (no agent runs in it). The name is the same in any process, so
a restarted controller that finds the Job adopts it instead of starting a second; what the
confirmation concluded comes from its report to the controller, never from the pod. A Job that
ended without a report is finished with an error starting with a named ``FailureReason``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes import client

from controller.brokers.base import HypothesisPod
from controller.brokers.kubernetes import manifest
from controller.brokers.kubernetes.broker import FailureReason, SpecFor, _api_error, finished_job
from controller.brokers.kubernetes.pods import PodWatch
from controller.domain.errors import NotFoundError
from controller.domain.jobs import RoundJob


class ConfirmPods:
    """See the module docstring. ``namespace``: the controller's own, for runs whose spec names none."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        spec_for: SpecFor,
        namespace: str = "default",
        command: tuple[str, ...] = manifest.DEFAULT_COMMAND,
    ) -> None:
        self._batch = client.BatchV1Api(api)
        self._core = client.CoreV1Api(api)
        self._spec_for = spec_for
        self._namespace = namespace
        self._command = command
        self._pods = PodWatch(self._core)

    def launch_confirmation(self, job: RoundJob, turn: int, claim: str, env: Mapping[str, str]) -> None:
        namespace = self._where(job.run_id)
        self._pods.follow(namespace)
        spec = self._spec_for(job.run_id)
        scope = (turn, claim)
        body: Any = manifest.job_manifest(job, spec, env, command=self._command, confirm=scope)
        name = body["metadata"]["name"]
        try:
            created: Any = self._batch.create_namespaced_job(namespace, body)
        except client.ApiException as exc:
            if exc.status == 409:  # started already (by this controller or the one before it)
                return
            raise _api_error(exc, f"creating Job {namespace}/{name}") from exc
        token = env.get(manifest.TOKEN_VARIABLE, "")
        secret: Any = manifest.secret_manifest(
            job, spec, token, owner_uid=created.metadata.uid, confirm=scope
        )
        try:
            self._core.create_namespaced_secret(namespace, secret)
        except client.ApiException as exc:
            if exc.status != 409:
                raise _api_error(exc, f"creating the token Secret of Job {name}") from exc

    def confirmation_status(self, run_id: str, round: int, turn: int, claim: str) -> HypothesisPod:
        namespace = self._where(run_id)
        name = manifest.confirm_job_name(run_id, round, turn, claim)
        try:
            found: Any = self._batch.read_namespaced_job(name, namespace)
        except client.ApiException as exc:
            if exc.status == 404:
                raise NotFoundError(f"no confirmation Job {namespace}/{name}") from exc
            raise _api_error(exc, f"reading Job {namespace}/{name}") from exc
        ended = finished_job(found, lambda: self._pods.evidence(namespace, name))
        if ended is not None:
            return ended
        if found.metadata.deletion_timestamp is not None:
            return HypothesisPod(True, f"{FailureReason.JOB_DELETED}: Job {namespace}/{name} was deleted")
        return HypothesisPod(False)

    def close(self) -> None:
        self._pods.close()

    def _where(self, run_id: str) -> str:
        return self._spec_for(run_id).namespace or self._namespace

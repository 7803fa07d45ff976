"""``HypothesisPods``: each parallel hypothesis of a turn in a Job of its own (ADR-0018).

With ``broker.parallel = N`` on Kubernetes the controller drives the round's turns itself, and each
turn launches N Jobs, ``crucible-<run>-<round>-t<turn>-h<index>``, whose pods run ``crucible worker``
for that one hypothesis (its token is scoped to it: ``RemoteRounds.mint_hypothesis_env``). The pod
spec is a round's (the Pod Security "restricted" profile, requests, limits, deadline, TTL,
``backoffLimit: 0``); only the name, two labels and the environment differ. As for rounds, the
cluster is the record of what runs: a launch whose Job exists adopts it, so a restarted controller
never starts a second pod for a hypothesis; what a hypothesis concluded comes from its report to the
controller, never from the pod. A pod that ends any other way is a finished hypothesis whose error
starts with a named ``FailureReason``. Cancel deletes the Job with foreground propagation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client

from controller.brokers.base import HypothesisPod
from controller.brokers.kubernetes import manifest
from controller.brokers.kubernetes.broker import FailureReason, SpecFor, _api_error, _failure
from controller.brokers.kubernetes.pods import PodWatch
from controller.domain.errors import NotFoundError
from controller.domain.jobs import RoundJob

MintHypothesisEnv = Callable[[RoundJob, int, int, Mapping[str, Any] | None], dict[str, str]]


class HypothesisPods:
    """See the module docstring. ``namespace``: the controller's own, for runs whose spec names none."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        mint_hypothesis_env: MintHypothesisEnv,
        spec_for: SpecFor,
        namespace: str = "default",
        command: tuple[str, ...] = manifest.DEFAULT_COMMAND,
    ) -> None:
        self._batch = client.BatchV1Api(api)
        self._core = client.CoreV1Api(api)
        self._mint = mint_hypothesis_env
        self._spec_for = spec_for
        self._namespace = namespace
        self._command = command
        self._pods = PodWatch(self._core)
        self._cancelling: set[str] = set()

    def launch_hypothesis(
        self, job: RoundJob, turn: int, index: int, proposal: Mapping[str, Any] | None
    ) -> HypothesisPod:
        namespace = self._where(job.run_id)
        name = manifest.hypothesis_job_name(job.run_id, job.round, turn, index)
        self._pods.follow(namespace)
        if self._read(namespace, name) is None:
            self._create(job, turn, index, proposal, namespace)
        return self.hypothesis_status(job.run_id, job.round, turn, index)

    def hypothesis_status(self, run_id: str, round: int, turn: int, index: int) -> HypothesisPod:
        namespace = self._where(run_id)
        name = manifest.hypothesis_job_name(run_id, round, turn, index)
        found = self._read(namespace, name)
        if found is None:
            if name in self._cancelling:
                return HypothesisPod(True, f"{FailureReason.JOB_DELETED}: cancelled with the run")
            raise NotFoundError(f"hypothesis {index} of turn {turn} of run {run_id} has no Job {name}")
        status = found.status
        conditions = {c.type: c for c in (status.conditions or [])} if status else {}
        complete, failed = conditions.get("Complete"), conditions.get("Failed")
        if complete is not None and complete.status == "True":
            return HypothesisPod(True)
        if failed is not None and failed.status == "True":
            return HypothesisPod(True, _failure(failed, self._pods.evidence(namespace, name)))
        if found.metadata.deletion_timestamp is not None and name not in self._cancelling:
            evidence = self._pods.evidence(namespace, name)
            if evidence.reason is not None:
                return HypothesisPod(True, f"{evidence.reason}: {evidence.detail}")
            return HypothesisPod(True, f"{FailureReason.JOB_DELETED}: Job {namespace}/{name} was deleted")
        return HypothesisPod(False)

    def cancel_hypothesis(self, run_id: str, round: int, turn: int, index: int) -> HypothesisPod:
        namespace = self._where(run_id)
        name = manifest.hypothesis_job_name(run_id, round, turn, index)
        self._cancelling.add(name)
        try:
            self._batch.delete_namespaced_job(name, namespace, propagation_policy="Foreground")
        except client.ApiException as exc:
            if exc.status != 404:
                raise _api_error(exc, f"deleting Job {namespace}/{name}") from exc
        return self.hypothesis_status(run_id, round, turn, index)

    def close(self) -> None:
        self._pods.close()

    def _where(self, run_id: str) -> str:
        return self._spec_for(run_id).namespace or self._namespace

    def _create(
        self, job: RoundJob, turn: int, index: int, proposal: Mapping[str, Any] | None, namespace: str
    ) -> None:
        spec = self._spec_for(job.run_id)
        env = self._mint(job, turn, index, proposal)
        token = env.get(manifest.TOKEN_VARIABLE, "")
        scope = (turn, index)
        body: Any = manifest.job_manifest(job, spec, env, command=self._command, hypothesis=scope)
        name = body["metadata"]["name"]
        try:
            created: Any = self._batch.create_namespaced_job(namespace, body)
        except client.ApiException as exc:
            if exc.status == 409:  # another launch won the race: its Job is the hypothesis's
                return
            raise _api_error(exc, f"creating Job {namespace}/{name}") from exc
        secret: Any = manifest.secret_manifest(
            job, spec, token, owner_uid=created.metadata.uid, hypothesis=scope
        )
        try:
            self._core.create_namespaced_secret(namespace, secret)
        except client.ApiException as exc:
            if exc.status != 409:
                raise _api_error(exc, f"creating the token Secret of Job {name}") from exc

    def _read(self, namespace: str, name: str) -> Any | None:
        try:
            return self._batch.read_namespaced_job(name, namespace)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise _api_error(exc, f"reading Job {namespace}/{name}") from exc

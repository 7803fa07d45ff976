"""``KubernetesBroker``: each round runs in one Job whose pod runs ``crucible worker`` (ADR-0015).

The cluster is the record of what runs: ``status`` reads the round's Job (found by its deterministic
name) and pods, so a controller that restarts finds its rounds where they are, and a relaunch of a
round whose Job exists adopts it instead of creating a second. What the round concluded comes from the
controller itself (``remote_outcome``: what the worker reported over the API, once accepted), never
from the pod. A pod that ends any other way is a FAILED round whose error starts with a named reason
(``FailureReason``). Cancel deletes the Job with foreground propagation, so its pod is gone before the
Job is.

Dependency inversion (ADR-0003): the composition root injects ``mint_worker_env`` (a per-round token
and the worker's environment), ``remote_outcome``, ``revoke`` (the round ended: its tokens die) and
``spec_for`` (the run's ``[broker]`` table);
this module knows nothing of the store or the services.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from kubernetes import client

from controller.brokers.base import BrokerCapabilities, HypothesisPod, RoundOutcome, RoundReport
from controller.brokers.kubernetes import manifest
from controller.brokers.kubernetes.pods import PodEvidence, PodWatch
from controller.config.broker import BrokerSpec
from controller.domain.enums import RunStatus, StopReason
from controller.domain.errors import ConflictError, CrucibleError, NotFoundError, RetryLaterError
from controller.domain.jobs import RoundJob, RoundState

MintWorkerEnv = Callable[[RoundJob], dict[str, str]]
RemoteOutcome = Callable[[str, int], RoundOutcome | None]


class RemoteRoundsPort(Protocol):
    """The controller's side of remote rounds that a remote broker is given (the worker's contract)."""

    def mint_worker_env(self, job: RoundJob) -> dict[str, str]: ...

    def mint_hypothesis_env(
        self, job: RoundJob, turn: int, index: int, proposal: Mapping[str, Any] | None
    ) -> dict[str, str]: ...

    def remote_outcome(self, run_id: str, round: int) -> RoundOutcome | None: ...

    def revoke(self, run_id: str, round: int) -> None: ...


SpecFor = Callable[[str], BrokerSpec]
POLL_S = 0.2  # how often ``wait`` re-reads a round's Job; a read is two small GETs


class FailureReason(StrEnum):
    """Why a round's pod ended without the worker's outcome; the first word of a FAILED report's error."""

    EVICTED = "evicted"
    OOM_KILLED = "oom_killed"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    POD_LOST = "pod_lost"  # deleted, or its node lost it, before it finished
    START_FAILED = "start_failed"  # the image or command could not start
    WORKER_FAILED = "worker_failed"  # crucible worker exited non-zero
    NO_OUTCOME = "no_outcome"  # exited 0 but the controller accepted no outcome
    JOB_DELETED = "job_deleted"  # someone else deleted the Job


@dataclass(frozen=True)
class _Spec:
    """A run's ``[broker]`` table with the namespace resolved."""

    table: BrokerSpec
    namespace: str


@dataclass
class _Round:
    job: RoundJob
    digest: str
    namespace: str
    name: str
    cancelling: bool = False
    final: RoundReport | None = None


class KubernetesBroker:
    """See the module docstring. ``namespace``: the controller's own, for runs whose spec names none;
    ``command``: the pod's command (``crucible worker`` in the image)."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        mint_worker_env: MintWorkerEnv,
        remote_outcome: RemoteOutcome,
        spec_for: SpecFor,
        revoke: Callable[[str, int], None] | None = None,
        namespace: str = "default",
        command: tuple[str, ...] = manifest.DEFAULT_COMMAND,
        poll_s: float = POLL_S,
    ) -> None:
        self._batch = client.BatchV1Api(api)
        self._core = client.CoreV1Api(api)
        self._mint = mint_worker_env
        self._outcome = remote_outcome
        self._spec_for = spec_for
        self._revoke = revoke
        self._namespace = namespace  # the controller's own: where Jobs go when the spec names none
        self._command = command
        self._poll_s = poll_s
        self._rounds: dict[tuple[str, int], _Round] = {}
        self._lock = threading.Lock()
        self._pods = PodWatch(self._core)
        self._stop = threading.Event()
        self.capabilities = BrokerCapabilities(remote=True, concurrent=True)

    # -- the Broker protocol ------------------------------------------------------------------

    def launch(self, job: RoundJob) -> RoundReport:
        digest = manifest.job_digest(job)
        with self._lock:
            known = self._rounds.get(job.key)
        if known is not None and known.job.attempt == job.attempt:
            if known.digest != digest:
                raise ConflictError(
                    f"round {job.round} of run {job.run_id} was launched with a different job"
                )
            return self.status(job.run_id, job.round)
        if known is not None:
            self._check_supersedes(known, job)
        spec = self._spec(job.run_id)
        name = manifest.job_name(job.run_id, job.round, job.attempt)
        existing = self._read_job(spec.namespace, name)
        if existing is None:
            # A takeover's new attempt: what an earlier controller left running of the round goes first.
            self._delete_attempts(spec.namespace, job.run_id, job.round, below=job.attempt)
            existing = self._create(job, spec)
        found = (existing.metadata.annotations or {}).get(manifest.ANNOTATION_JOB)
        if found != digest:
            raise ConflictError(
                f"round {job.round} of run {job.run_id} already has Job {spec.namespace}/{name} "
                "for a different job"
            )
        self._pods.follow(spec.namespace)
        entry = _Round(job, digest, spec.namespace, name)
        with self._lock:
            current = self._rounds.get(job.key)
            if current is None or current.job.attempt < job.attempt:
                self._rounds[job.key] = entry  # a later attempt supersedes the finished one
        return self.status(job.run_id, job.round)

    def _check_supersedes(self, known: _Round, job: RoundJob) -> None:
        """A new attempt replaces a round's finished latest attempt, and nothing else (ADR-0012)."""
        where = f"round {job.round} of run {job.run_id}"
        if job.attempt < known.job.attempt:
            raise ConflictError(
                f"{where}: attempt {job.attempt} is stale, attempt {known.job.attempt} exists"
            )
        report = self.status(job.run_id, job.round)
        if not report.finished:
            raise ConflictError(
                f"{where}: attempt {known.job.attempt} is still {report.state}; cancel it and wait first"
            )

    def status(self, run_id: str, round: int) -> RoundReport:
        entry = self._entry(run_id, round)
        if entry.final is not None:
            return entry.final
        report = self._observe(entry)
        if report.finished:
            entry.final = report
            if self._revoke is not None:  # the round is over: no token of it is good any more
                self._revoke(run_id, round)
        return report

    def wait(self, run_id: str, round: int, timeout: float | None = None) -> RoundReport:
        entry = self._entry(run_id, round)
        waited = 0.0
        report = self.status(run_id, round)
        while not report.finished and (timeout is None or waited < timeout):
            step = self._poll_s if timeout is None else min(self._poll_s, timeout - waited)
            self._stop.wait(step)
            waited += step
            report = self.status(entry.job.run_id, entry.job.round)
        return report

    def cancel(self, run_id: str, round: int) -> RoundReport:
        entry = self._entry(run_id, round)
        report = self.status(run_id, round)
        if report.finished:
            return report
        entry.cancelling = True
        self._delete(entry.namespace, entry.name)
        # Every attempt's Job goes: an earlier controller's attempt may still run beside this one.
        self._delete_attempts(entry.namespace, run_id, round, keep=entry.name)
        return self.status(run_id, round)

    # -- after a restart ----------------------------------------------------------------------

    def in_flight(self, namespace: str) -> list[RoundReport]:
        """Rounds whose Jobs exist in ``namespace`` and have not finished, found by label and adopted
        (a later ``launch`` of the same job returns them); what a restarted controller resumes."""
        selector = ",".join(f"{k}={v}" for k, v in manifest.COMMON_LABELS.items())
        try:
            jobs = self._batch.list_namespaced_job(namespace, label_selector=selector).items
        except client.ApiException as exc:
            raise _api_error(exc, f"listing Jobs in {namespace}") from exc
        self._pods.follow(namespace)
        reports = []
        adopted: dict[tuple[str, int], None] = {}
        found: Any
        for found in jobs:
            annotations = found.metadata.annotations or {}
            run_id = annotations.get(manifest.ANNOTATION_RUN)
            round_label = (found.metadata.labels or {}).get(manifest.LABEL_ROUND, "")
            if run_id is None or not round_label.isdigit() or found.metadata.deletion_timestamp is not None:
                continue
            if manifest.LABEL_INDEX in (found.metadata.labels or {}):
                continue  # a hypothesis pod's Job: the controller's turn follows it (ADR-0018)
            key = (run_id, int(round_label))
            attempt_label = (found.metadata.labels or {}).get(manifest.LABEL_ATTEMPT, "0")
            attempt = int(attempt_label) if attempt_label.isdigit() else 0
            with self._lock:
                known = self._rounds.get(key)
                if known is None or known.job.attempt < attempt:  # the latest attempt is the round's
                    digest = annotations.get(manifest.ANNOTATION_JOB, "")
                    stub = RoundJob(
                        run_id=key[0], round=key[1], turns=0, first_turn=1, heads={}, attempt=attempt
                    )
                    self._rounds[key] = _Round(stub, digest, namespace, found.metadata.name)
            adopted.setdefault(key, None)
        for key in adopted:  # once per round, its latest attempt
            report = self.status(*key)
            if not report.finished:
                reports.append(report)
        return reports

    def close(self) -> None:
        self._stop.set()
        self._pods.close()

    # -- internals ----------------------------------------------------------------------------

    def _entry(self, run_id: str, round: int) -> _Round:
        with self._lock:
            entry = self._rounds.get((run_id, round))
        if entry is not None:
            return entry
        # Not launched by this process: the latest attempt's Job of an earlier controller is adopted.
        spec = self._spec(run_id)
        name = manifest.job_name(run_id, round)
        attempts = [j for j in self._round_jobs(spec.namespace, run_id, round) if not _deleting(j)]
        found = max(attempts, key=_attempt_of) if attempts else None
        if found is None:
            outcome = self._outcome(run_id, round)
            if outcome is None:
                raise NotFoundError(f"round {round} of run {run_id} was never launched (no Job {name})")
            # Its Job is gone (ttlSecondsAfterFinished) but the worker's outcome was accepted.
            final = RoundReport(run_id, round, _state_of(outcome, False), outcome=outcome)
            stub = RoundJob(run_id=run_id, round=round, turns=0, first_turn=1, heads={})
            entry = _Round(stub, "", spec.namespace, name, final=final)
        else:
            digest = (found.metadata.annotations or {}).get(manifest.ANNOTATION_JOB, "")
            attempt = _attempt_of(found)
            stub = RoundJob(run_id=run_id, round=round, turns=0, first_turn=1, heads={}, attempt=attempt)
            entry = _Round(stub, digest, spec.namespace, found.metadata.name)
            self._pods.follow(spec.namespace)
        with self._lock:
            return self._rounds.setdefault((run_id, round), entry)

    def _spec(self, run_id: str) -> _Spec:
        spec = self._spec_for(run_id)
        if spec.namespace is None:
            spec = spec.model_copy(update={"namespace": self._namespace})
        return _Spec(spec, spec.namespace or self._namespace)

    def _create(self, job: RoundJob, spec: _Spec) -> Any:
        env = self._mint(job)
        token = env.get(manifest.TOKEN_VARIABLE, "")
        body: Any = manifest.job_manifest(job, spec.table, env, command=self._command)
        try:
            created: Any = self._batch.create_namespaced_job(spec.namespace, body)
        except client.ApiException as exc:
            if exc.status == 409:  # another launch won the race; adopt its Job
                found = self._read_job(spec.namespace, body["metadata"]["name"])
                if found is not None:
                    return found
            raise _api_error(exc, f"creating Job {spec.namespace}/{body['metadata']['name']}") from exc
        secret: Any = manifest.secret_manifest(job, spec.table, token, owner_uid=created.metadata.uid)
        try:
            self._core.create_namespaced_secret(spec.namespace, secret)
        except client.ApiException as exc:
            if exc.status != 409:
                raise _api_error(exc, f"creating the token Secret of Job {body['metadata']['name']}") from exc
        return created

    def _round_jobs(self, namespace: str, run_id: str, round: int) -> list[Any]:
        """Every attempt's Job of the round in ``namespace``, found by label (the exact run id checked)."""
        selector = f"{manifest.LABEL_RUN}={manifest.run_label(run_id)},{manifest.LABEL_ROUND}={round}"
        try:
            found: Any = self._batch.list_namespaced_job(namespace, label_selector=selector).items
        except client.ApiException as exc:
            raise _api_error(exc, f"listing the Jobs of round {round} of run {run_id}") from exc
        return [
            j
            for j in found
            if (j.metadata.annotations or {}).get(manifest.ANNOTATION_RUN) == run_id
            and manifest.LABEL_INDEX not in (j.metadata.labels or {})  # a hypothesis's Job (ADR-0018)
        ]

    def _delete_attempts(
        self, namespace: str, run_id: str, round: int, *, below: int | None = None, keep: str = ""
    ) -> list[str]:
        """Delete (foreground) the round's unfinished Jobs other than ``keep`` (with ``below``: only
        attempts before it); the names deleted. Finished Jobs stay for inspection until their TTL."""
        deleted = []
        for found in self._round_jobs(namespace, run_id, round):
            name = found.metadata.name
            if name == keep or _deleting(found) or _finished(found):
                continue
            if below is not None and _attempt_of(found) >= below:
                continue
            self._delete(namespace, name)
            deleted.append(name)
        return deleted

    def _delete(self, namespace: str, name: str) -> None:
        try:
            self._batch.delete_namespaced_job(name, namespace, propagation_policy="Foreground")
        except client.ApiException as exc:
            if exc.status != 404:
                raise _api_error(exc, f"deleting Job {namespace}/{name}") from exc

    def _read_job(self, namespace: str, name: str) -> Any | None:
        try:
            return self._batch.read_namespaced_job(name, namespace)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise _api_error(exc, f"reading Job {namespace}/{name}") from exc

    def _observe(self, entry: _Round) -> RoundReport:
        """The round's report from its Job, its pod and the controller's record of the worker's outcome."""
        run_id, round = entry.job.run_id, entry.job.round
        found = self._read_job(entry.namespace, entry.name)
        evidence = self._pods.evidence(entry.namespace, entry.name)
        conditions = {c.type: c for c in (found.status.conditions or [])} if found and found.status else {}
        complete = conditions.get("Complete")
        failed = conditions.get("Failed")
        if complete is not None and complete.status == "True":
            outcome = self._outcome(run_id, round)
            if outcome is None:
                detail = "crucible worker exited 0 but the controller accepted no outcome from it"
                return RoundReport(
                    run_id, round, RoundState.FAILED, error=f"{FailureReason.NO_OUTCOME}: {detail}"
                )
            return RoundReport(run_id, round, _state_of(outcome, entry.cancelling), outcome=outcome)
        ended = failed is not None and failed.status == "True"
        if entry.cancelling and (ended or found is None):
            outcome = self._outcome(run_id, round) or RoundOutcome(
                RunStatus.CANCELLED, StopReason.CANCELLED, "cancelled: the round's Job was deleted"
            )
            return RoundReport(run_id, round, RoundState.CANCELLED, outcome=outcome)
        if ended:
            return RoundReport(run_id, round, RoundState.FAILED, error=_failure(failed, evidence))
        if found is None or (found.metadata.deletion_timestamp is not None and not entry.cancelling):
            error = f"{FailureReason.JOB_DELETED}: Job {entry.namespace}/{entry.name} was deleted"
            return RoundReport(run_id, round, RoundState.FAILED, error=error)
        if evidence.running or (found.status and (found.status.ready or 0) > 0):
            return RoundReport(run_id, round, RoundState.RUNNING)
        return RoundReport(run_id, round, RoundState.PENDING)


def _attempt_of(found: Any) -> int:
    """A Job's attempt (its label; Jobs made before ADR-0012 have none: attempt 0)."""
    label = (found.metadata.labels or {}).get(manifest.LABEL_ATTEMPT, "0")
    return int(label) if label.isdigit() else 0


def _deleting(found: Any) -> bool:
    return found.metadata.deletion_timestamp is not None


def _finished(found: Any) -> bool:
    conditions = (found.status.conditions or []) if found.status else []
    return any(c.type in ("Complete", "Failed") and c.status == "True" for c in conditions)


def _state_of(outcome: RoundOutcome, cancelling: bool) -> RoundState:
    cancelled = cancelling or outcome.run_status is RunStatus.CANCELLED
    return RoundState.CANCELLED if cancelled else RoundState.SUCCEEDED


def finished_job(found: Any, evidence: Callable[[], PodEvidence]) -> HypothesisPod | None:
    """How a hypothesis's or a confirmation's Job ended: finished (with ``_failure``'s text when it
    failed; ``evidence`` is read only then), or None while neither condition holds yet."""
    status = found.status
    conditions = {c.type: c for c in (status.conditions or [])} if status else {}
    complete, failed = conditions.get("Complete"), conditions.get("Failed")
    if complete is not None and complete.status == "True":
        return HypothesisPod(True)
    if failed is not None and failed.status == "True":
        return HypothesisPod(True, _failure(failed, evidence()))
    return None


def _failure(condition: Any, evidence: PodEvidence) -> str:
    """``<reason>: <detail>`` for a Failed Job, from its condition and what its pod showed."""
    if condition.reason == "DeadlineExceeded":
        return (
            f"{FailureReason.DEADLINE_EXCEEDED}: {condition.message or 'the round ran past broker.deadline'}"
        )
    if evidence.reason is not None:
        return f"{evidence.reason}: {evidence.detail}"
    why = condition.message or condition.reason
    return f"{FailureReason.POD_LOST}: the round's pod ended without a status ({why})"


def _api_error(exc: client.ApiException, doing: str) -> CrucibleError:
    """An API failure as the error tree has it: transient ones may be retried, others say why."""
    body = (exc.body or "")[:500] if isinstance(exc.body, str) else ""
    if exc.status in (None, 0, 429) or (exc.status or 0) >= 500:
        return RetryLaterError(f"{doing}: the Kubernetes API answered {exc.status} {exc.reason}")
    return CrucibleError(f"{doing}: the Kubernetes API refused it ({exc.status} {exc.reason}) {body}".strip())


def describe_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the token redacted, for logs."""
    return {k: ("(redacted)" if k == manifest.TOKEN_VARIABLE else v) for k, v in env.items()}

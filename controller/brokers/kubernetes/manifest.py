"""The Job (and the Secret holding its token) that runs one round in a loop pod, as plain JSON.

Kept apart from the client code so that ``crucible loop --dry-run`` can print exactly what the broker
would create without importing the ``kubernetes`` package, and so that the manifest is one pure function
of the round, the spec's ``[broker]`` table and the worker's environment that tests can read.

Naming is deterministic (ADR-0015): the Job of a round is ``crucible-<run>-<round>``, so a restarted
controller relaunching the same round finds the Job instead of creating a second one. Labels carry the
run and round for reconciliation by selector; annotations carry the exact run id (label values are
limited to 63 characters) and a digest of the RoundJob, so a relaunch with a different job is told apart.

The pod satisfies Pod Security "restricted": non-root, no privilege escalation, all capabilities dropped,
seccomp RuntimeDefault, a read-only root filesystem with ``emptyDir`` volumes for the workspace and
``/tmp``, and no service-account token. The per-round worker token is never in the pod spec in clear: it
is in a Secret owned by the Job (deleted with it) and referenced by ``secretKeyRef``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from controller.config.broker import BrokerSpec
from controller.domain.jobs import RoundJob

TOKEN_VARIABLE = "CRUCIBLE_WORKER_TOKEN"
TOKEN_KEY = "token"
WORKDIR = "/workspace"
TMPDIR = "/tmp"
USER_ID = 10001  # the image's non-root user (Dockerfile)
CONTAINER = "worker"
DEFAULT_COMMAND = ("crucible", "worker")

LABEL_RUN = "crucible.dev/run"
LABEL_ROUND = "crucible.dev/round"
LABEL_ATTEMPT = "crucible.dev/attempt"  # RoundJob.attempt (ADR-0012); absent on Jobs made before it
LABEL_TURN = "crucible.dev/turn"  # a hypothesis pod's turn and index (ADR-0018); absent on a round's Job
LABEL_INDEX = "crucible.dev/parallel-index"
LABEL_CONFIRM = "crucible.dev/confirm"  # a confirmation's claim (ADR-0043); its index label reads "confirm"
ANNOTATION_RUN = "crucible.dev/run-id"
ANNOTATION_JOB = "crucible.dev/round-job-sha256"
COMMON_LABELS = {
    "app.kubernetes.io/name": "crucible",
    "app.kubernetes.io/component": "loop",  # deploy/'s NetworkPolicy selects loop pods by it
    "app.kubernetes.io/managed-by": "crucible",
}
MAX_NAME = 63  # a Job's name becomes its pods' job-name label, a label value


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-") or "x"


def job_name(run_id: str, round: int, attempt: int = 0) -> str:
    """``crucible-<run>-<round>`` (``-a<attempt>`` after it for a later attempt, ADR-0012): a DNS label,
    the same for the same launch in any process. A run id that is not already a short DNS label is
    shortened with a digest so two runs never share a name."""
    return _named(run_id, f"-{round}" if attempt == 0 else f"-{round}-a{attempt}")


def hypothesis_job_name(run_id: str, round: int, turn: int, index: int, attempt: int = 0) -> str:
    """``crucible-<run>-<round>-t<turn>-h<index>``: the Job of parallel index ``index`` started in
    ``turn`` (ADR-0018; a warm pod runs that index's hypotheses of the later turns too, ADR-0034), the
    same in any process, so a restarted controller finds it instead of launching a second;
    ``-a<attempt>`` after it for a pod started again in the same turn after one was lost."""
    return _named(run_id, f"-{round}-t{turn}-h{index}" + (f"-a{attempt}" if attempt else ""))


def confirm_job_name(run_id: str, round: int, turn: int, claim: str) -> str:
    """``crucible-<run>-<round>-t<turn>-c<claim>``: the Job of a confirmation of one claimed keep of
    ``turn`` (ADR-0043), the same in any process, so a restarted controller finds it."""
    return _named(run_id, f"-{round}-t{turn}-c{claim}")


def _named(run_id: str, suffix: str) -> str:
    slug = _slug(run_id)
    if slug != run_id or len("crucible-" + slug + suffix) > MAX_NAME:
        digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:10]
        slug = slug[: MAX_NAME - len("crucible-") - len(suffix) - len(digest) - 1].strip("-") + "-" + digest
    return f"crucible-{slug}{suffix}"


def secret_name(run_id: str, round: int, attempt: int = 0) -> str:
    """The Secret holding the round's worker token (``<job>-token``, a DNS subdomain)."""
    return job_name(run_id, round, attempt) + "-token"


def run_label(run_id: str) -> str:
    """The run id as a label value (the exact id is in the annotation)."""
    return job_name(run_id, 0).removeprefix("crucible-").removesuffix("-0")


def job_digest(job: RoundJob) -> str:
    """What tells two jobs of the same key apart after a restart (a relaunch must be the same job)."""
    canonical = json.dumps(job.to_json(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def labels(
    run_id: str,
    round: int,
    attempt: int = 0,
    hypothesis: tuple[int, int] | None = None,
    confirm: tuple[int, str] | None = None,
) -> dict[str, str]:
    out = {
        **COMMON_LABELS,
        LABEL_RUN: run_label(run_id),
        LABEL_ROUND: str(round),
        LABEL_ATTEMPT: str(attempt),
    }
    if hypothesis is not None:
        out.update({LABEL_TURN: str(hypothesis[0]), LABEL_INDEX: str(hypothesis[1])})
    if confirm is not None:  # not a round's Job, nor a slot's: both listings skip an index label
        out.update({LABEL_TURN: str(confirm[0]), LABEL_INDEX: "confirm", LABEL_CONFIRM: confirm[1]})
    return out


def _name_of(
    job: RoundJob, hypothesis: tuple[int, int] | None, confirm: tuple[int, str] | None = None
) -> str:
    if confirm is not None:
        return confirm_job_name(job.run_id, job.round, *confirm)
    if hypothesis is None:
        return job_name(job.run_id, job.round, job.attempt)
    return hypothesis_job_name(job.run_id, job.round, *hypothesis, job.attempt)


def job_manifest(
    job: RoundJob,
    spec: BrokerSpec,
    env: Mapping[str, str],
    *,
    command: tuple[str, ...] = DEFAULT_COMMAND,
    hypothesis: tuple[int, int] | None = None,
    confirm: tuple[int, str] | None = None,
) -> dict[str, Any]:
    """The Job of ``job``'s round, or with ``hypothesis = (turn, index)`` of that one hypothesis
    (ADR-0018), or with ``confirm = (turn, claim)`` of a confirmation of that claim (ADR-0043: no
    agent runs in it, so the agent's Secret is not mounted). ``env`` is the worker's environment
    (``mint_worker_env``); its token is referenced from the Job's Secret, every other variable is
    set in the pod spec as is."""
    name = _name_of(job, hypothesis, confirm)
    meta_labels = labels(job.run_id, job.round, job.attempt, hypothesis, confirm)
    annotations = {ANNOTATION_RUN: job.run_id, ANNOTATION_JOB: job_digest(job)}
    variables: list[dict[str, Any]] = [
        {"name": key, "value": value} for key, value in sorted(env.items()) if key != TOKEN_VARIABLE
    ]
    variables.append(
        {
            "name": TOKEN_VARIABLE,
            "valueFrom": {"secretKeyRef": {"name": name + "-token", "key": TOKEN_KEY}},
        }
    )
    variables += [{"name": "HOME", "value": TMPDIR}, {"name": "TMPDIR", "value": TMPDIR}]
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.image or "",
        "imagePullPolicy": "IfNotPresent",
        "command": list(command),
        "args": ["--workdir", WORKDIR],
        "workingDir": WORKDIR,
        "env": variables,
        "resources": {"requests": dict(spec.resources.requests), "limits": dict(spec.resources.limits)},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": USER_ID,
            "runAsGroup": USER_ID,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "workspace", "mountPath": WORKDIR},
            {"name": "tmp", "mountPath": TMPDIR},
        ],
    }
    if spec.agent_secret is not None and confirm is None:
        # Its keys reach the worker, which filters them by agent.env_allow as a local run does.
        container["envFrom"] = [{"secretRef": {"name": spec.agent_secret}}]
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": USER_ID,
            "runAsGroup": USER_ID,
            "fsGroup": USER_ID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [{"name": "workspace", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
    }
    if spec.node_selector:
        pod["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        pod["tolerations"] = [t.manifest() for t in spec.tolerations]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(name, spec, meta_labels, annotations),
        "spec": {
            "backoffLimit": 0,  # crucible decides retries, not the Job controller
            "completions": 1,
            "parallelism": 1,
            "activeDeadlineSeconds": spec.deadline,
            "ttlSecondsAfterFinished": spec.ttl,
            "template": {"metadata": {"labels": meta_labels, "annotations": annotations}, "spec": pod},
        },
    }


def secret_manifest(
    job: RoundJob,
    spec: BrokerSpec,
    token: str,
    owner_uid: str | None = None,
    hypothesis: tuple[int, int] | None = None,
    confirm: tuple[int, str] | None = None,
) -> dict[str, Any]:
    """The Secret holding the Job's token, owned by its Job (``owner_uid``) so it goes when the Job goes."""
    name = _name_of(job, hypothesis, confirm)
    metadata = _metadata(
        name + "-token",
        spec,
        labels(job.run_id, job.round, job.attempt, hypothesis, confirm),
        {ANNOTATION_RUN: job.run_id},
    )
    if owner_uid is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": owner_uid, "controller": True}
        ]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": {TOKEN_KEY: token},
    }


def _metadata(
    name: str, spec: BrokerSpec, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    """Without ``spec.namespace`` the namespace is left out: the client's own applies (``kubectl``'s
    context in a dry run; the broker fills in the controller's before it creates anything)."""
    out: dict[str, Any] = {"name": name, "labels": labels, "annotations": annotations}
    if spec.namespace is not None:
        out["namespace"] = spec.namespace
    return out

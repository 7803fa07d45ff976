"""``HypothesisPods``: a round's parallel hypotheses, each index in a warm pod (ADR-0018, ADR-0034).

With ``broker.parallel = N`` on Kubernetes the controller drives the round's turns itself. Index ``i``
of the round has one pod at a time, which lives for the round: its Job,
``crucible-<run>-<round>-t<turn>-h<i>``, is named after the turn it started in, and runs ``crucible
worker`` holding slot ``i`` (a token that only asks for the slot's next hypothesis:
``RemoteRounds.mint_slot_env``). Launching hypothesis ``i`` of a turn offers it to the slot
(``HypothesisSlots.offer``) and starts a pod for the slot only when none runs. The pod spec is a
round's (the Pod Security "restricted" profile, requests, limits, deadline, TTL, ``backoffLimit:
0``); only the name, two labels and the environment differ. As for rounds, the cluster is the
record of what runs: a restarted controller finds the slot's newest Job by its labels and adopts
it, so it never starts a second pod for a slot; what a hypothesis concluded comes from its report
to the controller, never from the pod. A hypothesis whose pod ends before reporting is finished
with an error starting with a named ``FailureReason`` and, when the pod failed, its slot gets a new
pod at once (``-a<n>`` when one started in the same turn); a pod that exited 0 had nothing more to
do (its run stopped, or it idled past ``worker.IDLE_S``), and the next offer starts another. When it
exited 0 holding an offer it never took (it idled out just as the offer came), the offer gets one
new pod before the hypothesis counts as lost. Cancel deletes the Job (foreground). A fresh run's
pods are started before its baseline is measured (``warm``, ADR-0040), so their start-up runs beside
it instead of in the first turn. ``speculative`` (ADR-0051): the turn may offer a slot whose
hypothesis reported the next turn's before the turn is decided; ``withdraw`` revokes, before a turn
starts, whatever was offered or taken for it that the turn is not played with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client

from controller.brokers.base import HypothesisPod, HypothesisSlots
from controller.brokers.kubernetes import manifest
from controller.brokers.kubernetes.broker import FailureReason, SpecFor, _api_error, finished_job
from controller.brokers.kubernetes.pods import PodWatch
from controller.domain.errors import NotFoundError
from controller.domain.jobs import RoundJob

MintSlotEnv = Callable[[RoundJob, int], dict[str, str]]
_Slot = tuple[str, int, int]  # run, round, index


class HypothesisPods:
    """See the module docstring. ``namespace``: the controller's own, for runs whose spec names none."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        mint_slot_env: MintSlotEnv,
        slots: HypothesisSlots,
        spec_for: SpecFor,
        namespace: str = "default",
        command: tuple[str, ...] = manifest.DEFAULT_COMMAND,
        speculative: bool = True,
    ) -> None:
        self.speculative = speculative  # a free slot may take the next turn's hypothesis (ADR-0051)
        self._batch = client.BatchV1Api(api)
        self._core = client.CoreV1Api(api)
        self._mint = mint_slot_env
        self._slots = slots
        self._spec_for = spec_for
        self._namespace = namespace
        self._command = command
        self._pods = PodWatch(self._core)
        self._cancelling: set[str] = set()
        self._current: dict[_Slot, RoundJob] = {}  # the slot's pod: its job (the name's turn, attempt)
        self._holder: dict[tuple[str, int, int, int], str] = {}  # (run, round, turn, index) -> Job
        self._revived: set[tuple[str, int, int, int]] = set()  # given a new pod after an exit 0

    def launch_hypothesis(
        self, job: RoundJob, turn: int, index: int, proposal: Mapping[str, Any] | None
    ) -> HypothesisPod:
        namespace = self._where(job.run_id)
        self._pods.follow(namespace)
        key = (job.run_id, job.round, index)
        running = self._slot_job(key, namespace)
        self._slots.offer(job, turn, index, proposal)
        if running is None:
            running = self._start(job, turn, index, namespace)
        self._holder[(job.run_id, job.round, turn, index)] = running
        return self.hypothesis_status(job.run_id, job.round, turn, index)

    def hypothesis_status(self, run_id: str, round: int, turn: int, index: int) -> HypothesisPod:
        namespace = self._where(run_id)
        name = self._holder.get((run_id, round, turn, index))
        if name is None:
            raise NotFoundError(f"hypothesis {index} of turn {turn} of run {run_id} was not launched here")
        state = self._state(namespace, name)
        if state is None:
            raise NotFoundError(f"hypothesis {index} of turn {turn} of run {run_id} has no Job {name}")
        if not state.finished or name in self._cancelling:
            return state
        current = self._current.get((run_id, round, index))
        if current is None or self._name(current, index) != name:
            return state
        if state.error is not None:
            self._start(current, turn, index, namespace)  # the slot goes on in a new pod
        elif (run_id, round, turn, index) not in self._revived:
            # Exit 0 without this hypothesis's report (the caller asks only about unreported ones):
            # the pod never took it, since one that does reports it or fails. It idled out, or saw
            # its run stop, just as the offer came. The offer stands: a new pod takes it, once.
            self._revived.add((run_id, round, turn, index))
            self._holder[(run_id, round, turn, index)] = self._start(current, turn, index, namespace)
            return HypothesisPod(False)
        return state

    def cancel_hypothesis(self, run_id: str, round: int, turn: int, index: int) -> HypothesisPod:
        namespace = self._where(run_id)
        name = self._holder.get((run_id, round, turn, index))
        if name is None:
            raise NotFoundError(f"hypothesis {index} of turn {turn} of run {run_id} was not launched here")
        self._cancelling.add(name)
        try:
            self._batch.delete_namespaced_job(name, namespace, propagation_policy="Foreground")
        except client.ApiException as exc:
            if exc.status != 404:
                raise _api_error(exc, f"deleting Job {namespace}/{name}") from exc
        return self.hypothesis_status(run_id, round, turn, index)

    def wait_for_reports(self, timeout: float) -> None:
        self._slots.wait_for_reports(timeout)

    def warm(self, job: RoundJob, count: int) -> None:
        """A pod for each of slots ``0..count-1`` of ``job``'s round, named after ``job.first_turn``,
        unless the slot's pod runs (or, after a restart, is found and adopted). Nothing is offered:
        each waits in its long poll until the turn's launches offer it its hypothesis (ADR-0040)."""
        namespace = self._where(job.run_id)
        self._pods.follow(namespace)
        for index in range(count):
            if self._slot_job((job.run_id, job.round, index), namespace) is None:
                self._start(job, job.first_turn, index, namespace)

    def withdraw(
        self, job: RoundJob, turn: int, count: int, wanted: Mapping[int, Mapping[str, Any] | None]
    ) -> None:
        """Revoke the offers and grants of ``turn`` it will not be played with (``Slots.withdraw``):
        a pod measuring one sees its token revoked and stops it; its Job goes on for the slot."""
        self._slots.withdraw(job, turn, count, wanted)

    def close(self) -> None:
        self._pods.close()

    def _where(self, run_id: str) -> str:
        return self._spec_for(run_id).namespace or self._namespace

    @staticmethod
    def _name(job: RoundJob, index: int) -> str:
        return manifest.hypothesis_job_name(job.run_id, job.round, job.first_turn, index, job.attempt)

    def _slot_job(self, key: _Slot, namespace: str) -> str | None:
        """The Job of the slot's pod if it still runs: the one this process started, or after a
        restart the slot's newest Job by its labels (adopted)."""
        current = self._current.get(key)
        if current is None:
            current = self._adopt(key, namespace)
            if current is None:
                return None
            self._current[key] = current
        name = self._name(current, key[2])
        state = self._state(namespace, name)
        return name if state is not None and not state.finished else None

    def _adopt(self, key: _Slot, namespace: str) -> RoundJob | None:
        run_id, round, index = key
        selector = (
            f"{manifest.LABEL_RUN}={manifest.run_label(run_id)},{manifest.LABEL_ROUND}={round},"
            f"{manifest.LABEL_INDEX}={index}"
        )
        try:
            found: list[Any] = self._batch.list_namespaced_job(namespace, label_selector=selector).items
        except client.ApiException as exc:
            raise _api_error(exc, f"listing the Jobs of slot {index} of run {run_id}") from exc
        mine = [
            j.metadata for j in found if (j.metadata.annotations or {}).get(manifest.ANNOTATION_RUN) == run_id
        ]
        newest = max(
            ((int(m.labels[manifest.LABEL_TURN]), int(m.labels[manifest.LABEL_ATTEMPT])) for m in mine),
            default=None,
        )
        if newest is None:
            return None
        turn, attempt = newest
        return RoundJob(run_id=run_id, round=round, turns=1, first_turn=turn, heads={}, attempt=attempt)

    def _start(self, job: RoundJob, turn: int, index: int, namespace: str) -> str:
        """A new pod for the slot, named after ``turn`` (the next free attempt of that name)."""
        attempt = 0
        started = dataclasses.replace(job, first_turn=turn, attempt=0)
        while self._read(namespace, self._name(started, index)) is not None:
            attempt += 1
            started = dataclasses.replace(started, attempt=attempt)
        self._create(started, turn, index, namespace)
        self._current[(job.run_id, job.round, index)] = started
        return self._name(started, index)

    def _state(self, namespace: str, name: str) -> HypothesisPod | None:
        found = self._read(namespace, name)
        if found is None:
            if name in self._cancelling:
                return HypothesisPod(True, f"{FailureReason.JOB_DELETED}: cancelled with the run")
            return None
        ended = finished_job(found, lambda: self._pods.evidence(namespace, name))
        if ended is not None:
            return ended
        if found.metadata.deletion_timestamp is not None and name not in self._cancelling:
            evidence = self._pods.evidence(namespace, name)
            if evidence.reason is not None:
                return HypothesisPod(True, f"{evidence.reason}: {evidence.detail}")
            return HypothesisPod(True, f"{FailureReason.JOB_DELETED}: Job {namespace}/{name} was deleted")
        return HypothesisPod(False)

    def _create(self, job: RoundJob, turn: int, index: int, namespace: str) -> None:
        spec = self._spec_for(job.run_id)
        env = self._mint(job, index)
        token = env.get(manifest.TOKEN_VARIABLE, "")
        scope = (turn, index)
        body: Any = manifest.job_manifest(job, spec, env, command=self._command, hypothesis=scope)
        name = body["metadata"]["name"]
        try:
            created: Any = self._batch.create_namespaced_job(namespace, body)
        except client.ApiException as exc:
            if exc.status == 409:  # another launch won the race: its Job is the slot's
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

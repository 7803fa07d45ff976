"""The broker seam: where a round's turns execute (ADR-0003, docs/architecture.md, "Ports").

A broker launches one round of one run (a ``RoundJob``), reports where it is, waits for it, and
cancels it. That is all: scheduling, leases, retries and feedback belong to the run service above.
Prefect's 2,000-line worker base class is the warning; four methods and a capabilities record are
the whole surface every broker (local now, Kubernetes next) implements and the contract suite
(``tests/brokers``) checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from controller.domain.enums import RunStatus, StopReason
from controller.domain.jobs import FINISHED_ROUND_STATES, RoundJob, RoundState


@dataclass(frozen=True)
class RoundOutcome:
    """What executing a round concluded, as the code that ran it reports it.

    run_status: the run's status after the round (RUNNING when the run goes on: a search round that
        hands over to the feedback watch, any refinement round that did not stop the run).
    stop_reason: why the round stopped (a budget, the search being done, a failure), if it did.
    message: one sentence for people ("stopped: turn budget spent (20/20)").
    kept: whether the round kept a turn (a refinement round pushed something).
    """

    run_status: RunStatus
    stop_reason: StopReason | None
    message: str
    kept: bool = False


@dataclass(frozen=True)
class RoundReport:
    """A launched round as its broker sees it. ``outcome`` is set once the round ran to its end
    (SUCCEEDED, or CANCELLED after the runner stopped); ``error`` says why a FAILED round failed."""

    run_id: str
    round: int
    state: RoundState
    outcome: RoundOutcome | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_ROUND_STATES


@dataclass(frozen=True)
class BrokerCapabilities:
    """Optional abilities, stated instead of discovered by trying.

    remote: rounds run in another process or machine, so the turn path there reaches the run's
        record through the ledger API and its commits come back as a bundle (Kubernetes).
    concurrent: several rounds (of different runs) may run at once.
    """

    remote: bool
    concurrent: bool


class Broker(Protocol):
    """Launches and tracks rounds. Every implementation passes ``tests/brokers``.

    Identity: a launch is named by ``(run_id, round, attempt)`` (``RoundJob.launch_key``); the other
    methods name a round by ``(run_id, round)`` (``RoundJob.key``) and address its latest attempt
    (ADR-0012).

    - ``launch(job)``: start the round and return its report. Idempotent: launching a key that is
      already known returns that round's current report and starts nothing (even if it finished);
      the same key with a different job is a ConflictError. A higher attempt of a round whose
      latest attempt finished starts afresh (a run re-driven after a cancel or a takeover); a
      higher attempt while the latest still runs, or a lower attempt than the latest, is a
      ConflictError. A broker may run the round before returning (the inline local broker does);
      callers use ``wait``/``status`` either way.
    - ``status(run_id, round)``: the current report; NotFoundError for a round never launched.
    - ``wait(run_id, round, timeout)``: block until the round is finished or ``timeout`` seconds
      passed (None: no limit), then return the current report; NotFoundError as ``status``.
    - ``cancel(run_id, round)``: ask the round to stop (its running command is killed, the turn
      restored, by the code running it); returns the current report at once. On a finished round
      it changes nothing and returns the final report; NotFoundError for an unknown round.

    A round whose runner raised is FAILED with the error's text; a round cancelled before it
    started never runs. Other errors: RetryLaterError when the backend is unreachable.
    """

    capabilities: BrokerCapabilities

    def launch(self, job: RoundJob) -> RoundReport: ...

    def status(self, run_id: str, round: int) -> RoundReport: ...

    def wait(self, run_id: str, round: int, timeout: float | None = None) -> RoundReport: ...

    def cancel(self, run_id: str, round: int) -> RoundReport: ...


@dataclass(frozen=True)
class HypothesisPod:
    """One parallel hypothesis in a pod of its own (ADR-0018), as its launcher sees it. ``error``
    (``<reason>: <detail>``, a ``FailureReason`` first) says why one that ended did not succeed."""

    finished: bool
    error: str | None = None


class HypothesisLauncher(Protocol):
    """Runs each parallel hypothesis of a turn in a pod of its own (ADR-0018); the controller decides
    the turn from what the pods report through the worker API.

    - ``launch_hypothesis(job, turn, index, proposal)``: start hypothesis ``index`` of ``turn`` from
      ``job.heads`` (the champion), or adopt the one already started under the same name (a
      restarted controller launches no second); its state.
    - ``hypothesis_status(run_id, round, turn, index)``: its state; NotFoundError if never launched.
    - ``cancel_hypothesis(run_id, round, turn, index)``: stop it (its pod goes first); its state.
    - ``wait_for_reports(timeout)``: return once a hypothesis report may have arrived, or after
      ``timeout`` (so a turn waiting on its pods reads the record when there is news, not in a loop).
    - ``warm(job, count)``: start the pods of indices ``0..count-1`` for the round's first turn
      (``job.first_turn``) now, offering nothing, so they start up while the controller measures the
      baseline; the turn's launches then find them running (ADR-0040).
    - ``speculative``: whether a slot whose hypothesis reported may be offered the next turn's
      before the turn is decided (ADR-0051); ``withdraw(job, turn, count, wanted)``: revoke every
      hypothesis of ``turn`` on offer or running that the turn will not be played with (its index
      not in ``wanted``, its heads not ``job.heads``, its proposal not ``wanted[index]``), before
      the turn starts.
    """

    speculative: bool

    def launch_hypothesis(
        self, job: RoundJob, turn: int, index: int, proposal: Mapping[str, Any] | None
    ) -> HypothesisPod: ...

    def hypothesis_status(self, run_id: str, round: int, turn: int, index: int) -> HypothesisPod: ...

    def cancel_hypothesis(self, run_id: str, round: int, turn: int, index: int) -> HypothesisPod: ...

    def wait_for_reports(self, timeout: float) -> None: ...

    def warm(self, job: RoundJob, count: int) -> None: ...

    def withdraw(
        self, job: RoundJob, turn: int, count: int, wanted: Mapping[int, Mapping[str, Any] | None]
    ) -> None: ...


class ConfirmLauncher(Protocol):
    """Runs the confirmations of claimed keeps (ADR-0043): ``crucible worker`` with a confirmation's
    environment (``RemoteRounds.mint_confirm_env``), where no agent runs; what it concluded comes from
    its report to the controller, never from the process or pod.

    - ``launch_confirmation(job, turn, claim, env)``: start the confirmation named ``claim`` (one of
      the turn's claims) of ``job``'s round, or adopt the one already started under that name.
    - ``confirmation_status(run_id, round, turn, claim)``: its state (``HypothesisPod``: whether it
      ended, and why one that ended did not succeed); NotFoundError if it was never launched here.
    """

    def launch_confirmation(self, job: RoundJob, turn: int, claim: str, env: Mapping[str, str]) -> None: ...

    def confirmation_status(self, run_id: str, round: int, turn: int, claim: str) -> HypothesisPod: ...


class HypothesisSlots(Protocol):
    """Where a launcher of warm hypothesis pods (ADR-0034) leaves each hypothesis for its slot's pod
    to take (``services.remote.slots.Slots``, in the database, so any replica's worker routes hand
    it out): ``offer(job, turn, index, proposal)`` offers hypothesis ``index`` of ``turn`` to slot
    ``index``, unless it is on offer or taken already (a restarted controller offers again);
    ``wait_for_reports(timeout)`` returns when a hypothesis report arrived through this process's
    worker routes, or after ``timeout``; ``withdraw(job, turn, count, wanted)`` revokes the offers
    and grants of ``turn`` the turn will not be played with (ADR-0051), how many."""

    def offer(self, job: RoundJob, turn: int, index: int, proposal: Mapping[str, Any] | None) -> None: ...

    def wait_for_reports(self, timeout: float) -> None: ...

    def withdraw(
        self, job: RoundJob, turn: int, count: int, wanted: Mapping[int, Mapping[str, Any] | None]
    ) -> int: ...

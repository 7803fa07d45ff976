"""The store's ports: small Protocols, one per kind of consumer, instead of the 80-method ``Store``.

A services module types its parameter with the Protocol it uses (``RunLeases`` for a heartbeat,
``PullRecords`` for the feedback hub, ...), so what it depends on is visible in its signature, it
imports no SQLAlchemy, and a fake of it passes the same contract suite as the SQL store does
(``tests/ports``, over SQLite and PostgreSQL). The turn path's own port is ``store.ledger.Ledger``.

A consumer that needs several ports names their union below (a Protocol inheriting them): a
composite adds no method of its own, so the small Protocols stay the contracts (and, being
structural, any implementation of the small ones is one of the composite). ``Store`` satisfies
every one of them (``store.store.as_controller_store`` is where mypy checks that).

Ports and their consumers (the methods are on each Protocol):
  - ``RunReads`` (the run, components, events) and ``TurnReads`` (turns, samples, hypotheses):
    views, round jobs, publishing, the driver.
  - ``RunLeases``: the heartbeat and a resume's wait for a silent holder.
  - ``RunLifecycle`` (create, move along the states, cancel flag, events): submit, recovery, driver.
  - ``ComponentHeads``: refinement rounds, base drift, publishing.
  - ``PullRecords``, ``FeedbackRecords``, ``DeliveryQueue``, ``RoundRecords``: publishing, the
    feedback hub and intake, the watch, steering, refinement rounds.
  - ``Scheduling``: the server's scheduler. ``WorkerRoundRecords``: remote rounds.
    ``ProcessGroupRecords``: recovery.
  - ``RunPages``, ``TurnPages``, ``OpsCounts``, ``SchemaHealth``: the API's paged reads, ``/metrics``
    and ``/readyz``. ``SessionRevocations``: the dashboard's logouts.

The round environment (``execution.context.RunContext``) holds none of these, only the ``Ledger``
(ADR-0045): the controller's work around rounds names its union here (``PublishRecords``,
``DriftRecords``, ``WatchRecords``, ``RefinementRecords``, ``RoundJobReads``, ``ContextRecords``).
"""

from __future__ import annotations

from typing import Protocol

from controller.store.ledger import Ledger
from controller.store.ports.control import ProcessGroupRecords, Scheduling, WorkerRoundRecords
from controller.store.ports.feedback import DeliveryQueue, FeedbackRecords, PullRecords, RoundRecords
from controller.store.ports.pages import OpsCounts, RunPages, SchemaHealth, SessionRevocations, TurnPages
from controller.store.ports.runs import ComponentHeads, RunLeases, RunLifecycle, RunReads, TurnReads

__all__ = [
    "ApiRuns",
    "ComponentHeads",
    "ContextRecords",
    "ControllerStore",
    "DeliveryQueue",
    "DriftRecords",
    "FeedbackIntake",
    "FeedbackRecords",
    "Ledger",
    "OpsCounts",
    "OpsStore",
    "ProcessGroupRecords",
    "PublishRecords",
    "PullRecords",
    "Recovery",
    "RefinementRecords",
    "RemoteRoundStore",
    "RoundJobReads",
    "RoundRecords",
    "RunControl",
    "RunLeases",
    "RunLifecycle",
    "RunPages",
    "RunReads",
    "RunViews",
    "Scheduling",
    "SchemaHealth",
    "SessionRevocations",
    "Steering",
    "TurnPages",
    "TurnReads",
    "TurnRecords",
    "WatchRecords",
    "WorkerRoundRecords",
]


class RunControl(RunReads, RunLifecycle, Protocol):
    """Reading a run and moving it along its states: submitting, reopening (``control.submit``)."""


class Recovery(RunReads, RunLeases, RunLifecycle, ProcessGroupRecords, Protocol):
    """Resuming and cancelling a run someone else may have driven (``control.recovery``)."""


class Steering(RunReads, PullRecords, FeedbackRecords, Protocol):
    """Queueing an operator's steer as feedback for a watching run (``feedback.steer``)."""


class FeedbackIntake(DeliveryQueue, PullRecords, FeedbackRecords, Protocol):
    """Turning stored webhook deliveries into feedback and PR states (``feedback.intake``)."""


class RunViews(RunReads, TurnReads, PullRecords, FeedbackRecords, RunPages, TurnPages, Protocol):
    """What the read models of a run and of the runs list read (``views.reads``)."""


class OpsStore(OpsCounts, SchemaHealth, Protocol):
    """What ``/metrics`` and ``/readyz`` read (``api.ops``)."""


class ApiRuns(RunViews, RunLifecycle, Protocol):
    """The runs routes: the read models, and submitting or reopening a run (``api.runs``)."""


class DriftRecords(RunReads, ComponentHeads, Protocol):
    """Following a moved upstream and building on an adopted head: the round a re-measurement runs
    in, and the component's new base or head with its event (``feedback.drift``)."""


class PublishRecords(
    RunReads, TurnReads, RunLifecycle, ComponentHeads, PullRecords, FeedbackRecords, Protocol
):
    """Publishing a run's champion (``feedback.publish.Publisher``, and ``drift`` through it): the
    figures of the PR body, its PR records, the rounds' feedback it cites, an adopted head, and the
    PUBLISHED events (``RunLifecycle.append_event``)."""


class RoundJobReads(RunReads, TurnReads, Protocol):
    """Describing a round as a job: the round's number, the next turn's, the score a refinement round
    must hold (``control.roundjobs``)."""


class RefinementRecords(RunReads, TurnReads, ComponentHeads, FeedbackRecords, RoundRecords, Protocol):
    """Starting and ending a refinement round on the controller (``feedback.rounds``): an adopted head
    it starts from, its feedback consumed and replied to, its decided turns, its start and finish."""


class WatchRecords(RefinementRecords, DeliveryQueue, PullRecords, Protocol):
    """The feedback watch of one run (``feedback.watch.Watch``): its PRs, the verdicts on its
    feedback, its phase, the rounds it runs when the driver runs none, and the intake of a hub of
    its own (``FeedbackIntake``) when the process shares none."""


class TurnRecords(Ledger, TurnReads, Protocol):
    """Deciding a turn the controller cut off (a lost pod's) after reading which one it was
    (``remote.cutoff``)."""


class ContextRecords(Ledger, RunReads, Protocol):
    """Opening a run's round environment on the controller (``execution.runs.open_context``): the
    components' heads it starts from, and the ledger the environment then holds (and nothing more:
    the environment carries no store, ADR-0045)."""


class RemoteRoundStore(Ledger, RunReads, TurnReads, FeedbackRecords, WorkerRoundRecords, Protocol):
    """The controller's side of remote rounds (``remote.remote_rounds``): minting and checking worker
    tokens, recording proved heads and outcomes, and the ledger the worker routes write through."""


class ControllerStore(
    Ledger,
    RunReads,
    TurnReads,
    RunLeases,
    RunLifecycle,
    ComponentHeads,
    PullRecords,
    FeedbackRecords,
    RoundRecords,
    DeliveryQueue,
    WorkerRoundRecords,
    ProcessGroupRecords,
    Scheduling,
    RunPages,
    TurnPages,
    OpsCounts,
    SchemaHealth,
    SessionRevocations,
    Protocol,
):
    """Every port at once: what the composition root hands the run service and the API. Only the
    root and the driver that passes each collaborator its own port hold this."""

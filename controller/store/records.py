"""What the rest of crucible sees of the store: frozen dataclasses, never ORM objects.

Keeping ORM rows inside ``controller.store`` means no caller can lazily load, mutate or
accidentally flush database state; every read is a snapshot, every write goes through a
``Store`` method that states its contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from pydantic import JsonValue

from controller.domain.enums import (
    OUTCOME_OF_REASON,
    EventKind,
    Outcome,
    Reason,
    RunPhase,
    RunStatus,
    SampleArm,
    SequentialStop,
    StopReason,
    TurnPhase,
)

Sample = tuple[SampleArm, int, Mapping[str, float], bool]
"""One raw measurement as the turn path stores it: (arm, index, values by metric name, valid)."""


@dataclass(frozen=True)
class NewRun:
    """A run as the caller creates it; the store fills in status, counters and timestamps."""

    id: str
    spec_text: str
    spec_fingerprint: str
    spec_path: str | None
    objective: str
    metric_name: str
    direction: str
    turns_planned: int
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunRecord:
    id: str
    spec_text: str
    spec_fingerprint: str
    spec_path: str | None
    objective: str
    metric_name: str
    direction: str
    turns_planned: int
    options: dict[str, JsonValue]
    status: RunStatus
    stop_reason: StopReason | None
    stop_message: str | None
    baseline_value: float | None
    champion_value: float | None
    champion_turn: int | None
    cost_usd: float
    tokens: int
    round: int
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    phase: RunPhase = RunPhase.SEARCH
    # The lease of the process driving the run (``leases.py``): None when nobody holds it.
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    cancel_requested: bool = False


@dataclass(frozen=True)
class ComponentRecord:
    """One git repository of a run.

    head_sha is the champion commit (== base_sha until a keep); user_head and user_state describe the
    user's checkout at run start so ``accept`` can refuse when it changed since.
    """

    run_id: str
    name: str
    repo: str
    base_ref: str
    base_sha: str
    head_sha: str
    user_head: str | None = None
    user_state: str | None = None
    upstream: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TurnDecision:
    """The engine's verdict on one turn. ``commits`` (component -> new sha) is set only on accept."""

    outcome: Outcome
    reason: Reason
    value: float | None = None
    p_value: float | None = None
    hypothesis: str | None = None
    changed_paths: tuple[str, ...] = ()
    commits: Mapping[str, str] = field(default_factory=dict)
    cost_usd: float = 0.0
    tokens: int = 0
    duration_s: float = 0.0
    detail: str = ""
    pairs: int | None = None
    sequential_stop: SequentialStop | None = None

    def __post_init__(self) -> None:
        if OUTCOME_OF_REASON[self.reason] is not self.outcome:
            implied = OUTCOME_OF_REASON[self.reason]
            raise ValueError(f"reason {self.reason} implies outcome {implied}, not {self.outcome}")


@dataclass(frozen=True)
class TurnRecord:
    """A turn as stored; the decision fields are None/empty while the phase is STARTED."""

    run_id: str
    number: int
    round: int
    phase: TurnPhase
    started_at: datetime
    decided_at: datetime | None
    outcome: Outcome | None
    reason: Reason | None
    value: float | None
    p_value: float | None
    hypothesis: str | None
    changed_paths: tuple[str, ...]
    commits: Mapping[str, str]
    cost_usd: float
    tokens: int
    duration_s: float
    detail: str
    pairs: int | None = None
    sequential_stop: SequentialStop | None = None


@dataclass(frozen=True)
class HypothesisReport:
    """One parallel hypothesis of a turn (``broker.parallel > 1``) as its executor reports it, before
    the controller decides the turn (ADR-0016). Everything the choice among the turn's hypotheses needs
    is here, so the controller can decide from the stored reports alone (N pods report on their own).

    reason: its verdict on its own at the plain level (IMPROVED: it would be kept alone), or why it
    never reached one (AGENT_FAILED, NO_DIFF, ...). value / reference_value: the candidate's and the
    champion's medians; delta: the improvement in the metric's good direction. commits: component ->
    the commit holding the hypothesis (only for one that could be kept). proposal: the knobs
    proposer's change, for replaying the walk.
    """

    index: int
    reason: Reason
    value: float | None = None
    reference_value: float | None = None
    delta: float | None = None
    p_value: float | None = None
    hypothesis: str | None = None
    proposal: Mapping[str, Any] | None = None
    changed_paths: tuple[str, ...] = ()
    commits: Mapping[str, str] = field(default_factory=dict)
    samples: tuple[Sample, ...] = ()
    cost_usd: float = 0.0
    tokens: int = 0
    duration_s: float = 0.0
    detail: str = ""

    def __post_init__(self) -> None:
        if self.index < 0:
            raise ValueError(f"index: must be >= 0, got {self.index}")
        if self.reason is Reason.SUPERSEDED:
            raise ValueError("reason: superseded is decided with the turn, not reported")


@dataclass(frozen=True)
class HypothesisRecord:
    """A parallel hypothesis as stored. While the turn is STARTED, ``reason`` is the reported one;
    once it is DECIDED, the final one (``superseded``, ``not_significant`` after the correction, ...)."""

    run_id: str
    turn: int
    index: int
    phase: TurnPhase
    outcome: Outcome
    reason: Reason
    value: float | None
    reference_value: float | None
    delta: float | None
    p_value: float | None
    hypothesis: str | None
    proposal: Mapping[str, Any] | None
    changed_paths: tuple[str, ...]
    commits: Mapping[str, str]
    samples: tuple[Sample, ...]
    cost_usd: float
    tokens: int
    duration_s: float
    detail: str


@dataclass(frozen=True)
class SampleRecord:
    """One raw measurement. turn 0 is the baseline; an invalid sample has empty ``values``."""

    run_id: str
    turn: int
    arm: SampleArm
    index: int
    values: Mapping[str, float]
    valid: bool


@dataclass(frozen=True)
class TurnPage:
    """A page of decided turns, the run's metric and the values the page shows of it: each turn's
    valid samples by (turn, arm), in the order they were taken, and the turns' parallel hypotheses
    (``Store.turn_page``)."""

    metric_name: str
    turns: list[TurnRecord]
    samples: Mapping[tuple[int, SampleArm], list[float]]
    hypotheses: list[HypothesisRecord] = field(default_factory=list)


@dataclass(frozen=True)
class EventRecord:
    """One entry of the append-only event stream; ``id`` is global and increases monotonically."""

    id: int
    run_id: str
    kind: EventKind
    payload: Mapping[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class ChampionUpdate:
    """The new champion of a run; turn 0 is the baseline."""

    value: float
    turn: int


@dataclass(frozen=True)
class ProcessState:
    """What crucible did to fit one PR into the team's process (``[publish]``): the labels,
    reviewers (teams as ``team:<slug>``) and assignees it handled, each applied or refused by the
    forge, so none is asked for twice, and a sentence per refusal for the run's readers."""

    labels: tuple[str, ...] = ()
    reviewers: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    marked: tuple[int, ...] = ()  # refinement rounds that could not hold the score, marked on the PR

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "labels": [*self.labels],
            "reviewers": [*self.reviewers],
            "assignees": [*self.assignees],
            "problems": [*self.problems],
            "marked": [*self.marked],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ProcessState:
        data = data or {}

        def names(key: str) -> tuple[str, ...]:
            return tuple(str(v) for v in data.get(key) or ())

        marked = tuple(int(v) for v in data.get("marked") or ())
        return cls(names("labels"), names("reviewers"), names("assignees"), names("problems"), marked)


@dataclass(frozen=True)
class PullRecord:
    """One draft PR per (run, component): where it is and what crucible last pushed to it.

    ``pushed_sha`` is the commit crucible pushed last (or adopted: a head someone else pushed); a
    branch head that differs from it means someone else pushed (a foreign push). ``base_sha`` is the
    base the PR's diff is relative to. ``published_value`` is the metric crucible measured for
    ``pushed_sha`` (None for a head nobody measured, such as an adopted one); ``note`` says why the PR
    does not show the run's best, when it does not (``needs merge: <paths>``, paused, ...).
    """

    run_id: str
    component: str
    repo: str  # owner/name the PR lives in (the upstream)
    number: int
    url: str
    branch: str
    head_sha: str
    pushed_sha: str
    base_sha: str
    draft: bool = True
    state: str = "open"
    paused: bool = False
    published_value: float | None = None
    note: str | None = None
    title: str | None = None  # the title crucible set last (another on the forge: a person's edit)
    process: ProcessState = ProcessState()
    status_sha: str | None = None  # the head whose measurement crucible reported on the PR


@dataclass(frozen=True)
class TurnCounts:
    """Aggregates the turn loop needs before every turn, without reading every turn."""

    decided: Mapping[int, int]  # round -> decided turns
    highest: int  # highest turn number so far (0: none)
    started: tuple[int, ...]  # turns cut off before their decision, by number


@dataclass(frozen=True)
class RunTally:
    """What the runs list counts per run: decided turns, kept (accepted) turns, pull requests."""

    decided: int
    kept: int
    pulls: int


@dataclass(frozen=True)
class TurnSnapshot:
    """What the turn loop reads before every turn, in one read: the run, the aggregates and the
    most recent turns (ascending)."""

    run: RunRecord
    counts: TurnCounts
    recent: tuple[TurnRecord, ...]


@dataclass(frozen=True)
class Renewal:
    """What a heartbeat learns when it renews a lease: its new expiry, and whether someone asked
    the run to stop (``Store.renew_lease``)."""

    expires_at: datetime
    cancel_requested: bool


@dataclass(frozen=True)
class WorkerRoundRecord:
    """One attempt of a remote round (``crucible worker``): who may act for it and what it reported.

    token_hash: sha256 of the bearer token (the token itself is never stored).
    job: the ``RoundJob`` JSON the worker fetches.
    heads: component -> the commits verified bundles of this attempt brought in, oldest first.
    outcome: the ``RoundOutcome`` JSON the worker reported at its end; None until then.
    """

    run_id: str
    round: int
    attempt: int
    token_hash: str
    job: Mapping[str, Any]
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None
    heads: Mapping[str, tuple[str, ...]]
    outcome: Mapping[str, Any] | None


class FeedbackSource(StrEnum):
    """Where a feedback item came from (``FeedbackEvent.source``)."""

    REVIEW = "review"
    REVIEW_COMMENT = "review_comment"
    ISSUE_COMMENT = "issue_comment"
    STEER = "steer"  # an operator's steer through the API (ADR-0012), trusted by its token


class FeedbackVerdict(StrEnum):
    """Whether a feedback item may steer a round (decided by the trust check)."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"


class FeedbackFields(Protocol):
    """What the store needs of one feedback version; ``controller.forge.base.FeedbackEvent`` has it.

    A Protocol, because the store and the forge are sibling layers that must not import each other.
    """

    @property
    def pr_number(self) -> int: ...
    @property
    def source(self) -> str: ...
    @property
    def external_id(self) -> int: ...
    @property
    def review_id(self) -> int | None: ...
    @property
    def author(self) -> str: ...
    @property
    def author_type(self) -> str: ...
    @property
    def association(self) -> str: ...
    @property
    def body(self) -> str: ...
    @property
    def path(self) -> str | None: ...
    @property
    def line(self) -> int | None: ...
    @property
    def action(self) -> str: ...
    @property
    def updated_at(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def diff_hunk(self) -> str | None: ...


@dataclass(frozen=True)
class NewDelivery:
    """A webhook delivery to store (``Store.save_deliveries``).

    ``payload_json`` is the text of a JSON object, stored as it is: the webhook edge hands over the
    body it verified and parsed, so the payload is never re-encoded on the way in. It must be
    valid JSON (the caller has parsed it); the store does not parse it again.
    """

    id: str
    event: str
    action: str | None
    payload_json: str


@dataclass(frozen=True)
class DeliveryRecord:
    """One webhook delivery as received (``id`` is GitHub's ``X-GitHub-Delivery``)."""

    id: str
    event: str
    action: str | None
    payload: Mapping[str, Any]
    received_at: datetime
    processed_at: datetime | None


@dataclass(frozen=True)
class FeedbackRecord:
    """One version of one piece of review feedback on a run's PR (see ``FeedbackEvent``).

    ``trusted``/``verdict``/``reason`` stay None until the trust check decides; ``round`` is the
    refinement round that consumed the item (None: not consumed yet). ``diff_hunk`` is the forge's
    hunk of an inline comment (None for other sources and for rows stored before revision 0004).
    """

    id: int
    run_id: str
    component: str
    pr_number: int
    source: FeedbackSource
    external_id: int
    review_id: int | None
    author: str
    author_type: str
    association: str
    body: str
    path: str | None
    line: int | None
    action: str
    updated_at: str
    url: str
    received_at: datetime
    trusted: bool | None
    verdict: FeedbackVerdict | None
    reason: str | None
    round: int | None
    diff_hunk: str | None = None

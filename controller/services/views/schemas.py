"""The one typed schema of what a run shows (docs/cli.md, "--json"), shared by ``--json`` and the REST API.

Before, ``reads.py`` assembled dicts in several places and the API would have had to copy them; now
each shape is a pydantic model, the CLI prints ``model_dump(mode="json")`` and FastAPI declares the
same models as ``response_model``, so the OpenAPI document is the contract and a golden test
(``tests/api/test_schemas.py`` against ``docs/schemas.json``) fails when a field changes by accident.

Field names are the ``--json`` names. Enumerated values use the domain enums, so the document lists
every value a client may see. Models are frozen: a view is a snapshot, never edited after it is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.domain.enums import (
    Direction,
    EventKind,
    Outcome,
    Reason,
    RunStatus,
    SampleArm,
    SequentialStop,
    StopReason,
    TurnStep,
)


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Metric(_View):
    name: str
    direction: Direction


class Baseline(_View):
    value: float | None = Field(description="median of the baseline samples; null until measured")
    samples: list[float]


class Best(_View):
    value: float = Field(description="the champion's median")
    turn: int = Field(description="the turn that made it the champion (>= 1)")


class Hypothesis(_View):
    """One of a turn's parallel hypotheses (``broker.parallel > 1``); at most one per turn is kept."""

    index: int = Field(description="0 .. parallel - 1: the agent's CRUCIBLE_PARALLEL_INDEX")
    outcome: Outcome
    reason: Reason = Field(description="superseded: it passed the keep rule but another improved more")
    value: float | None
    samples: list[float]
    reference_samples: list[float]
    p_value: float | None
    changed_paths: list[str]
    hypothesis: str | None
    commit: str | dict[str, str] | None = Field(
        description="the commit holding it (only for one that could be kept); component -> sha for several"
    )
    cost_usd: float
    duration_s: float
    detail: str


class Turn(_View):
    """A decided turn, as in ``--json`` and ``GET /api/runs/{id}/turns``."""

    turn: int
    round: int
    outcome: Outcome | None
    reason: Reason | None
    value: float | None
    samples: list[float]
    reference_samples: list[float]
    p_value: float | None
    changed_paths: list[str]
    hypothesis: str | None
    commit: str | dict[str, str] | None = Field(
        description="the kept commit; one sha for a single component, component -> sha for several"
    )
    cost_usd: float
    duration_s: float
    detail: str
    pairs: int | None = Field(
        default=None, description="interleaved pairs a sequential measurement used; null for the fixed rule"
    )
    sequential_stop: SequentialStop | None = Field(
        default=None, description="why a sequential measurement stopped where it did; null for the fixed rule"
    )
    hypotheses: list[Hypothesis] = Field(
        default_factory=list,
        description="the turn's parallel hypotheses (broker.parallel > 1), by index; empty for one. The "
        "turn's own fields are the kept one's, or, when none was kept, the one that came closest",
    )


class Component(_View):
    name: str
    base_sha: str
    head_sha: str
    diff: str | None = Field(
        default=None, description="unified diff base_sha..head_sha; omitted from lists and the TSV"
    )


class PullRequest(_View):
    component: str
    url: str
    number: int
    branch: str
    draft: bool
    head_sha: str = Field(description="the commit crucible pushed last")
    state: str
    paused: bool
    published_value: float | None = Field(
        default=None, description="the score the PR shows (the run's best unless the PR lags it)"
    )
    note: str | None = Field(default=None, description="why the PR's head is not the run's best, if so")
    problems: list[str] = Field(
        default_factory=list,
        description="what the forge refused of [publish] (an unknown reviewer, a label), one sentence each",
    )


class FeedbackItem(_View):
    id: int
    component: str
    pr_number: int
    source: str
    author: str
    association: str | None
    path: str | None
    line: int | None
    action: str | None
    body: str
    trusted: bool | None
    verdict: str | None
    reason: str | None
    round: int | None


class Round(_View):
    """A finished refinement round (the ``round_finished`` event)."""

    round: int
    component: str
    feedback: list[int] = Field(description="ids of the feedback items the round addressed")
    kept: bool
    head: str | None = Field(description="the commit pushed, when the round held the score")
    detail: str


class RoundRequest(_View):
    """A refinement round requested by hand (``POST /api/runs/{id}/rounds``): the steer is stored as
    a feedback item, and the run's watch starts a round for it next (ADR-0012)."""

    run_id: str
    component: str = Field(description="the component whose pull request the round refines")
    pr_number: int
    feedback: int = Field(description="id of the stored steer; the round that addresses it lists it")
    after_round: int = Field(description="the run's latest round when the steer was stored")
    message: str


class Reply(_View):
    """A reply crucible drafted for a human to post (never posted by crucible)."""

    feedback: int
    author: str
    reply: str


class Feedback(_View):
    run_id: str
    feedback: list[FeedbackItem]
    rounds: list[Round]
    replies: list[Reply]


class Run(_View):
    """One run as ``crucible loop --json`` ends and ``GET /api/runs/{id}`` answers."""

    run_id: str
    status: RunStatus
    stop_reason: StopReason | None
    message: str | None
    objective: str
    metric: Metric
    baseline: Baseline
    best: Best | None = Field(description="null when nothing was kept")
    cost_usd: float
    tokens: int
    turns: list[Turn]
    components: list[Component]
    pull_requests: list[PullRequest]
    created_at: datetime
    finished_at: datetime | None
    feedback: list[FeedbackItem]
    rounds: list[Round]
    replies: list[Reply]


class RunSummary(_View):
    """One line of ``crucible runs list`` and ``GET /api/runs``."""

    run_id: str
    status: RunStatus
    stop_reason: StopReason | None
    objective: str
    baseline: float | None
    best: float | None
    created_at: datetime


class Event(BaseModel):
    """One entry of the event stream: these fields plus the kind's own payload fields, flat (JSONL
    export, Server-Sent Events)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    id: int
    run_id: str
    kind: EventKind
    created_at: datetime


def dump(model: BaseModel | list[Any]) -> Any:
    """The JSON-ready form of a view (or a list of views) for ``--json``."""
    if isinstance(model, list):
        return [dump(item) for item in model]
    return model.model_dump(mode="json")


class TurnStepEvent(Event):
    """``turn_step``: the running turn reached ``step`` (``arms``: what a measurement compares)."""

    turn: int
    round: int
    step: TurnStep
    arms: list[SampleArm] = Field(default_factory=list)


class SampleEvent(Event):
    """``sample``: one measured sample of the running turn as it arrived; ``value`` is the primary
    metric, null for an invalid sample."""

    turn: int
    round: int
    arm: SampleArm
    index: int
    value: float | None
    valid: bool


class HypothesisStepEvent(TurnStepEvent):
    """``turn_step`` of one of a parallel turn's hypotheses (``broker.parallel > 1``)."""

    parallel_index: int = Field(description="the hypothesis (0 .. parallel - 1) that reached the step")


class HypothesisSampleEvent(SampleEvent):
    """``sample`` of one of a parallel turn's hypotheses (``broker.parallel > 1``)."""

    parallel_index: int = Field(description="the hypothesis (0 .. parallel - 1) the sample measured")


EVENT_MODELS: dict[str, type[Event]] = {
    EventKind.TURN_STEP: TurnStepEvent,
    EventKind.SAMPLE: SampleEvent,
}
# A parallel turn's progress names its hypothesis; a turn of one keeps the shape above, no null field.
PARALLEL_EVENT_MODELS: dict[str, type[Event]] = {
    EventKind.TURN_STEP: HypothesisStepEvent,
    EventKind.SAMPLE: HypothesisSampleEvent,
}


def event_view(
    event_id: int, run_id: str, kind: str, created_at: datetime, payload: Mapping[str, object]
) -> Event:
    """The event as its kind's model (the progress kinds are typed; the others carry their payload's
    fields as extras)."""
    models = PARALLEL_EVENT_MODELS if "parallel_index" in payload else EVENT_MODELS
    model = models.get(kind, Event)
    head = {"id": event_id, "run_id": run_id, "kind": kind, "created_at": created_at}
    try:
        return model.model_validate({**payload, **head})
    except ValidationError:
        # A stored payload that does not match its kind (``domain.events``) must not break the
        # stream or a page: the event is shown without its payload, marked so.
        return Event.model_validate({**head, "malformed": True})

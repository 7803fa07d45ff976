"""A payload model per event kind: what each entry of a run's event stream carries (ADR-0028).

Events are written by the turn path, the rounds, the controller and (through the worker routes) by
``crucible worker``, and read back by the knobs walk, publishing, the views and the dashboard. One
model per kind is the one place their fields are declared: writers build the model and store its
``dump()``, readers go through ``read`` and get the model or None.

Reading never fails: a stored payload that does not match its kind's model (an older release, a
hand-edited database, a forged worker write) reads as None, and the reader skips or shows it plainly
instead of answering 500. Models allow extra fields, so a payload written by a newer release with
one more field still reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from controller.domain.enums import (
    EventKind,
    Outcome,
    Reason,
    RunStatus,
    SampleArm,
    SequentialStop,
    StopReason,
    TurnStep,
)


class EventPayload(BaseModel):
    """Base of the payload models: frozen, extra fields kept (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    def dump(self) -> dict[str, JsonValue]:
        """The payload as stored: JSON values, no field left at None that the writer did not set."""
        return self.model_dump(mode="json", exclude_unset=True)


class BaselinePayload(EventPayload):
    """``baseline``: the baseline's median and its valid samples of the primary metric."""

    value: float
    samples: list[float] = Field(default_factory=list)


class TurnStartedPayload(EventPayload):
    """``turn_started``; ``parallel``: the number of hypotheses of a parallel turn (ADR-0016)."""

    turn: int
    round: int
    parallel: int | None = None


class KnobChange(EventPayload):
    """A knobs proposal (``agent.builtin = "knobs"``): the knob and the values it moved between."""

    file: str
    key: str
    old: bool | int | float | str  # a knob's value (``engine.knobfiles.Scalar``)
    new: bool | int | float | str
    hypothesis: str | None = None


class HypothesisOutcome(EventPayload):
    """One hypothesis of a parallel turn in its decision's event (the knobs walk replays these)."""

    index: int
    outcome: Outcome
    reason: Reason
    value: float | None = None
    p_value: float | None = None
    hypothesis: str | None = None
    proposal: KnobChange | None = None


class TurnDecidedPayload(EventPayload):
    """``accepted`` / ``rejected`` / ``failed`` / ``no_change``: a turn's decision.

    parallel_index / hypotheses: the leading hypothesis and all of them, for a parallel turn;
    lost: how a cut-off turn's pod was lost (``cutoff``); turn None: a bundle refused for no turn."""

    turn: int | None
    round: int
    outcome: Outcome
    reason: Reason
    value: float | None = None
    p_value: float | None = None
    hypothesis: str | None = None
    detail: str = ""
    pairs: int | None = None
    sequential_stop: SequentialStop | None = None
    proposal: KnobChange | None = None
    parallel_index: int | None = None
    hypotheses: list[HypothesisOutcome] | None = None
    lost: str | None = None


class TurnStepPayload(EventPayload):
    """``turn_step``: the running turn reached ``step`` (``arms``: what a measurement compares)."""

    turn: int
    round: int
    step: TurnStep
    arms: list[SampleArm] = Field(default_factory=list)
    parallel_index: int | None = None


class SamplePayload(EventPayload):
    """``sample``: one measured sample of the running turn; ``value`` null when invalid."""

    turn: int
    round: int
    arm: SampleArm
    index: int
    value: float | None
    valid: bool
    parallel_index: int | None = None


class CompletedPayload(EventPayload):
    """``completed``: the run stopped (its status and why)."""

    status: RunStatus
    stop_reason: StopReason | None = None
    message: str = ""


class PublishedPayload(EventPayload):
    """``published``: a PR was opened or pushed (``value``: the measurement of ``head_sha``), a
    foreign head adopted (``adopted_head``), or what the forge refused (``refused``)."""

    component: str
    number: int | None = None
    url: str | None = None
    head_sha: str | None = None
    value: float | None = None
    adopted_head: str | None = None
    refused: list[str] | None = None


class RoundStartedPayload(EventPayload):
    """``round_started``: a refinement round began for ``component``'s PR."""

    round: int
    component: str | None = None


class RoundFinishedPayload(EventPayload):
    """``round_finished``: a refinement round ended; ``head`` is the commit pushed when it held."""

    round: int
    component: str
    feedback: list[int] = Field(default_factory=list)
    kept: bool
    head: str | None = None
    detail: str = ""


class ReplyDraftedPayload(EventPayload):
    """``reply_drafted``: a reply crucible drafted to feedback item ``feedback`` (never posted)."""

    feedback: int
    author: str
    reply: str


class RelaunchedPayload(EventPayload):
    """``relaunched``: a round launched again after its pod was lost (ADR-0019)."""

    round: int
    lost_attempt: int
    relaunch: int
    error: str = ""


class ResumedPayload(EventPayload):
    """``resumed``: a run taken up again; the process groups of the earlier holder it killed."""

    killed_process_groups: list[int] = Field(default_factory=list)


class OtherPayload(EventPayload):
    """The kinds no reader takes fields from (``base_followed``, ``built_on_adopted``,
    ``feedback_received``, ``pr_closed``): any JSON object."""


P = TypeVar("P", bound=EventPayload)

PAYLOAD_MODELS: dict[EventKind, type[EventPayload]] = {
    EventKind.BASELINE: BaselinePayload,
    EventKind.TURN_STARTED: TurnStartedPayload,
    EventKind.ACCEPTED: TurnDecidedPayload,
    EventKind.REJECTED: TurnDecidedPayload,
    EventKind.FAILED: TurnDecidedPayload,
    EventKind.NO_CHANGE: TurnDecidedPayload,
    EventKind.PUBLISHED: PublishedPayload,
    EventKind.BASE_FOLLOWED: OtherPayload,
    EventKind.BUILT_ON_ADOPTED: OtherPayload,
    EventKind.FEEDBACK_RECEIVED: OtherPayload,
    EventKind.ROUND_STARTED: RoundStartedPayload,
    EventKind.ROUND_FINISHED: RoundFinishedPayload,
    EventKind.PR_CLOSED: OtherPayload,
    EventKind.REPLY_DRAFTED: ReplyDraftedPayload,
    EventKind.RESUMED: ResumedPayload,
    EventKind.RELAUNCHED: RelaunchedPayload,
    EventKind.COMPLETED: CompletedPayload,
    EventKind.TURN_STEP: TurnStepPayload,
    EventKind.SAMPLE: SamplePayload,
}


def validate(kind: EventKind, payload: Mapping[str, Any]) -> EventPayload:
    """The payload as its kind's model; pydantic's ValidationError (a ValueError) naming the field
    when it does not match (what a writer that takes payloads from elsewhere calls)."""
    return PAYLOAD_MODELS[kind].model_validate(dict(payload))


def read(model: type[P], payload: Mapping[str, Any]) -> P | None:
    """The stored ``payload`` as ``model``; None when it does not match (module docstring)."""
    try:
        return model.model_validate(dict(payload))
    except ValidationError:
        return None

"""The worker protocol: one pydantic schema per request and answer of the worker routes (ADR-0028).

``crucible worker`` (``store.http_ledger``, the client) and the controller (``api.worker``, the
routes) both import these, so a field is declared once and both ends agree by construction; FastAPI
derives the worker routes' part of ``docs/openapi.json`` from them, and the golden test pins it.

The ledger's records (``store.records``) are frozen dataclasses that pydantic validates and
serialises as they are: a ``TurnRecord`` on the wire is the ``TurnRecord`` the store returns, with
enums by value, datetimes as ISO 8601, a ``Sample`` as ``[arm, index, values, valid]``. Only what
has no record of its own is a model here: the request bodies, and the answers that are not records.

Versioning: ``PROTOCOL_VERSION`` counts incompatible changes of these shapes. The client sends it in
``PROTOCOL_HEADER`` with every request; the routes refuse another version with a 400 of kind
``protocol`` naming both, so a loop image of another release fails its first request with a clear
sentence instead of a field error deep in a round. A request without the header (curl, a test) is
read as the current version. Bodies forbid unknown fields: a typo is a 422 naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from controller.domain import events
from controller.domain.enums import EventKind, Reason, RunStatus, StopReason
from controller.domain.jobs import HoldRule, RoundJob
from controller.store.records import ChampionUpdate, FeedbackSource, Sample, TurnDecision

PROTOCOL_VERSION = 4  # 1: the codec of ADR-0014; 2: no ``ledger/status``, worker event kinds (ADR-0031);
# 4: confirmations of claimed keeps (ADR-0043)
PROTOCOL_HEADER = "Crucible-Worker-Protocol"


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- requests -------------------------------------------------------------------------------------


class EventSpec(_Wire):
    """An event to record with a ledger write, in the same transaction. Its payload must match its
    kind's model (``domain.events``): a 422 naming the field otherwise, so no malformed event is
    stored through the worker routes."""

    kind: EventKind
    payload: dict[str, JsonValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _payload_of_its_kind(self) -> EventSpec:
        events.validate(self.kind, self.payload)
        return self

    @classmethod
    def of(cls, event: tuple[EventKind, Mapping[str, Any]]) -> EventSpec:
        return cls(kind=event[0], payload=dict(event[1]))

    def pair(self) -> tuple[EventKind, dict[str, JsonValue]]:
        return self.kind, dict(self.payload)


class BaselineReport(_Wire):
    """``POST ledger/baseline``: the baseline's median and its event's payload."""

    value: float
    event_payload: dict[str, JsonValue]

    @model_validator(mode="after")
    def _payload_of_its_kind(self) -> BaselineReport:
        events.validate(EventKind.BASELINE, self.event_payload)
        return self


class SamplesReport(_Wire):
    """``POST ledger/samples``: raw measurements of a turn (0: the baseline)."""

    turn: int
    samples: list[Sample]


class TurnStart(_Wire):
    """``POST ledger/turns``: start turn ``number`` of ``round``."""

    number: int
    round: int
    event: EventSpec | None = None


class DecisionReport(_Wire):
    """``POST ledger/turns/{number}/decision``: the ``Ledger.decide_turn`` arguments.

    hypotheses: a parallel turn's final verdict per hypothesis index, as (reason, detail)."""

    decision: TurnDecision
    champion: ChampionUpdate | None = None
    component_heads: dict[str, str]
    event: EventSpec
    samples: list[Sample] = Field(default_factory=list)
    hypotheses: dict[int, tuple[Reason, str]] | None = None


class RoundEnd(_Wire):
    """``POST outcome``: how the round ended (the broker's ``RoundOutcome``)."""

    run_status: RunStatus
    stop_reason: StopReason | None = None
    message: str = ""
    kept: bool = False


# -- answers --------------------------------------------------------------------------------------


class Done(_Wire):
    """The answer of a write that returns nothing: ``{}``."""


class Accepted(_Wire):
    """The answer to the round's outcome."""

    accepted: Literal[True] = True


class BundleHeads(_Wire):
    """The heads a bundle brought in, component -> commit, once the controller verified them."""

    heads: dict[str, str]


class JobJson(_Wire):
    """A ``RoundJob`` as ``RoundJob.to_json`` writes it (and the store keeps it)."""

    schema_: int = Field(alias="schema")
    run_id: str
    round: int
    attempt: int = 0
    kind: str
    turns: int
    first_turn: int
    heads: dict[str, str]
    steer: str
    feedback_ids: list[int]
    hold: HoldRule | None

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @classmethod
    def of(cls, job: RoundJob) -> JobJson:
        return cls.model_validate(job.to_json())

    def job(self) -> RoundJob:
        """The job; SpecError naming the field for one this crucible cannot read."""
        return RoundJob.from_json(self.model_dump(mode="json", by_alias=True))


class HypothesisScope(_Wire):
    """What a hypothesis pod's token is for (ADR-0018): hypothesis ``index`` of ``turn``, and the
    knobs proposal the controller computed for it (None for a real agent)."""

    turn: int
    index: int
    proposal: dict[str, JsonValue] | None = None


class ConfirmScope(_Wire):
    """What a confirmation's token is for (ADR-0043): measure the ``candidate`` commits a worker claimed
    turn ``turn`` kept against the ``champion`` heads, interleaved, with the run's metric. Both come
    from the controller's own clone (the start bundles), never from the worker that claimed the keep."""

    turn: int
    champion: dict[str, str]
    candidate: dict[str, str]


class ConfirmationReport(_Wire):
    """``POST confirmation``: the samples a confirmation measured (champion and candidate arms, the
    base too when a guard needed it). Nothing else: the controller decides from them."""

    samples: list[Sample]


class ConfirmationOutcome(_Wire):
    """What the controller concluded from a confirmation's samples: ``confirmed`` when the run's keep
    rule keeps the candidate on them, and ``detail``, the rule's sentence (or what was wrong)."""

    turn: int
    confirmed: bool
    detail: str
    value: float | None = None


class SlotNext(_Wire):
    """``GET slot/next?after=T``: a warm hypothesis pod's next hypothesis (ADR-0034). ``done``: the
    round needs the slot no more (exit); otherwise hypothesis ``index`` of ``turn`` with ``token``,
    the worker token of that one hypothesis (a secret: never logged), or all None: nothing offered
    yet, ask again."""

    done: bool = False
    turn: int | None = None
    index: int | None = None
    token: str | None = Field(default=None, repr=False)


class ComponentBase(_Wire):
    name: str
    base_sha: str


class JobInputs(_Wire):
    """``GET job``: the round's job, the spec text, the components' base shas, whether round 0 hands
    over to the feedback watch, and the hypothesis a hypothesis pod's token is for (or the claimed keep a
    confirmation's token measures)."""

    job: JobJson
    hypothesis: HypothesisScope | None
    confirm: ConfirmScope | None = None
    attempt: int
    spec: str
    hand_over: bool
    components: list[ComponentBase]


class QuotedFeedback(_Wire):
    """A feedback item as a refinement round quotes it in CANDIDATE.md."""

    author: str
    body: str
    path: str | None
    line: int | None
    source: FeedbackSource
    diff_hunk: str | None


class RoundFeedback(_Wire):
    """``GET feedback``: the items a refinement round addresses, and the component its PR is of."""

    component: str | None
    items: list[QuotedFeedback]

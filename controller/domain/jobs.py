"""What a broker carries: the immutable description of one round, and the states a launched round has.

A round is the unit the controller hands to a broker (ADR-0003): round 0 searches, round k >= 1
refines the published candidate with feedback. ``RoundJob`` holds everything a process that knows
nothing else about the run needs to execute the round's turns (the Kubernetes worker fetches it as
JSON over HTTP), so it lives in ``domain``, below every broker, and speaks only plain values: no
paths of the controller's machine, no clients, no secrets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, TypedDict

from controller.domain.errors import ConflictError, SpecError

JOB_SCHEMA = 1  # bumped when a field changes meaning; a worker refuses a job of another version


class RoundKind(StrEnum):
    """How a round keeps a turn: search keeps improvements, refinement keeps what holds the score."""

    SEARCH = "search"
    REFINEMENT = "refinement"


class HoldJson(TypedDict):
    tolerance: float
    relative: bool
    first_published: float


class RoundJobJson(TypedDict):
    """``RoundJob.to_json()``: what is stored with a launched round and fetched by the worker."""

    schema: int
    run_id: str
    round: int
    attempt: int
    kind: str
    turns: int
    first_turn: int
    heads: dict[str, str]
    steer: str
    feedback_ids: list[int]
    hold: HoldJson | None


@dataclass(frozen=True)
class HoldRule:
    """A refinement round's keep rule (docs/keep-rule.md): the candidate may be worse than the PR head, and
    than the first published score, by at most ``tolerance`` (a fraction when ``relative``)."""

    tolerance: float
    relative: bool
    first_published: float


@dataclass(frozen=True)
class RoundJob:
    """One round of one run, as a broker launches it.

    run_id / round: which round (``key``).
    attempt: which launch of the run this is: 0 for the first, and one more for each resume or
        takeover of the run and for each relaunch of a round whose pod was lost (the count of its
        ``resumed`` and ``relaunched`` events, so replicas agree on it). A round re-driven after a
        cancel, a lost lease, a dead holder or a lost pod is a new launch with a new attempt;
        (run_id, round, attempt) identifies the launch (``launch_key``), and launching it twice is one
        launch (ADR-0012, ADR-0019).
    turns: the most turns this round may decide; a search round stops earlier on a budget or a stop rule,
        a refinement round at the first turn that holds the score.
    first_turn: the number the round's first turn gets (turns are counted over the whole run).
    heads: component name -> commit sha the round starts from (the champion, or an adopted head).
    steer: extra text for the agent (reviewers' feedback, quoted); empty in a search round.
    feedback_ids: the stored feedback items this round addresses (empty in a search round).
    hold: the refinement rule; None for a search round (the spec's keep rule applies).
    """

    run_id: str
    round: int
    turns: int
    first_turn: int
    heads: Mapping[str, str]
    steer: str = ""
    feedback_ids: tuple[int, ...] = ()
    hold: HoldRule | None = None
    attempt: int = 0
    schema: int = field(default=JOB_SCHEMA)

    def __post_init__(self) -> None:
        if self.round < 0:
            raise SpecError("round", f"must be >= 0, got {self.round}")
        if self.turns < 0:
            raise SpecError("turns", f"must be >= 0, got {self.turns}")
        if self.first_turn < 1:
            raise SpecError("first_turn", f"must be >= 1, got {self.first_turn}")
        if self.attempt < 0:
            raise SpecError("attempt", f"must be >= 0, got {self.attempt}")
        if self.round == 0 and self.hold is not None:
            raise SpecError("hold", "round 0 searches; only refinement rounds hold the score")
        # Frozen all the way down: a job handed to a broker must not change under it.
        object.__setattr__(self, "heads", MappingProxyType(dict(self.heads)))
        object.__setattr__(self, "feedback_ids", tuple(self.feedback_ids))

    @property
    def key(self) -> tuple[str, int]:
        """The round: what a broker's status, wait and cancel name (its latest launch)."""
        return (self.run_id, self.round)

    @property
    def launch_key(self) -> tuple[str, int, int]:
        """One launch of the round: what ``Broker.launch`` is idempotent per."""
        return (self.run_id, self.round, self.attempt)

    @property
    def kind(self) -> RoundKind:
        return RoundKind.SEARCH if self.round == 0 else RoundKind.REFINEMENT

    def to_json(self) -> RoundJobJson:
        """Plain JSON types only; ``from_json(to_json())`` is the same job."""
        hold: HoldJson | None = None
        if self.hold is not None:
            hold = {
                "tolerance": self.hold.tolerance,
                "relative": self.hold.relative,
                "first_published": self.hold.first_published,
            }
        return {
            "schema": self.schema,
            "run_id": self.run_id,
            "round": self.round,
            "attempt": self.attempt,
            "kind": str(self.kind),
            "turns": self.turns,
            "first_turn": self.first_turn,
            "heads": dict(self.heads),
            "steer": self.steer,
            "feedback_ids": list(self.feedback_ids),
            "hold": hold,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoundJob:
        """The job ``to_json`` wrote; SpecError naming the field for anything else."""
        schema = _field(data, "schema", int)
        if schema != JOB_SCHEMA:
            raise SpecError("schema", f"this crucible reads round jobs of schema {JOB_SCHEMA}, got {schema}")
        heads = _field(data, "heads", dict)
        for name, sha in heads.items():
            if not isinstance(name, str) or not isinstance(sha, str):
                raise SpecError(f"heads.{name}", "component heads map names to commit shas (strings)")
        raw_hold = data.get("hold")
        hold = None
        if raw_hold is not None:
            if not isinstance(raw_hold, Mapping):
                raise SpecError("hold", "must be an object or null")
            hold = HoldRule(
                tolerance=float(_field(raw_hold, "tolerance", (int, float), "hold.")),
                relative=_field(raw_hold, "relative", bool, "hold."),
                first_published=float(_field(raw_hold, "first_published", (int, float), "hold.")),
            )
        ids = _field(data, "feedback_ids", list)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise SpecError("feedback_ids", "must be a list of integers")
        job = cls(
            run_id=_field(data, "run_id", str),
            round=_field(data, "round", int),
            # Optional: jobs written before attempts existed are first attempts.
            attempt=_field(data, "attempt", int) if "attempt" in data else 0,
            turns=_field(data, "turns", int),
            first_turn=_field(data, "first_turn", int),
            heads=heads,
            steer=_field(data, "steer", str),
            feedback_ids=tuple(ids),
            hold=hold,
        )
        kind = data.get("kind")
        if kind is not None and kind != job.kind:
            raise SpecError("kind", f"round {job.round} is a {job.kind} round, not {kind!r}")
        return job


def _field(data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], prefix: str = "") -> Any:
    if name not in data:
        raise SpecError(prefix + name, "is required")
    value = data[name]
    # bool is an int in Python; a job never means True by 1.
    if isinstance(value, bool) and kind is not bool:
        raise SpecError(prefix + name, f"must be {_names(kind)}, got a boolean")
    if not isinstance(value, kind):
        raise SpecError(prefix + name, f"must be {_names(kind)}, got {type(value).__name__}")
    return value


def _names(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


class RoundState(StrEnum):
    """Where a launched round is, as its broker reports it. Only the last three are final."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ROUND_TRANSITIONS: dict[RoundState, frozenset[RoundState]] = {
    RoundState.PENDING: frozenset({RoundState.RUNNING, RoundState.FAILED, RoundState.CANCELLED}),
    RoundState.RUNNING: frozenset({RoundState.SUCCEEDED, RoundState.FAILED, RoundState.CANCELLED}),
    RoundState.SUCCEEDED: frozenset(),
    RoundState.FAILED: frozenset(),
    RoundState.CANCELLED: frozenset(),
}

FINISHED_ROUND_STATES: frozenset[RoundState] = frozenset(
    {RoundState.SUCCEEDED, RoundState.FAILED, RoundState.CANCELLED}
)


def check_round_transition(current: RoundState, new: RoundState) -> None:
    """Raise ConflictError unless ``current -> new`` is in ROUND_TRANSITIONS."""
    if new not in ROUND_TRANSITIONS[current]:
        raise ConflictError(f"a round cannot move from {current} to {new}")

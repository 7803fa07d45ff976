"""The vocabulary of outcomes and states, as data (CONTRIBUTING.md, rule 4).

Every state enum has exactly one transition table and one function that enforces it, so a
redelivered event or a resumed controller can never move a finished run backwards.
"""

from __future__ import annotations

from enum import StrEnum

from controller.domain.errors import ConflictError


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset({RunStatus.RUNNING, RunStatus.FAILED, RunStatus.CANCELLED}),
    # RUNNING -> RUNNING is a resume after a crash.
    RunStatus.RUNNING: frozenset(
        {RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED}
    ),
    RunStatus.COMPLETED: frozenset(),
    RunStatus.FAILED: frozenset(),
    # A cancelled run may be resumed by the user on purpose.
    RunStatus.CANCELLED: frozenset({RunStatus.RUNNING}),
}


# States a run does not leave on its own (CANCELLED may still be resumed on purpose).
FINISHED_STATUSES: frozenset[RunStatus] = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED}
)


def check_run_transition(current: RunStatus, new: RunStatus) -> None:
    """Raise ConflictError unless ``current -> new`` is in RUN_TRANSITIONS."""
    if new not in RUN_TRANSITIONS[current]:
        raise ConflictError(f"run cannot move from {current} to {new}")


class RunPhase(StrEnum):
    """Where a run is in its life (the status says whether a process is driving it).

    SEARCH is round 0; WATCHING waits for review feedback; ROUND runs refinement round ``runs.round``;
    FINISHED is final. A cancelled run keeps its phase, so a resume on purpose continues there.
    """

    SEARCH = "search"
    WATCHING = "watching"
    ROUND = "round"
    FINISHED = "finished"


PHASE_TRANSITIONS: dict[RunPhase, frozenset[RunPhase]] = {
    RunPhase.SEARCH: frozenset({RunPhase.WATCHING, RunPhase.FINISHED}),
    RunPhase.WATCHING: frozenset({RunPhase.ROUND, RunPhase.FINISHED}),
    RunPhase.ROUND: frozenset({RunPhase.WATCHING, RunPhase.FINISHED}),
    RunPhase.FINISHED: frozenset(),
}


def check_phase_transition(current: RunPhase, new: RunPhase) -> None:
    """Raise ConflictError unless ``current -> new`` is in PHASE_TRANSITIONS."""
    if new not in PHASE_TRANSITIONS[current]:
        raise ConflictError(f"run phase cannot move from {current} to {new}")


class TurnPhase(StrEnum):
    """Where a turn is; only DECIDED is final. Recovery re-runs anything not DECIDED."""

    STARTED = "started"
    DECIDED = "decided"


TURN_TRANSITIONS: dict[TurnPhase, frozenset[TurnPhase]] = {
    TurnPhase.STARTED: frozenset({TurnPhase.DECIDED}),
    TurnPhase.DECIDED: frozenset(),
}


def check_turn_transition(current: TurnPhase, new: TurnPhase) -> None:
    """Raise ConflictError unless ``current -> new`` is in TURN_TRANSITIONS."""
    if new not in TURN_TRANSITIONS[current]:
        raise ConflictError(f"turn cannot move from {current} to {new}")


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    FAILED = "failed"
    NO_CHANGE = "no_change"


class Reason(StrEnum):
    IMPROVED = "improved"
    NOT_IMPROVED = "not_improved"
    NOT_SIGNIFICANT = "not_significant"
    GUARD_REGRESSED = "guard_regressed"
    VALIDATION_FAILED = "validation_failed"
    POLICY_VIOLATION = "policy_violation"
    EVALUATOR_MUTATED = "evaluator_mutated"
    METRIC_INVALID = "metric_invalid"
    AGENT_FAILED = "agent_failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    NO_DIFF = "no_diff"
    # Parallel hypotheses: it passed the keep rule, but another hypothesis of the same turn improved more.
    SUPERSEDED = "superseded"
    # A remote round's pod was lost mid-turn (evicted, OOM-killed, deleted, its node gone); the detail
    # names the broker's reason. The round's remaining turns are relaunched (ADR-0019).
    LOST = "lost"
    # A remote round's claimed keep that the controller's confirmation did not reproduce (ADR-0043);
    # the detail says what the confirmation measured.
    UNCONFIRMED = "unconfirmed"


OUTCOME_OF_REASON: dict[Reason, Outcome] = {
    Reason.IMPROVED: Outcome.ACCEPTED,
    Reason.NOT_IMPROVED: Outcome.REJECTED,
    Reason.NOT_SIGNIFICANT: Outcome.REJECTED,
    Reason.GUARD_REGRESSED: Outcome.REJECTED,
    Reason.VALIDATION_FAILED: Outcome.REJECTED,
    Reason.POLICY_VIOLATION: Outcome.REJECTED,
    Reason.EVALUATOR_MUTATED: Outcome.REJECTED,
    Reason.METRIC_INVALID: Outcome.FAILED,
    Reason.AGENT_FAILED: Outcome.FAILED,
    Reason.TIMEOUT: Outcome.FAILED,
    Reason.CANCELLED: Outcome.FAILED,
    Reason.NO_DIFF: Outcome.NO_CHANGE,
    Reason.SUPERSEDED: Outcome.REJECTED,
    Reason.LOST: Outcome.FAILED,
    Reason.UNCONFIRMED: Outcome.REJECTED,
}

# Turns that produced no valid measurement; they count towards max_consecutive_failures.
FAILURE_REASONS: frozenset[Reason] = frozenset(
    {
        Reason.METRIC_INVALID,
        Reason.AGENT_FAILED,
        Reason.TIMEOUT,
        Reason.CANCELLED,
        Reason.LOST,
        Reason.VALIDATION_FAILED,
        Reason.POLICY_VIOLATION,
        Reason.EVALUATOR_MUTATED,
        Reason.UNCONFIRMED,
    }
)


class StopReason(StrEnum):
    MAX_TURNS = "max_turns"
    WALL_CLOCK = "wall_clock"
    COST = "cost"
    TOKENS = "tokens"
    DISK = "disk"
    EXHAUSTED = "exhausted"
    TARGET_REACHED = "target_reached"
    FEEDBACK_CLOSED = "feedback_closed"
    MAX_ROUNDS = "max_rounds"
    CONSECUTIVE_FAILURES = "consecutive_failures"
    BASELINE_FAILED = "baseline_failed"
    CANCELLED = "cancelled"
    ERROR = "error"


# Stops after which the run is "completed" (exit 0); the others are failures (exit 1),
# except CANCELLED (exit 130).
NORMAL_STOPS: frozenset[StopReason] = frozenset(
    {
        StopReason.MAX_TURNS,
        StopReason.WALL_CLOCK,
        StopReason.COST,
        StopReason.TOKENS,
        StopReason.DISK,
        StopReason.EXHAUSTED,
        StopReason.TARGET_REACHED,
        StopReason.FEEDBACK_CLOSED,
        StopReason.MAX_ROUNDS,
    }
)


def status_for_stop(reason: StopReason) -> RunStatus:
    """The final run status a stop reason implies."""
    if reason in NORMAL_STOPS:
        return RunStatus.COMPLETED
    if reason is StopReason.CANCELLED:
        return RunStatus.CANCELLED
    return RunStatus.FAILED


class Direction(StrEnum):
    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"


class EventKind(StrEnum):
    BASELINE = "baseline"
    TURN_STARTED = "turn_started"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    FAILED = "failed"
    NO_CHANGE = "no_change"
    PUBLISHED = "published"
    BASE_FOLLOWED = "base_followed"
    BUILT_ON_ADOPTED = "built_on_adopted"
    FEEDBACK_RECEIVED = "feedback_received"
    ROUND_STARTED = "round_started"
    ROUND_FINISHED = "round_finished"
    PR_CLOSED = "pr_closed"
    REPLY_DRAFTED = "reply_drafted"
    RESUMED = "resumed"
    # The run service launched a round again as a new attempt after its pod was lost (ADR-0019).
    RELAUNCHED = "relaunched"
    COMPLETED = "completed"
    # Progress of the running turn (live views): its step, and each measured sample as it arrives.
    TURN_STEP = "turn_step"
    SAMPLE = "sample"


class TurnStep(StrEnum):
    """Where a running turn is (the ``turn_step`` event): the steps of a turn, in order (docs/agent.md)."""

    PROPOSING = "proposing"
    VALIDATING = "validating"
    MEASURING = "measuring"
    DECIDING = "deciding"


class SequentialStop(StrEnum):
    """Why a sequential measurement stopped where it did (``metric.sequential``)."""

    KEPT_EARLY = "kept early"
    REJECTED_EARLY = "rejected early"
    FUTILITY = "futility"
    MAX_SAMPLES = "max samples"


class SampleArm(StrEnum):
    """Which side of an interleaved measurement a sample belongs to."""

    CHAMPION = "champion"
    CANDIDATE = "candidate"
    BASE = "base"
    BASELINE = "baseline"

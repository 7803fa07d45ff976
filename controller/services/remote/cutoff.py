"""A remote round whose pod died: the turn it cut off, and whether the round is launched again.

A worker decides its turns through the ledger API; when its pod is evicted, OOM-killed, deleted or
runs past its deadline, the turn it had started stays STARTED and no one will decide it. The broker
says why the round failed (``FailureReason``: ``evicted: ...``); this records that on the turn, so the
run's history says what happened and the next attempt of the round goes on from the next turn. A
round past its deadline is ``timeout``; every other loss is ``lost`` (migration 0016), ``detail``
carrying the named reason and its evidence.

Which losses are worth a new attempt (ADR-0019): the ones the cluster caused and a new pod may not
meet again (``RELAUNCHABLE``). A deadline is the operator's bound on a round, a deleted Job someone's
deliberate act, an image that cannot start or a worker that exits non-zero will do the same again;
those fail the run, naming why.
"""

from __future__ import annotations

from controller.domain.enums import EventKind, Outcome, Reason, TurnPhase
from controller.domain.errors import ConflictError
from controller.store.ports import TurnRecords
from controller.store.records import TurnDecision, TurnRecord

# FailureReason values (brokers.kubernetes) that mean the pod, not the worker's own logic, ended the turn.
LOST = ("evicted", "oom_killed", "deadline_exceeded", "pod_lost", "job_deleted", "start_failed", "no_outcome")
# ... and those after which the round's remaining turns are launched again as a new attempt.
RELAUNCHABLE = ("evicted", "oom_killed", "pod_lost", "no_outcome")


def failure_reason(error: str | None) -> str:
    """The first word of a FAILED round's error (the broker's named reason), or ""."""
    return (error or "").split(":", 1)[0].strip()


def cut_off_reason(error: str | None) -> str | None:
    """The named reason of a round that failed because its pod was lost; None for any other failure."""
    head = failure_reason(error)
    return head if head in LOST else None


def relaunchable(error: str | None) -> bool:
    """Whether a round that failed with ``error`` may be launched again as a new attempt."""
    return failure_reason(error) in RELAUNCHABLE


def fail_cut_off_turn(store: TurnRecords, run_id: str, round: int, error: str) -> TurnRecord | None:
    """Decide the round's STARTED turn (if any) ``failed`` naming ``error``; the decided turn, or None
    when no turn was in progress (or another process decided it first)."""
    named = cut_off_reason(error)
    if named is None:
        return None
    open_turns = [
        t for t in store.list_turns(run_id, last=5) if t.phase is TurnPhase.STARTED and t.round == round
    ]
    if not open_turns:
        return None
    turn = open_turns[-1]
    reason = Reason.TIMEOUT if named == "deadline_exceeded" else Reason.LOST
    decision = TurnDecision(Outcome.FAILED, reason, detail=error)
    payload = {
        "turn": turn.number,
        "round": round,
        "outcome": str(Outcome.FAILED),
        "reason": str(reason),
        "detail": error,
        "lost": named,
    }
    try:
        return store.decide_turn(
            run_id,
            turn.number,
            decision,
            champion=None,
            component_heads={},
            event=(EventKind.FAILED, payload),
        )
    except ConflictError:  # decided meanwhile (the worker's last report arrived after all)
        return None

"""What the controller records when it refuses something a worker sent (issue 21).

Two kinds of refusal, recorded differently on purpose:

- **A bundle** (``refuse_bundle``): commits the controller will not take. The turn it was for is
  decided ``policy_violation`` (or, for a hypothesis pod, that hypothesis is reported so), and the
  attempt's token is revoked: nothing more from that attempt counts.
- **A report** (``refuse_report``): a decision, hypothesis report or baseline whose figures its
  samples do not give (``recount``). Only a ``rejected`` event with reason ``policy_violation``
  naming the mismatch is written; the turn stays undecided and the token stays good. Whoever sent
  it (a hostile agent holding the worker's token, say) cannot end the round by sending it, so the
  worker's own report is still taken when it comes, and the run ends as an honest run does.

Both return the ``PolicyViolation`` to raise (403).
"""

from __future__ import annotations

import contextlib
from typing import Any

from controller.domain.enums import EventKind, Outcome, Reason, TurnPhase
from controller.domain.errors import ConflictError, ForbiddenError, NotFoundError
from controller.store.ports import RemoteRoundStore
from controller.store.records import HypothesisReport, TurnDecision, WorkerRoundRecord
from controller.store.worker_rounds import hypothesis_scope


class PolicyViolation(ForbiddenError):
    """Something a worker sent that the controller refused (recorded as ``policy_violation``)."""


def _payload(grant: WorkerRoundRecord, turn: int | None, detail: str) -> dict[str, Any]:
    return {
        "round": grant.round,
        "turn": turn,
        "outcome": str(Outcome.REJECTED),
        "reason": str(Reason.POLICY_VIOLATION),
        "detail": detail,
    }


def refuse_report(
    store: RemoteRoundStore, grant: WorkerRoundRecord, turn: int | None, detail: str
) -> PolicyViolation:
    """Record a refused report (module docstring); the error to raise."""
    text = f"report refused: {detail}"
    store.append_event(grant.run_id, EventKind.REJECTED, _payload(grant, turn, text))
    return PolicyViolation(f"policy_violation: {text}")


def refuse_bundle(
    store: RemoteRoundStore, grant: WorkerRoundRecord, turn: int | None, detail: str
) -> PolicyViolation:
    """Record a refused bundle as ``policy_violation`` and revoke the attempt; the error to raise."""
    run_id = grant.run_id
    scope = hypothesis_scope(grant.job)
    if scope is not None:
        return _refuse_hypothesis(store, grant, scope, detail)
    payload = _payload(grant, turn, f"bundle refused: {detail}")
    decided = False
    if turn is not None:
        try:
            current = store.get_turn(run_id, turn)
        except NotFoundError:
            current = None
        if current is not None and current.phase is TurnPhase.STARTED:
            decision = TurnDecision(Outcome.REJECTED, Reason.POLICY_VIOLATION, detail=payload["detail"])
            try:
                store.decide_turn(
                    run_id,
                    turn,
                    decision,
                    champion=None,
                    component_heads={},
                    event=(EventKind.REJECTED, payload),
                )
                decided = True
            except ConflictError:
                pass
    if not decided:
        store.append_event(run_id, EventKind.REJECTED, payload)
    store.revoke_worker_rounds(run_id, grant.round)
    return PolicyViolation(f"policy_violation: bundle refused: {detail}")


def _refuse_hypothesis(
    store: RemoteRoundStore, grant: WorkerRoundRecord, scope: tuple[int, int], detail: str
) -> PolicyViolation:
    """A hypothesis pod's refused bundle: that hypothesis is reported ``policy_violation`` (the
    controller decides the turn with the others) and only its token is revoked."""
    turn, index = scope
    text = f"bundle refused: {detail}"
    refused = HypothesisReport(index=index, reason=Reason.POLICY_VIOLATION, detail=text)
    # Reported already, or the turn is over: nothing from this bundle counts either way.
    with contextlib.suppress(ConflictError, NotFoundError):
        store.report_hypothesis(grant.run_id, turn, refused)
    store.finish_worker_round(grant.token_hash, {"refused": text})
    return PolicyViolation(f"policy_violation: {text}")

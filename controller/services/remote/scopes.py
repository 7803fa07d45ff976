"""What each kind of worker token may do besides reading its run (ADR-0014, ADR-0018, ADR-0043).

A round's worker starts and decides its turns; a hypothesis pod's token (``hypothesis_scope``) only
sends the bundle and the report of its own hypothesis; a confirmation's token (``confirm_scope``)
only fetches the champion and the claimed commits and reports its samples. Each check answers
ForbiddenError (403) before anything is stored.
"""

from __future__ import annotations

from controller.domain.errors import ForbiddenError
from controller.store.records import WorkerRoundRecord
from controller.store.worker_rounds import confirm_scope, hypothesis_scope

SCOPES = ("hypothesis", "confirm")  # what a grant's job may hold besides the round's job


def not_confirming(grant: WorkerRoundRecord) -> None:
    """ForbiddenError for a confirmation's token: it fetches its commits and reports its samples."""
    if confirm_scope(grant.job) is not None:
        raise ForbiddenError("a confirmation's token only fetches its commits and reports its samples")


def require_round(grant: WorkerRoundRecord) -> None:
    """ForbiddenError for a token other than a round's worker's on a route only it may use (starting
    or deciding turns, the baseline, progress events): the controller decides the turns of a round
    whose hypotheses run in pods (ADR-0018), and a confirmation decides nothing."""
    not_confirming(grant)
    scope = hypothesis_scope(grant.job)
    if scope is not None:
        raise ForbiddenError(
            f"this token is for hypothesis {scope[1]} of turn {scope[0]}: it may only report that one"
        )


def require_scope(grant: WorkerRoundRecord, turn: int | None, index: int | None = None) -> None:
    """ForbiddenError for a hypothesis pod's token about another turn or index than its own, and for
    a confirmation's token (a bundle upload, a hypothesis report)."""
    not_confirming(grant)
    scope = hypothesis_scope(grant.job)
    if scope is None:
        return
    if turn != scope[0] or (index is not None and index != scope[1]):
        raise ForbiddenError(
            f"this token is for hypothesis {scope[1]} of turn {scope[0]}, "
            f"not {'?' if index is None else index} of turn {turn}"
        )

"""Starting a refinement round by hand (``POST /api/runs/{id}/rounds``, the dashboard's round form).

An operator's steer is stored as a feedback item of its own source (``steer``) on the PR it is about,
and the run's watch starts the round for it through the path review feedback takes: it judges the
item (a steer is trusted: only a holder of the API's write token can store one), batches it (a steer
is a batch at once, like a submitted review), and launches the round through the broker, seeded with
the steer as quoted data in CANDIDATE.md. Storing rather than calling into the driver is what makes
it work from any replica: the request may reach one that does not drive the run (ADR-0012).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from controller.config.options import RunOptions
from controller.domain.enums import RunPhase, RunStatus
from controller.domain.errors import ConflictError, RefusedError, SpecError
from controller.forge.base import FeedbackEvent
from controller.services.views import schemas
from controller.store.ports import Steering
from controller.store.records import FeedbackSource, PullRecord

OPERATOR = "operator"  # the author a steer is quoted as (the API knows a token, not a person)
STEERABLE = (RunPhase.WATCHING, RunPhase.ROUND)  # a round running now: the steer's round follows it


def queue_steer(
    store: Steering, run_id: str, text: str, component: str | None = None
) -> schemas.RoundRequest:
    """Store ``text`` as a steer for the run's next refinement round; what was queued.

    RefusedError unless the run is watching feedback (running, with ``watch_feedback``, its search
    done) and the PR is open; SpecError naming ``component`` when the run has several PRs and none
    was named, or the one named has none; NotFoundError for an unknown run."""
    if not text.strip():
        raise SpecError("steer", "say what the round should address")
    run = store.get_run(run_id)
    if not RunOptions.stored(run.options).watch_feedback:
        raise RefusedError(f"run {run_id} does not watch feedback: it was started without watch_feedback")
    if run.status is not RunStatus.RUNNING or run.phase not in STEERABLE:
        state = f"{run.status}" if run.status is not RunStatus.RUNNING else f"in phase {run.phase}"
        raise RefusedError(f"run {run_id} is {state}: a round can be started once it watches feedback")
    pull = _pull(store.list_pulls(run_id), component)
    if pull.state == "closed":
        raise RefusedError(f"the pull request of {pull.component} ({pull.url}) is closed")
    now = datetime.now(UTC)
    event = FeedbackEvent(
        repo=pull.repo,
        pr_number=pull.number,
        source=FeedbackSource.STEER.value,
        external_id=time.time_ns() // 1000,  # unique per run in practice; the store refuses a duplicate
        review_id=None,
        author=OPERATOR,
        author_type="Operator",
        association="NONE",
        body=text,
        path=None,
        line=None,
        action="created",
        updated_at=now.isoformat(),
    )
    record = store.add_feedback(run_id, pull.component, event)
    if record is None:
        raise ConflictError("an identical steer was stored at the same instant; send it again")
    return schemas.RoundRequest(
        run_id=run_id,
        component=pull.component,
        pr_number=pull.number,
        feedback=record.id,
        after_round=run.round,
        message=f"round queued: steer {record.id} on {pull.component}'s PR #{pull.number} starts the "
        f"run's next refinement round after round {run.round}",
    )


def _pull(pulls: list[PullRecord], component: str | None) -> PullRecord:
    if component is not None:
        for pull in pulls:
            if pull.component == component:
                return pull
        names = ", ".join(p.component for p in pulls) or "none"
        raise SpecError("component", f"no pull request of {component!r} (the run's PRs: {names})")
    if len(pulls) == 1:
        return pulls[0]
    if not pulls:
        raise RefusedError("the run has no pull request to refine")
    names = ", ".join(p.component for p in pulls)
    raise SpecError("component", f"the run has pull requests on {names}: name the one to refine")

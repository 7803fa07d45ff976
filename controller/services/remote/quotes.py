"""What a refinement round's worker quotes (ADR-0019): the feedback its job addresses, nothing else."""

from __future__ import annotations

from controller.domain.jobs import RoundJob
from controller.store.ports import RemoteRoundStore
from controller.store.records import WorkerRoundRecord
from controller.store.worker_protocol import QuotedFeedback, RoundFeedback


def round_feedback(store: RemoteRoundStore, grant: WorkerRoundRecord) -> RoundFeedback:
    """The feedback a refinement round addresses (its job's ``feedback_ids``, nothing else of the
    run), as much of each item as the quotes in CANDIDATE.md need, and the PR's component."""
    job = RoundJob.from_json(grant.job)
    wanted = set(job.feedback_ids)
    items = [i for i in store.list_feedback(grant.run_id) if i.id in wanted]
    components = sorted({i.component for i in items})
    return RoundFeedback(
        component=components[0] if len(components) == 1 else None,
        items=[
            QuotedFeedback(
                author=i.author,
                body=i.body,
                path=i.path,
                line=i.line,
                source=i.source,
                diff_hunk=i.diff_hunk,
            )
            for i in sorted(items, key=lambda i: i.id)
        ],
    )

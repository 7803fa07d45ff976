"""Read models: a run as the ``--json`` object (docs/cli.md), its turns as TSV, its events as JSONL.

Everything is computed from the store, and each view is a typed model from ``schemas.py`` (the same
models the REST API declares), so ``crucible runs show`` and ``GET /api/runs/{id}`` tell the same story
whether the run is live, finished or crashed. Paged reads (``turns_page``, ``runs_list``) filter and
limit in SQL; the full run view reads the whole run on purpose (it is the run's record).

Diffs come from the run's candidate clone under ``CRUCIBLE_HOME``: the controller's own copy of the
run's commits, written only by the controller (ADR-0005 decision 3), never a checkout in a pod.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Protocol

from controller.config.settings import Settings
from controller.domain import events
from controller.domain.enums import Direction, EventKind, Outcome, RunStatus, SampleArm, TurnPhase
from controller.domain.errors import CrucibleError
from controller.services.views import schemas
from controller.services.views.layout import RunLayout
from controller.store.ports import FeedbackRecords, PullRecords, RunPages, RunReads, RunViews, TurnPages
from controller.store.records import (
    ComponentRecord,
    EventRecord,
    HypothesisRecord,
    TurnRecord,
)
from controller.store.summary import RunSummaryRecord
from controller.workspace.checkout import Checkout


class FeedbackView(RunReads, FeedbackRecords, Protocol):
    """What the feedback page reads: the run's feedback items and the events of its rounds."""


def component_diff(settings: Settings, run_id: str, comp: ComponentRecord) -> str:
    """The champion's pristine-relative diff (base sha .. champion head) of one component."""
    if comp.head_sha == comp.base_sha:
        return ""
    layout = RunLayout(settings.run_dir(run_id), (comp.name,))
    path = layout.arm_dir("candidate") / comp.name
    try:
        return Checkout.open(path).diff(comp.base_sha, comp.head_sha)
    except CrucibleError as exc:
        return f"# diff unavailable: {exc}\n"


def _commit(commits: dict[str, str]) -> str | dict[str, str] | None:
    if not commits:
        return None
    return next(iter(commits.values())) if len(commits) == 1 else commits


def hypothesis_view(record: HypothesisRecord, metric: str) -> schemas.Hypothesis:
    """One parallel hypothesis of a turn, with its own samples."""

    def values(arm: SampleArm) -> list[float]:
        return [v[metric] for a, _i, v, ok in record.samples if a == arm and ok and metric in v]

    return schemas.Hypothesis(
        index=record.index,
        outcome=record.outcome,
        reason=record.reason,
        value=record.value,
        samples=values(SampleArm.CANDIDATE),
        reference_samples=values(SampleArm.CHAMPION),
        p_value=record.p_value,
        changed_paths=list(record.changed_paths),
        hypothesis=record.hypothesis,
        commit=_commit(dict(record.commits)),
        cost_usd=record.cost_usd,
        duration_s=round(record.duration_s, 3),
        detail=record.detail,
    )


def turn_view(
    record: TurnRecord,
    samples: list[float],
    reference: list[float],
    hypotheses: list[schemas.Hypothesis] | None = None,
) -> schemas.Turn:
    """A decided turn as it appears in ``--json``, in the API and on the live table."""
    commit = _commit(dict(record.commits))
    return schemas.Turn(
        turn=record.number,
        round=record.round,
        outcome=record.outcome,
        reason=record.reason,
        value=record.value,
        samples=samples,
        reference_samples=reference,
        p_value=record.p_value,
        changed_paths=list(record.changed_paths),
        hypothesis=record.hypothesis,
        commit=commit,
        cost_usd=record.cost_usd,
        duration_s=round(record.duration_s, 3),
        detail=record.detail,
        pairs=record.pairs,
        sequential_stop=record.sequential_stop,
        hypotheses=hypotheses or [],
    )


def _turn_views(
    records: Iterable[TurnRecord],
    samples: Mapping[tuple[int, SampleArm], list[float]],
    hypotheses: Iterable[HypothesisRecord] = (),
    metric: str = "",
) -> list[schemas.Turn]:
    by_turn: dict[int, list[schemas.Hypothesis]] = {}
    for h in hypotheses:
        by_turn.setdefault(h.turn, []).append(hypothesis_view(h, metric))
    out = []
    for t in records:
        if t.phase != TurnPhase.DECIDED:
            continue
        cand = samples.get((t.number, SampleArm.CANDIDATE), [])
        ref = samples.get((t.number, SampleArm.CHAMPION), [])
        out.append(turn_view(t, cand, ref, by_turn.get(t.number)))
    return out


def components_view(
    settings: Settings, store: RunReads, run_id: str, *, with_diffs: bool = True
) -> list[schemas.Component]:
    out = []
    for comp in store.list_components(run_id):
        diff = component_diff(settings, run_id, comp) if with_diffs else None
        out.append(
            schemas.Component(name=comp.name, base_sha=comp.base_sha, head_sha=comp.head_sha, diff=diff)
        )
    return out


def pulls_view(store: PullRecords, run_id: str) -> list[schemas.PullRequest]:
    return [
        schemas.PullRequest(
            component=p.component,
            url=p.url,
            number=p.number,
            branch=p.branch,
            draft=p.draft,
            head_sha=p.pushed_sha,
            state=p.state,
            paused=p.paused,
            published_value=p.published_value,
            note=p.note,
            problems=list(p.process.problems),
        )
        for p in store.list_pulls(run_id)
    ]


def run_view(
    settings: Settings,
    store: RunViews,
    run_id: str,
    *,
    with_diffs: bool = True,
    hypotheses_of: Collection[int] | None = None,
) -> schemas.Run:
    """The run's record. ``hypotheses_of`` None: every parallel turn carries its hypotheses with their
    samples (the API's and ``--json``'s view); else only the turns named do, which is what the run page
    unfolds (the rest it shows from ``hypothesis_outcomes``, not worth their samples' read)."""
    run = store.get_run(run_id)
    samples = store.metric_samples(run_id, run.metric_name)
    best = None
    if run.champion_value is not None and run.champion_turn:
        best = schemas.Best(value=run.champion_value, turn=run.champion_turn)
    fb = feedback_view(store, run_id)
    hypotheses = (
        store.list_hypotheses(run_id)
        if hypotheses_of is None
        else store.hypotheses_of_turns(run_id, hypotheses_of)
    )
    return schemas.Run(
        run_id=run.id,
        status=run.status,
        stop_reason=run.stop_reason,
        message=run.stop_message,
        objective=run.objective,
        metric=schemas.Metric(name=run.metric_name, direction=Direction(run.direction)),
        baseline=schemas.Baseline(value=run.baseline_value, samples=samples.get((0, SampleArm.BASELINE), [])),
        best=best,
        cost_usd=run.cost_usd,
        tokens=run.tokens,
        turns=_turn_views(store.list_turns(run_id), samples, hypotheses, run.metric_name),
        components=components_view(settings, store, run_id, with_diffs=with_diffs),
        pull_requests=pulls_view(store, run_id),
        created_at=run.created_at,
        finished_at=run.finished_at,
        feedback=fb.feedback,
        rounds=fb.rounds,
        replies=fb.replies,
    )


def turns_page(
    store: TurnPages,
    run_id: str,
    *,
    after: int = 0,
    limit: int = 100,
    round: int | None = None,
    outcome: Outcome | None = None,
) -> list[schemas.Turn]:
    """Decided turns after turn ``after``, at most ``limit``, with only their own samples read."""
    page = store.turn_page(run_id, after=after, limit=limit, round=round, outcome=outcome)
    return _turn_views(page.turns, page.samples, page.hypotheses, page.metric_name)


def event_view(e: EventRecord) -> schemas.Event:
    return schemas.event_view(e.id, e.run_id, str(e.kind), e.created_at, dict(e.payload))


def events_jsonl(store: RunReads, run_id: str, after_id: int = 0) -> str:
    rows = [event_view(e).model_dump_json() for e in store.list_events(run_id, after_id=after_id)]
    return "".join(r + "\n" for r in rows)


def runs_list(
    store: RunPages, limit: int = 50, offset: int = 0, status: RunStatus | None = None
) -> list[schemas.RunSummary]:
    return [run_summary(r) for r in store.run_summaries(limit=limit, offset=offset, status=status)]


def run_summary(record: RunSummaryRecord) -> schemas.RunSummary:
    """One line of the runs list."""
    return schemas.RunSummary(
        run_id=record.id,
        status=record.status,
        stop_reason=record.stop_reason,
        objective=record.objective,
        baseline=record.baseline_value,
        best=record.champion_value,
        created_at=record.created_at,
    )


def feedback_view(store: FeedbackView, run_id: str) -> schemas.Feedback:
    """Feedback items with their verdicts, rounds and drafted replies (``crucible feedback``)."""
    items = [
        schemas.FeedbackItem(
            id=f.id,
            component=f.component,
            pr_number=f.pr_number,
            source=str(f.source),
            author=f.author,
            association=f.association,
            path=f.path,
            line=f.line,
            action=f.action,
            body=f.body,
            trusted=f.trusted,
            verdict=str(f.verdict) if f.verdict else None,
            reason=f.reason,
            round=f.round,
        )
        for f in store.list_feedback(run_id)
    ]
    kinds = (EventKind.REPLY_DRAFTED, EventKind.ROUND_FINISHED)
    replies: list[schemas.Reply] = []
    rounds: list[schemas.Round] = []
    for e in store.list_events(run_id, kinds=kinds):
        # Through the kind's payload model: a malformed stored event is left out, never a 500.
        if e.kind == EventKind.REPLY_DRAFTED:
            reply = events.read(events.ReplyDraftedPayload, e.payload)
            if reply is not None:
                replies.append(schemas.Reply(feedback=reply.feedback, author=reply.author, reply=reply.reply))
        else:
            done = events.read(events.RoundFinishedPayload, e.payload)
            if done is not None:
                rounds.append(
                    schemas.Round(
                        round=done.round,
                        component=done.component,
                        feedback=done.feedback,
                        kept=done.kept,
                        head=done.head,
                        detail=done.detail,
                    )
                )
    return schemas.Feedback(run_id=run_id, feedback=items, rounds=rounds, replies=replies)

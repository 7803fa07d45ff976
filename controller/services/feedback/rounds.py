"""Refinement rounds: trusted review feedback steers turns whose result lands on the same PR branch.

A submitted review is one batch; lone comments are batched once the PR has been quiet for the quiet
window. A round runs up to ``feedback.turns`` turns with the feedback quoted in CANDIDATE.md; the first
turn that passes policy, validation and guards and holds the score becomes the champion and is pushed
(fast-forward) onto the PR branch. The body records what the round addressed; replies to each comment
are drafted for a human, never posted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from pydantic import JsonValue

from controller.domain import events
from controller.domain.enums import EventKind, Outcome
from controller.domain.jobs import RoundJob
from controller.engine.candidate import FeedbackQuote
from controller.services.execution.context import RoundRule, RunContext
from controller.services.execution.keep import notify_champion
from controller.services.execution.play import Refinement, play_turns
from controller.store.ports import RefinementRecords, RunReads, TurnReads
from controller.store.records import FeedbackRecord, FeedbackSource
from controller.workspace.git import is_ancestor


@dataclass(frozen=True)
class Batch:
    component: str
    items: tuple[FeedbackRecord, ...]


def current_versions(items: Sequence[FeedbackRecord]) -> list[FeedbackRecord]:
    """Pure: the latest version of each piece of feedback that may still steer a round.

    An edit replaces the earlier text until a round consumes it; a deleted comment or a dismissed
    review is dropped; anything a round already consumed (any version) never triggers again; only
    accepted (trusted) versions count.
    """
    latest: dict[tuple[str, int], FeedbackRecord] = {}
    consumed: set[tuple[str, int]] = set()
    for item in items:
        key = (str(item.source), item.external_id)
        if item.round is not None:
            consumed.add(key)
        known = latest.get(key)
        if known is None or (item.updated_at, item.id) > (known.updated_at, known.id):
            latest[key] = item
    return [
        item
        for key, item in latest.items()
        if key not in consumed and item.action not in ("deleted", "dismissed") and item.verdict == "accepted"
    ]


def ready_batches(items: Sequence[FeedbackRecord], now: datetime, quiet_window_s: float) -> list[Batch]:
    """Pure: which accepted, unassigned feedback is ready to steer a round, oldest first.

    Items of one submitted review (its body and its inline comments) form a batch at once, and so
    does an operator's steer; other comments on a component wait until nothing new arrived for
    ``quiet_window_s`` seconds.
    """
    reviews: dict[tuple[str, int], list[FeedbackRecord]] = {}
    lone: dict[str, list[FeedbackRecord]] = {}
    batches: list[Batch] = []
    for item in items:
        if item.source == FeedbackSource.STEER:  # an operator asked for this round: no quiet window
            batches.append(Batch(item.component, (item,)))
            continue
        review = item.external_id if item.source is FeedbackSource.REVIEW else item.review_id
        if review is not None:
            reviews.setdefault((item.component, review), []).append(item)
        else:
            lone.setdefault(item.component, []).append(item)
    batches += [Batch(comp, tuple(group)) for (comp, _), group in reviews.items()]
    for comp, group in lone.items():
        latest = max(item.received_at for item in group)
        if now - latest >= timedelta(seconds=quiet_window_s):
            batches.append(Batch(comp, tuple(group)))
    return sorted(batches, key=lambda b: min(i.received_at for i in b.items))


def next_ready_in(items: Sequence[FeedbackRecord], now: datetime, quiet_window_s: float) -> float | None:
    """Pure: seconds until some of ``items`` that ``ready_batches`` holds back becomes ready (a lone
    comment's quiet window running out), or None when nothing waits for its window."""
    latest: dict[str, datetime] = {}
    for item in items:
        if item.source == FeedbackSource.STEER:
            continue
        review = item.external_id if item.source is FeedbackSource.REVIEW else item.review_id
        if review is None:
            known = latest.get(item.component)
            latest[item.component] = item.received_at if known is None else max(known, item.received_at)
    waits = [(at + timedelta(seconds=quiet_window_s) - now).total_seconds() for at in latest.values()]
    return max(0.0, min(waits)) if waits else None


KINDS = {
    "review": "review",
    "review_comment": "inline comment",
    "issue_comment": "comment",
    "steer": "operator's steer",
}
CONTEXT_LINES = 3


def _context(ctx: RunContext, component: str, path: str | None, line: int | None) -> str | None:
    """The lines around ``path:line`` in the PR head (what the comment points at), numbered."""
    if not path or not line:
        return None
    root = ctx.checkout("champion", component).path.resolve()
    target = (root / path).resolve()
    if root not in target.parents or not target.is_file():
        return None
    lines = target.read_text(errors="replace").splitlines()
    start, end = max(1, line - CONTEXT_LINES), min(len(lines), line + CONTEXT_LINES)
    return "\n".join(f"{n:>4}{'>' if n == line else ' '} {lines[n - 1]}" for n in range(start, end + 1))


class Quotable(Protocol):
    """What a quote needs of a feedback item: a ``FeedbackRecord`` on the controller, a
    ``QuotedItem`` in ``crucible worker`` (which has no store)."""

    @property
    def author(self) -> str: ...
    @property
    def body(self) -> str: ...
    @property
    def path(self) -> str | None: ...
    @property
    def line(self) -> int | None: ...
    @property
    def source(self) -> str: ...
    @property
    def diff_hunk(self) -> str | None: ...


@dataclass(frozen=True)
class QuotedItem:
    """A feedback item as the worker routes send it (``RemoteRounds.feedback``)."""

    author: str
    body: str
    path: str | None
    line: int | None
    source: str
    diff_hunk: str | None


def quotes(ctx: RunContext, batch: Batch) -> tuple[FeedbackQuote, ...]:
    """The batch as quoted data for CANDIDATE.md (``quote_items``)."""
    return quote_items(ctx, batch.component, batch.items)


def quote_items(ctx: RunContext, component: str, items: Sequence[Quotable]) -> tuple[FeedbackQuote, ...]:
    """Feedback items as quoted data for CANDIDATE.md: author, kind, file, line and the code it refers to.

    The code is the forge's diff hunk of an inline comment (what the reviewer saw, ending at the
    commented line; the renderer bounds it); without one (conversation comments, reviews, rows
    stored before the store kept hunks) the numbered lines of the file around ``path:line``.
    """
    return tuple(
        FeedbackQuote(
            author=i.author,
            body=i.body,
            path=i.path,
            line=i.line,
            kind=KINDS.get(str(i.source), "comment"),
            context=None if _has_hunk(i) else _context(ctx, component, i.path, i.line),
            diff_hunk=i.diff_hunk if _has_hunk(i) else None,
        )
        for i in items
        if i.body.strip()
    )


def _has_hunk(item: Quotable) -> bool:
    return bool(item.diff_hunk and item.diff_hunk.strip())


def first_published_score(ctx: RunContext, records: RunReads) -> float | None:
    """The champion's score when the PR was first published (rounds may not slide below it)."""
    for event in records.list_events(ctx.run_id, kinds={EventKind.PUBLISHED}):
        published = events.read(events.PublishedPayload, event.payload)
        if published is not None and published.value is not None:
            return published.value
    run = records.get_run(ctx.run_id)
    return run.champion_value if run.champion_value is not None else run.baseline_value


def draft_reply(item: FeedbackRecord, kept: bool, head: str | None, detail: str, metric: str) -> str:
    """A reply a human may post (crucible never posts as a person)."""
    where = f" on `{item.path}`" if item.path else ""
    if kept and head:
        return (
            f"@{item.author} thanks: your comment{where} steered a refinement round; its result is "
            f"{head[:12]} on this branch ({detail})."
        )
    return (
        f"@{item.author} thanks: a refinement round tried to address your comment{where}, but no variant "
        f"held the {metric} score ({detail}); nothing was pushed."
    )


def start_from_adopted(ctx: RunContext, records: RefinementRecords, component: str) -> None:
    """With ``on_foreign_push = "adopt"``, a head someone else pushed is where the next round starts:
    it becomes the champion of that component (every round turn re-measures it beside the candidate,
    and it is never rewritten: round commits build on top of it). A champion that publishing already
    applied onto it descends from it and stays; one that could not be applied (``needs merge``) is
    set aside, since the round's feedback is about the PR's code."""
    comp = next((c for c in records.list_components(ctx.run_id) if c.name == component), None)
    adopted = comp.extra.get("adopted_head") if comp else None
    if not adopted:
        return
    champion = ctx.champion_heads[component]
    if is_ancestor(ctx.checkout("candidate", component).path, str(adopted), champion):
        return
    heads = {**ctx.champion_heads, component: str(adopted)}
    ctx.ensure_arm("candidate", heads)
    ctx.ensure_arm("champion", heads)
    ctx.champion.move(heads)
    records.set_component_head(ctx.run_id, component, str(adopted))


def run_round(ctx: RunContext, records: RefinementRecords, batch: Batch) -> bool | None:
    """Run one refinement round for ``batch``; True when a turn held the score and was pushed, None
    when a cancel cut it off (the run stays in the round, so a resume continues it).

    The round starts in one transaction (``Store.start_round``: counter, phase, consumed feedback and
    event together), so a crash leaves either no round or a whole one to continue."""
    return _play(ctx, records, begin_round(ctx, records, batch), batch)


def begin_round(ctx: RunContext, records: RefinementRecords, batch: Batch) -> int:
    """The controller's side of starting a refinement round for ``batch``: refresh the PR (a foreign
    push is noticed and adopted here), then start the round in one transaction (``Store.start_round``:
    counter, phase, consumed feedback and event together); the round's number."""
    assert ctx.spec.feedback is not None
    notify_champion(ctx)  # refresh the PR first: this is where a foreign push is noticed (and adopted)
    start_from_adopted(ctx, records, batch.component)
    number = records.get_run(ctx.run_id).round + 1
    ids = [item.id for item in batch.items]
    payload = {"round": number, "component": batch.component, "feedback": ids}
    records.start_round(ctx.run_id, number, ids, payload)
    return number


def resume_round(ctx: RunContext, records: RefinementRecords) -> bool | None:
    """Continue the round a crash or a cancel cut off (the run's phase is ROUND): its decided turns
    stand, a turn cut off mid-way runs again from its start, and only the turns left are played."""
    number = records.get_run(ctx.run_id).round
    return _play(ctx, records, number, round_batch(ctx, records, number))


def round_batch(ctx: RunContext, records: RefinementRecords, number: int) -> Batch:
    """The feedback batch a started round ``number`` addresses, from the record."""
    items = tuple(records.list_feedback(ctx.run_id, round=number))
    started = records.list_events(ctx.run_id, kinds={EventKind.ROUND_STARTED})
    payloads = [events.read(events.RoundStartedPayload, e.payload) for e in started]
    mine = [p.component for p in payloads if p is not None and p.round == number and p.component]
    component = mine[-1] if mine else items[0].component
    return Batch(component, tuple(i for i in items if i.component == component))


def _play(ctx: RunContext, records: RefinementRecords, number: int, batch: Batch) -> bool | None:
    spec = ctx.spec
    assert spec.feedback is not None
    first = first_published_score(ctx, records)
    rule = RoundRule(spec.feedback.hold, first) if first is not None else None
    decided = [t for t in records.list_turns(ctx.run_id) if t.round == number and t.outcome is not None]
    kept = any(t.outcome == Outcome.ACCEPTED for t in decided)
    detail = decided[-1].detail if decided else "no turn ran"
    if not kept:  # a resumed round plays only the turns it has left
        left = spec.feedback.turns - len(decided)
        played = play_turns(ctx, number, Refinement(left), round_rule=rule, feedback=quotes(ctx, batch))
        if played.cut_off:
            return None
        kept, detail = played.kept, played.detail or detail
    end_round(ctx, records, number, batch, kept, detail)
    return kept


def end_round(
    ctx: RunContext, records: RefinementRecords, number: int, batch: Batch, kept: bool, detail: str
) -> None:
    """The controller's side of ending a refinement round: replies drafted for the feedback, the
    round finished in the record, the PR told (its body says what the round addressed)."""
    spec = ctx.spec
    head = ctx.champion_heads.get(batch.component) if kept else None
    written: list[tuple[EventKind, dict[str, JsonValue]]] = []
    for item in batch.items:
        if item.source == FeedbackSource.STEER:
            continue  # replies are for people on the PR; the operator reads the round's outcome
        reply = draft_reply(item, kept, head, detail, spec.metric.name)
        drafted = events.ReplyDraftedPayload(feedback=item.id, author=item.author, reply=reply)
        written.append((EventKind.REPLY_DRAFTED, drafted.dump()))
    finished = events.RoundFinishedPayload(
        round=number,
        component=batch.component,
        feedback=[item.id for item in batch.items],
        kept=kept,
        head=head,
        detail=detail,
    )
    written.append((EventKind.ROUND_FINISHED, finished.dump()))
    records.finish_round(ctx.run_id, number, written)
    notify_champion(ctx)  # the body says what the round addressed, or that it could not hold the score


def round_result(ctx: RunContext, records: TurnReads, number: int) -> tuple[bool, str, int]:
    """Whether round ``number`` kept a turn, the detail of its last decided turn and how many it
    decided, from the record (after a remote round: what its workers decided through the ledger)."""
    decided = [t for t in records.list_turns(ctx.run_id) if t.round == number and t.outcome is not None]
    kept = any(t.outcome == Outcome.ACCEPTED for t in decided)
    return kept, (decided[-1].detail if decided else "no turn ran"), len(decided)


def play_job(ctx: RunContext, job: RoundJob, items: Sequence[Quotable], component: str) -> bool | None:
    """A refinement round's turns as ``crucible worker`` plays them (the controller began the round
    and ends it): ``play_turns`` up to ``job.turns`` turns, until one holds the score (``job.hold``)
    with the feedback quoted; True when one was kept, None when a cancel cut it off."""
    spec = ctx.spec
    assert spec.feedback is not None
    rule = RoundRule(spec.feedback.hold, job.hold.first_published) if job.hold else None
    feedback = quote_items(ctx, component, items)
    played = play_turns(ctx, job.round, Refinement(job.turns), round_rule=rule, feedback=feedback)
    return None if played.cut_off else played.kept

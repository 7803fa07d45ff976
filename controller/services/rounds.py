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

from controller.domain.enums import EventKind, Outcome
from controller.engine.candidate import FeedbackQuote
from controller.services.context import RoundRule, RunContext
from controller.services.turn import notify_champion, run_turn
from controller.store.records import FeedbackRecord


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

    Items of one submitted review (its body and its inline comments) form a batch at once; other
    comments on a component wait until nothing new arrived for ``quiet_window_s`` seconds.
    """
    reviews: dict[tuple[str, int], list[FeedbackRecord]] = {}
    lone: dict[str, list[FeedbackRecord]] = {}
    for item in items:
        review = item.external_id if item.source == "review" else item.review_id
        if review is not None:
            reviews.setdefault((item.component, review), []).append(item)
        else:
            lone.setdefault(item.component, []).append(item)
    batches = [Batch(comp, tuple(group)) for (comp, _), group in reviews.items()]
    for comp, group in lone.items():
        latest = max(item.received_at for item in group)
        if now - latest >= timedelta(seconds=quiet_window_s):
            batches.append(Batch(comp, tuple(group)))
    return sorted(batches, key=lambda b: min(i.received_at for i in b.items))


KINDS = {"review": "review", "review_comment": "inline comment", "issue_comment": "comment"}
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


def quotes(ctx: RunContext, batch: Batch) -> tuple[FeedbackQuote, ...]:
    """The batch as quoted data for CANDIDATE.md: author, kind, file, line and the code it refers to.

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
            context=None if _has_hunk(i) else _context(ctx, batch.component, i.path, i.line),
            diff_hunk=i.diff_hunk if _has_hunk(i) else None,
        )
        for i in batch.items
        if i.body.strip()
    )


def _has_hunk(item: FeedbackRecord) -> bool:
    return bool(item.diff_hunk and item.diff_hunk.strip())


def first_published_score(ctx: RunContext) -> float | None:
    """The champion's score when the PR was first published (rounds may not slide below it)."""
    for event in ctx.store.list_events(ctx.run_id):
        if event.kind == EventKind.PUBLISHED and isinstance(event.payload.get("value"), int | float):
            return float(event.payload["value"])
    run = ctx.store.get_run(ctx.run_id)
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


def start_from_adopted(ctx: RunContext, component: str) -> None:
    """With ``on_foreign_push = "adopt"``, a head someone else pushed is where the next round starts:
    it becomes the champion of that component (every round turn re-measures it beside the candidate,
    and it is never rewritten: round commits build on top of it)."""
    comp = next((c for c in ctx.store.list_components(ctx.run_id) if c.name == component), None)
    adopted = comp.extra.get("adopted_head") if comp else None
    if not adopted or ctx.champion_heads.get(component) == adopted:
        return
    heads = {**ctx.champion_heads, component: str(adopted)}
    ctx.ensure_arm("candidate", heads)
    ctx.ensure_arm("champion", heads)
    ctx.champion_heads = heads
    ctx.store.set_component_head(ctx.run_id, component, str(adopted))


def run_round(ctx: RunContext, batch: Batch) -> bool:
    """Run one refinement round for ``batch``; True when a turn held the score and was pushed."""
    spec = ctx.spec
    assert spec.feedback is not None
    notify_champion(ctx)  # refresh the PR first: this is where a foreign push is noticed (and adopted)
    start_from_adopted(ctx, batch.component)
    run = ctx.store.get_run(ctx.run_id)
    number = run.round + 1
    ids = [item.id for item in batch.items]
    ctx.store.set_round(ctx.run_id, number)
    ctx.store.assign_round(ids, number)
    ctx.store.append_event(
        ctx.run_id, EventKind.ROUND_STARTED, {"round": number, "component": batch.component, "feedback": ids}
    )
    first = first_published_score(ctx)
    ctx.round_rule = RoundRule(spec.feedback.hold, first) if first is not None else None
    ctx.feedback = quotes(ctx, batch)
    kept = False
    detail = "no turn ran"
    try:
        for _ in range(spec.feedback.turns):
            turn = ctx.store.turn_counts(ctx.run_id).highest + 1
            record = run_turn(ctx, turn, number, None)
            detail = record.detail
            if record.outcome == Outcome.ACCEPTED:
                kept = True
                break
            if ctx.executor.cancel.is_set():
                break
    finally:
        ctx.round_rule = None
        ctx.feedback = ()
    head = ctx.champion_heads.get(batch.component) if kept else None
    for item in batch.items:
        reply = draft_reply(item, kept, head, detail, spec.metric.name)
        ctx.store.append_event(
            ctx.run_id, EventKind.REPLY_DRAFTED, {"feedback": item.id, "author": item.author, "reply": reply}
        )
    ctx.store.append_event(
        ctx.run_id,
        EventKind.ROUND_FINISHED,
        {
            "round": number,
            "component": batch.component,
            "feedback": ids,
            "kept": kept,
            "head": head,
            "detail": detail,
        },
    )
    notify_champion(ctx)  # the body says what the round addressed, or that it could not hold the score
    return kept

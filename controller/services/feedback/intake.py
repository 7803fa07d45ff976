"""Feedback intake: turn stored webhook deliveries (and the poller's sightings) into feedback items.

The webhook edge only stores deliveries; this service processes them later, so the HTTP answer
never waits for it. Both paths, webhooks and the poller, end in ``ingest``, whose deduplication
lives in the store (one item per (source, external id, action, updated_at) and run), so a comment
seen ten times by webhooks and once by the poller is one item. Everything here is idempotent:
processing a delivery again (after a crash before it was marked) adds nothing twice.

What is *not* decided here: trust (verdicts), hygiene (stripping) and batching into rounds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable

from controller.domain.enums import EventKind
from controller.forge.base import FeedbackEvent
from controller.forge.webhooks import PayloadError, parse_access_change, parse_feedback, parse_pull_state
from controller.store import DeliveryRecord, FeedbackRecord
from controller.store.ports import FeedbackIntake

log = logging.getLogger(__name__)

BATCH = 100


def process_deliveries(
    store: FeedbackIntake,
    *,
    own_logins: Collection[str] = (),
    touched: set[str] | None = None,
    on_access_change: Callable[[str], None] | None = None,
) -> int:
    """Process every pending delivery (oldest first) and mark it processed; returns how many, and
    adds to ``touched`` the runs that got new feedback or a PR state from them.

    Feedback on a PR crucible published becomes feedback items of that PR's run (the newest run if
    several published the same PR); a ``pull_request`` closed/reopened updates the stored PR state and
    a close appends ``PR_CLOSED`` once. Deliveries about other PRs or events are marked processed and
    otherwise ignored, as are payloads lacking fields (logged). ``member``/``repository`` and
    other access events call ``on_access_change`` with the repository (``"*"``: any), so cached
    permissions are dropped. Store errors propagate and leave the delivery pending for the next call.
    """
    done = 0
    while batch := store.pending_deliveries(limit=BATCH):
        for delivery in batch:
            changed = parse_access_change(delivery.event, delivery.payload)
            if changed is not None and on_access_change is not None:
                on_access_change(changed)
            runs = _process(store, delivery, own_logins)
            if touched is not None:
                touched.update(runs)
            store.mark_delivery_processed(delivery.id)
            done += 1
    return done


def ingest(
    store: FeedbackIntake,
    run_id: str,
    component: str,
    events: Iterable[FeedbackEvent],
    own_logins: Collection[str] = (),
) -> list[FeedbackRecord]:
    """Store the events as feedback of ``run_id``/``component``; returns only the new items.

    Crucible's own activity (authors in ``own_logins``, compared case-insensitively) is dropped: it
    never triggers anything. Versions already stored (by a webhook or an earlier poll) are skipped.
    """
    own = {login.lower() for login in own_logins}
    added: list[FeedbackRecord] = []
    for event in events:
        if event.author.lower() in own:
            continue
        record = store.add_feedback(run_id, component, event)
        if record is not None:
            added.append(record)
    return added


def _process(store: FeedbackIntake, delivery: DeliveryRecord, own_logins: Collection[str]) -> set[str]:
    """Route one delivery to the runs that published its PR; returns those runs."""
    try:
        events = parse_feedback(delivery.event, delivery.payload)
        pull_state = parse_pull_state(delivery.event, delivery.payload)
    except PayloadError as exc:
        log.warning("delivery %s (%s): ignored, %s", delivery.id, delivery.event, exc)
        return set()
    runs: set[str] = set()
    for event in events:
        pull = store.pull_by_number(event.repo, event.pr_number)
        if pull is not None and ingest(store, pull.run_id, pull.component, [event], own_logins):
            runs.add(pull.run_id)
    if pull_state is not None:
        owner = apply_pull_state(store, *pull_state, delivery_id=delivery.id)
        if owner is not None:
            runs.add(owner)
    return runs


def apply_pull_state(
    store: FeedbackIntake, repo: str, number: int, state: str, merged: bool, *, delivery_id: str | None
) -> str | None:
    """Record that PR ``number`` of ``repo`` is open or closed, as a webhook delivery (its id) or
    the poller (``delivery_id`` None) saw it; a close appends ``PR_CLOSED`` once, whoever saw it
    first. PRs crucible did not publish are ignored. Returns the run that owns the PR, if any."""
    pull = store.pull_by_number(repo, number)
    if pull is None:
        return None
    event = None
    if state == "closed":
        payload = {"component": pull.component, "repo": repo, "number": number, "merged": merged}
        seen_by = {"delivery": delivery_id} if delivery_id is not None else {"seen_by": "poller"}
        event = (EventKind.PR_CLOSED, {**payload, **seen_by})
    store.set_pull_state(pull.run_id, pull.component, state, event=event)
    return pull.run_id

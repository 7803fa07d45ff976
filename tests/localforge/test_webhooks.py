"""Signed webhooks: signatures over the raw body, headers, and payload shapes like GitHub's own
examples (``tests/testdata/github-webhooks``)."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from functools import reduce
from typing import Any

from controller.localforge.webhooks import signature
from tests.localforge.conftest import BOT, Forge, ForgeStarter, Receiver
from tests.testdata import WEBHOOKS

SECRET = "It's a Secret to Everybody"
NESTED = ("pull_request", "comment", "review", "issue")
NOT_APPLICABLE = {"installation", "organization", "enterprise"}  # GitHub App / org context only


def test_signature_matches_githubs_documented_vector() -> None:
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert signature(SECRET, b"Hello, World!") == expected


def _oracle_keys(event: str, action: str) -> dict[str, set[str]]:
    """Keys every oracle example of ``event.action`` has, at the top level and in nested objects
    (all examples of ``event`` when the action has none, e.g. ``pull_request.edited``)."""
    files = sorted(WEBHOOKS.glob(f"{event}.{action}.*.json")) or sorted(WEBHOOKS.glob(f"{event}.*.json"))
    examples = [json.loads(p.read_text()) for p in files]
    assert examples, f"no oracle example for {event}"
    shapes = {"": reduce(set.__and__, (set(e) for e in examples)) - NOT_APPLICABLE}
    for name in NESTED:
        if all(isinstance(e.get(name), dict) for e in examples):
            shapes[name] = reduce(set.__and__, (set(e[name]) for e in examples))
    return shapes


def test_events_are_signed_and_shaped_like_githubs(forge_factory: ForgeStarter, receiver: Receiver) -> None:
    forge = forge_factory(webhook_url=receiver.url, webhook_secret=SECRET)
    pull, checkout = forge.open_pull()
    first_head = pull.head.sha
    pull.edit(title="Renamed")
    comment = forge.gh("bob").get_repo("alice/demo").get_pull(1).create_issue_comment("nice")
    comment.edit("nicer")
    comment.delete()
    as_bob = forge.gh("bob").get_repo("alice/demo").get_pull(1)
    as_bob.create_review(body="hm", event="COMMENT", comments=[{"path": "app.py", "line": 1, "body": "x"}])
    as_bob.create_review_comment("lone", pull.head.sha, "app.py", line=3)
    forge.commit(checkout, {"app.py": "1\n"})
    forge.push(checkout, "feature")
    pull.edit(state="closed")
    assert forge.handle.flush_webhooks()
    deliveries = receiver.drain()

    seen = []
    for item in deliveries:
        expected = hmac.new(SECRET.encode(), item.body, hashlib.sha256).hexdigest()
        assert item.headers["x-hub-signature-256"] == f"sha256={expected}"
        assert uuid.UUID(item.headers["x-github-delivery"])
        assert item.headers["content-type"] == "application/json"
        payload = item.payload
        action = payload.get("action", "event")  # push has no action; its examples are push.event.N
        seen.append((item.event, action))
        for scope, keys in _oracle_keys(item.event, action).items():
            have = set(payload[scope]) if scope else set(payload)
            assert keys <= have, f"{item.event}.{action} {scope or 'top'} lacks {sorted(keys - have)}"
        assert payload["repository"]["full_name"] == "alice/demo"
    assert seen == [
        ("push", "event"),
        ("push", "event"),
        ("pull_request", "opened"),
        ("pull_request", "edited"),
        ("issue_comment", "created"),
        ("issue_comment", "edited"),
        ("issue_comment", "deleted"),
        ("pull_request_review", "submitted"),
        ("pull_request_review_comment", "created"),
        ("pull_request_review_comment", "created"),
        ("pull_request_review", "submitted"),
        ("push", "event"),
        ("pull_request", "synchronize"),
        ("pull_request", "closed"),
    ]
    by_event: dict[tuple[str, str], Any] = {}
    for d in deliveries:
        by_event.setdefault((d.event, d.payload.get("action", "event")), d.payload)  # the first of each
    issue = by_event[("issue_comment", "created")]["issue"]
    assert issue["pull_request"]["html_url"] == pull.html_url and issue["pull_request"]["merged_at"] is None
    assert by_event[("issue_comment", "edited")]["changes"] == {"body": {"from": "nice"}}
    assert by_event[("issue_comment", "created")]["comment"]["author_association"] == "NONE"
    assert by_event[("pull_request", "edited")]["changes"] == {"title": {"from": "Speed up"}}
    reviews = [d.payload["review"] for d in deliveries if d.event == "pull_request_review"]
    assert [(r["state"], r["body"]) for r in reviews] == [("commented", "hm"), ("commented", None)]
    pushes = [d.payload for d in deliveries if d.event == "push"]
    assert [(p["ref"], p["created"], len(p["commits"])) for p in pushes] == [
        ("refs/heads/feature", True, 1),
        ("refs/heads/main", True, 1),
        ("refs/heads/feature", False, 1),
    ]
    assert pushes[2]["before"] == first_head and pushes[2]["forced"] is False
    closed = by_event[("pull_request", "closed")]["pull_request"]
    assert closed["state"] == "closed" and closed["merged"] is False


def test_repository_hook_filters_events_and_pings(forge: Forge, receiver: Receiver) -> None:
    pull, _ = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    hook = repo.create_hook(
        "web", {"url": receiver.url, "content_type": "json", "secret": "h"}, ["issue_comment"]
    )
    assert hook.events == ["issue_comment"] and hook.active
    pull.create_issue_comment("hello")
    pull.edit(title="not delivered to this hook")
    assert forge.handle.flush_webhooks()
    deliveries = receiver.drain()
    assert [d.event for d in deliveries] == ["ping", "issue_comment"]
    assert deliveries[0].payload["hook_id"] == hook.id
    assert all(d.headers["x-hub-signature-256"] == signature("h", d.body) for d in deliveries)
    assert [h.id for h in repo.get_hooks()] == [hook.id]
    hook.delete()
    assert list(repo.get_hooks()) == []


def test_unreachable_webhook_does_not_break_the_api(forge_factory: ForgeStarter) -> None:
    forge = forge_factory(webhook_url="http://127.0.0.1:9/unreachable", webhook_secret="x")
    pull, _ = forge.open_pull()
    assert pull.number == 1
    assert forge.handle.flush_webhooks()
    failed = list(forge.handle.services.forge.dispatcher.recent)
    assert failed and all(d.status == 0 and d.error for d in failed)


def test_dismissals_and_push_timestamps_are_shaped_like_githubs(
    forge_factory: ForgeStarter, receiver: Receiver
) -> None:
    forge = forge_factory(webhook_url=receiver.url, webhook_secret=SECRET)
    pull, checkout = forge.open_pull()
    approval = forge.gh("bob").get_repo("alice/demo").get_pull(1).create_review(event="APPROVE")
    status, _, _ = forge.gh().requester.requestJson(
        "PUT", f"{pull.url}/reviews/{approval.id}/dismissals", input={"message": "stale"}
    )
    assert status == 200
    forge.commit(checkout, {"app.py": "2\n"})
    forge.push(checkout, "feature")
    assert forge.handle.flush_webhooks()
    by_event = {(d.event, d.payload.get("action", "event")): d.payload for d in receiver.drain()}
    dismissed = by_event[("pull_request_review", "dismissed")]
    for scope, keys in _oracle_keys("pull_request_review", "dismissed").items():
        have = set(dismissed[scope]) if scope else set(dismissed)
        assert keys <= have, f"dismissed {scope or 'top'} lacks {sorted(keys - have)}"
    assert dismissed["review"]["state"] == "dismissed"
    example = json.loads(sorted(WEBHOOKS.glob("push.event.*.json"))[0].read_text())["repository"]
    ours = by_event[("push", "event")]["repository"]
    for key in ("created_at", "pushed_at", "updated_at"):
        assert type(ours[key]) is type(example[key]), key


def test_triage_and_check_events_are_shaped_like_githubs(
    forge_factory: ForgeStarter, receiver: Receiver
) -> None:
    forge = forge_factory(webhook_url=receiver.url, webhook_secret=SECRET)
    pull, _ = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    repo.add_to_collaborators("bob", "push")
    repo.add_to_collaborators(BOT, "push")
    pull.add_to_labels("perf")
    pull.remove_from_labels("perf")
    pull.create_review_request(reviewers=["bob"])
    pull.delete_review_request(reviewers=["bob"])
    repo.get_issue(pull.number).add_to_assignees("bob")
    repo.get_issue(pull.number).remove_from_assignees("bob")
    repo.get_commit(pull.head.sha).create_status("success", "http://runs/1", "kept", "crucible/p50_ms")
    run = forge.gh(BOT).get_repo("alice/demo").create_check_run("crucible", pull.head.sha)
    run.edit(conclusion="success", output={"title": "t", "summary": "s"})
    assert forge.handle.flush_webhooks()
    wanted = {
        ("pull_request", "labeled"),
        ("pull_request", "unlabeled"),
        ("pull_request", "review_requested"),
        ("pull_request", "review_request_removed"),
        ("pull_request", "assigned"),
        ("pull_request", "unassigned"),
        ("status", "event"),
        ("check_run", "created"),
        ("check_run", "completed"),
    }
    seen = set()
    for item in receiver.drain():
        key = (item.event, item.payload.get("action", "event"))
        if key not in wanted:
            continue
        seen.add(key)
        for scope, keys in _oracle_keys(*key).items():
            have = set(item.payload[scope]) if scope else set(item.payload)
            assert keys <= have, f"{key} {scope or 'top'} lacks {sorted(keys - have)}"
        if item.event == "check_run":
            example = json.loads(sorted(WEBHOOKS.glob(f"check_run.{key[1]}.*.json"))[0].read_text())
            for scope in ("check_run", "check_suite"):
                ours = item.payload["check_run"] if scope == "check_run" else item.payload["check_run"][scope]
                theirs = example["check_run"] if scope == "check_run" else example["check_run"][scope]
                assert set(theirs) <= set(ours), f"{scope} lacks {sorted(set(theirs) - set(ours))}"
    assert seen == wanted

"""githubkit's typed models (pydantic, generated from GitHub's description) over the forge's answers
and webhook payloads: a bot written with githubkit gets validated objects, not a validation error,
for every call of a PR bot's flow and every event that flow fires."""

from __future__ import annotations

import base64
from typing import Any, Literal

import pytest
from githubkit import GitHub
from githubkit.webhooks import parse

from tests.localforge.conftest import BOT, Forge, ForgeStarter, Receiver


def _kit(forge: Forge, user: str = "alice") -> GitHub[Any]:
    return GitHub(forge.tokens[user], base_url=forge.handle.api_url + "/", auto_retry=False)


# 2022-11-28 is the REST version GitHub Enterprise 3.17 serves (the forge answers as it); 2026-03-10
# is github.com's current one, whose models require more (labels' archived_at and archived_by).
@pytest.mark.parametrize("version", ["2022-11-28", "2026-03-10"])
def test_githubkit_models_parse_a_pr_bots_flow(
    forge_factory: ForgeStarter, receiver: Receiver, version: Literal["2022-11-28", "2026-03-10"]
) -> None:
    forge = forge_factory(webhook_url=receiver.url, webhook_secret="s")
    pull, _ = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    repo.add_to_collaborators("bob", "push")
    repo.add_to_collaborators(BOT, "push")
    kit = _kit(forge)
    rest = kit.rest(version)
    number = pull.number

    assert rest.users.get_authenticated().parsed_data.login == "alice"
    assert rest.repos.get("alice", "demo").parsed_data.full_name == "alice/demo"
    assert [p.number for p in rest.pulls.list("alice", "demo").parsed_data] == [number]
    fetched = rest.pulls.get("alice", "demo", number).parsed_data
    assert (fetched.mergeable, fetched.head.ref, fetched.draft) == (True, "feature", False)
    assert [f.filename for f in rest.pulls.list_files("alice", "demo", number).parsed_data] == ["app.py"]

    labels = rest.issues.add_labels("alice", "demo", number, data={"labels": ["performance"]}).parsed_data
    assert [label.name for label in labels] == ["performance"]
    rest.issues.add_assignees("alice", "demo", number, data={"assignees": ["alice"]})
    requested = rest.pulls.request_reviewers("alice", "demo", number, data={"reviewers": ["bob"]}).parsed_data
    assert [u.login for u in requested.requested_reviewers or []] == ["bob"]
    issues = rest.issues.list_for_repo("alice", "demo", labels="performance").parsed_data
    assert [(i.number, [a.login for a in i.assignees or []]) for i in issues] == [(number, ["alice"])]

    head = fetched.head.sha
    rest.repos.create_commit_status(
        "alice",
        "demo",
        head,
        data={"state": "success", "context": "crucible/p50_ms", "description": "41 → 11"},
    )
    combined = rest.repos.get_combined_status_for_ref("alice", "demo", head).parsed_data
    assert (combined.state, [s.context for s in combined.statuses]) == ("success", ["crucible/p50_ms"])
    app_kit = _kit(forge, BOT)  # githubkit's namespaces need their client kept alive
    app = app_kit.rest(version)
    app.checks.create(
        "alice",
        "demo",
        data={
            "name": "crucible/p50_ms",
            "head_sha": head,
            "status": "completed",
            "conclusion": "success",
            "output": {"title": "p50_ms 41.1 → 10.9", "summary": "| samples |"},
        },
    )
    runs = rest.checks.list_for_ref("alice", "demo", head).parsed_data
    assert [(r.name, r.conclusion, r.app and r.app.slug) for r in runs.check_runs] == [
        ("crucible/p50_ms", "success", "ci")
    ]

    comment = rest.issues.create_comment("alice", "demo", number, data={"body": "measured"}).parsed_data
    assert comment.body == "measured"
    bob_kit = _kit(forge, "bob")
    review = bob_kit.rest(version).pulls.create_review(
        "alice", "demo", number, data={"event": "COMMENT", "body": "why this size?"}
    )
    assert review.parsed_data.state == "COMMENTED"
    assert [
        r.user and r.user.login for r in rest.pulls.list_reviews("alice", "demo", number).parsed_data
    ] == ["bob"]

    compared = rest.repos.compare_commits("alice", "demo", "main...feature").parsed_data
    assert (compared.status, compared.ahead_by) == ("ahead", 1)
    content = rest.repos.get_content("alice", "demo", "README.md").parsed_data
    assert getattr(content, "type", None) == "file"
    written = rest.repos.create_or_update_file_contents(
        "alice",
        "demo",
        "config/bot.toml",
        data={"message": "bot config", "content": base64.b64encode(b"x = 1\n").decode(), "branch": "feature"},
    ).parsed_data
    assert written.content is not None and written.content.path == "config/bot.toml"
    history = rest.repos.list_commits("alice", "demo", sha="feature").parsed_data
    assert history[0].sha == written.commit.sha

    assert forge.handle.flush_webhooks()
    deliveries = receiver.drain()
    events = {(d.event, d.payload.get("action")) for d in deliveries}
    assert {("pull_request", "labeled"), ("status", None), ("check_run", "created")} <= events
    for delivery in deliveries:
        event = parse(delivery.event, delivery.body)  # raises on a payload its models reject
        if delivery.event == "pull_request" and delivery.payload["action"] == "review_requested":
            assert getattr(event, "requested_reviewer").login == "bob"  # noqa: B009
        if delivery.event == "status":
            assert getattr(event, "context") == "crucible/p50_ms"  # noqa: B009

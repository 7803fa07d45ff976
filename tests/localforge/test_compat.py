"""What GitHub clients other than PyGithub rely on: body media types, GitHub's null and default
fields, the pending-review life cycle, GitHub's error shapes and the smaller routes. Raw HTTP
(httpx) so each test states exactly what goes over the wire."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import git
from tests.localforge.conftest import Forge, Receiver

FULL = "application/vnd.github.v3.full+json"


def _pull(forge: Forge, api: Any) -> tuple[str, dict[str, Any]]:
    forge.repo_with_branch()
    body = {"title": "T", "head": "feature", "base": "main", "body": "Some **bold** text", "draft": True}
    created = api().post("/repos/alice/demo/pulls", json=body)
    assert created.status_code == 201
    return "/repos/alice/demo/pulls/1", created.json()


def test_body_media_types_on_pulls_issues_reviews_and_comments(forge: Forge, api: Any) -> None:
    url, _ = _pull(forge, api)
    alice, bob = api("alice"), api("bob")
    review = {
        "body": "see `x`",
        "event": "COMMENT",
        "comments": [{"path": "app.py", "line": 1, "body": "*why*"}],
    }
    assert bob.post(f"{url}/reviews", json=review).status_code == 200
    assert alice.post("/repos/alice/demo/issues/1/comments", json={"body": "# Title"}).status_code == 201

    plain = alice.get(url).json()
    assert "body_html" not in plain and "body_text" not in plain
    full = alice.get(url, headers={"Accept": FULL})
    assert full.headers["X-GitHub-Media-Type"] == "github.v3; param=full; format=json"
    shown = full.json()
    assert shown["body"] == "Some **bold** text"
    assert shown["body_html"] == "<p>Some <strong>bold</strong> text</p>\n"
    assert shown["body_text"] == "Some bold text"
    html_only = alice.get(
        "/repos/alice/demo/issues/1", headers={"Accept": "application/vnd.github.html+json"}
    )
    assert html_only.json()["body_html"].startswith("<p>") and "body" not in html_only.json()
    text_only = alice.get(
        "/repos/alice/demo/issues/1/comments", headers={"Accept": "application/vnd.github.text+json"}
    )
    assert [(c.get("body"), c["body_text"]) for c in text_only.json()] == [(None, "Title")]
    (listed,) = alice.get(f"{url}/reviews", headers={"Accept": FULL}).json()
    assert listed["body_html"] == "<p>see <code>x</code></p>\n"
    (inline,) = alice.get(f"{url}/comments", headers={"Accept": FULL}).json()
    assert (inline["body"], inline["body_html"], inline["body_text"]) == (
        "*why*",
        "<p><em>why</em></p>\n",
        "why",
    )
    listed_pulls = alice.get("/repos/alice/demo/pulls", headers={"Accept": FULL}).json()
    assert listed_pulls[0]["body_text"] == "Some bold text"
    raw_html = alice.post("/repos/alice/demo/issues/1/comments", json={"body": "<script>x</script>"})
    shown = alice.get(f"/repos/alice/demo/issues/comments/{raw_html.json()['id']}", headers={"Accept": FULL})
    assert "<script>" not in shown.json()["body_html"]


def test_nullable_and_default_fields_github_sends(forge: Forge, api: Any) -> None:
    url, _ = _pull(forge, api)
    alice = api()
    issue = alice.get("/repos/alice/demo/issues/1").json()
    assert issue["closed_by"] is None and issue["state_reason"] is None
    assert api("bob").patch(url, json={"state": "closed"}).status_code == 403
    assert alice.patch(url, json={"state": "closed"}).status_code == 200
    closed = alice.get("/repos/alice/demo/issues/1").json()
    assert closed["state"] == "closed" and closed["closed_by"]["login"] == "alice"
    alice.patch(url, json={"state": "open"})
    assert alice.get("/repos/alice/demo/issues/1").json()["closed_by"] is None
    comment = api("bob").post(f"{url}/comments", json={"body": "b", "path": "app.py", "line": 2})
    assert comment.status_code == 201 and comment.json()["start_side"] is None
    ranged = api("bob").post(
        f"{url}/comments", json={"body": "r", "path": "app.py", "line": 3, "start_line": 1}
    )
    assert (ranged.json()["start_line"], ranged.json()["start_side"]) == (1, "RIGHT")
    repo = alice.get("/repos/alice/demo").json()
    assert (repo["allow_squash_merge"], repo["allow_merge_commit"], repo["allow_rebase_merge"]) == (True,) * 3
    assert repo["allow_auto_merge"] is False and repo["delete_branch_on_merge"] is False


def test_pending_review_submitted_listed_and_deleted(forge: Forge, api: Any, receiver: Receiver) -> None:
    hook = {"config": {"url": receiver.url}, "events": ["pull_request_review", "pull_request_review_comment"]}
    assert api().post("/repos/alice/demo/hooks", json=hook).status_code == 404  # no repo yet
    url, _ = _pull(forge, api)
    assert api().post("/repos/alice/demo/hooks", json=hook).status_code == 201
    bob, carol = api("bob"), api("carol")
    pending = bob.post(f"{url}/reviews", json={"comments": [{"path": "app.py", "line": 2, "body": "hm"}]})
    assert pending.status_code == 200 and pending.json()["state"] == "PENDING"
    assert "submitted_at" not in pending.json()
    review_id = pending.json()["id"]
    assert [c["body"] for c in bob.get(f"{url}/reviews/{review_id}/comments").json()] == ["hm"]
    assert carol.get(f"{url}/reviews/{review_id}/comments").status_code == 404  # others cannot see it
    assert carol.get(f"{url}/comments").json() == []
    again = bob.post(f"{url}/reviews", json={"body": "second"})
    assert again.status_code == 422 and again.json()["errors"] == [
        "User can only have one pending review per pull request"
    ]
    updated = bob.put(f"{url}/reviews/{review_id}", json={"body": "overall fine"})
    assert updated.status_code == 200 and updated.json()["body"] == "overall fine"
    assert carol.put(f"{url}/reviews/{review_id}", json={"body": "mine"}).status_code == 404
    assert forge.handle.flush_webhooks()
    assert [r.event for r in receiver.drain()] == ["ping"]  # a pending review sends nothing

    submitted = bob.post(f"{url}/reviews/{review_id}/events", json={"event": "COMMENT"})
    assert submitted.status_code == 200 and submitted.json()["state"] == "COMMENTED"
    assert submitted.json()["body"] == "overall fine" and submitted.json()["submitted_at"]
    assert [c["body"] for c in carol.get(f"{url}/comments").json()] == ["hm"]
    assert forge.handle.flush_webhooks()
    events = [(r.event, r.payload.get("action")) for r in receiver.drain()]
    assert events == [("pull_request_review", "submitted"), ("pull_request_review_comment", "created")]
    twice = bob.post(f"{url}/reviews/{review_id}/events", json={"event": "COMMENT"})
    assert twice.status_code == 422
    deleted_submitted = bob.delete(f"{url}/reviews/{review_id}")
    assert deleted_submitted.status_code == 422

    second = bob.post(f"{url}/reviews", json={"comments": [{"path": "app.py", "line": 1, "body": "x"}]})
    gone = bob.delete(f"{url}/reviews/{second.json()['id']}")
    assert gone.status_code == 200 and gone.json()["state"] == "PENDING"
    assert bob.get(f"{url}/reviews/{second.json()['id']}").status_code == 404
    assert [c["body"] for c in bob.get(f"{url}/comments").json()] == ["hm"]
    assert bob.post(f"{url}/reviews", json={"body": "can review again"}).status_code == 200


def test_self_review_and_dismissal_follow_github(forge: Forge, api: Any) -> None:
    url, _ = _pull(forge, api)
    alice, bob = api("alice"), api("bob")
    own = alice.post(f"{url}/reviews", json={"event": "APPROVE"})
    assert own.status_code == 422
    assert own.json()["message"] == "Unprocessable Entity"
    assert own.json()["errors"] == ["Can not approve your own pull request"]
    pending = alice.post(f"{url}/reviews", json={"body": "note"}).json()
    own_submit = alice.post(f"{url}/reviews/{pending['id']}/events", json={"event": "REQUEST_CHANGES"})
    assert own_submit.json()["errors"] == ["Can not request changes on your own pull request"]

    approval = bob.post(f"{url}/reviews", json={"event": "APPROVE"}).json()
    assert bob.put(f"{url}/reviews/{approval['id']}/dismissals", json={"message": "no"}).status_code == 403
    dismissed = alice.put(f"{url}/reviews/{approval['id']}/dismissals", json={"message": "stale"})
    assert dismissed.status_code == 200 and dismissed.json()["state"] == "DISMISSED"
    comment = bob.post(f"{url}/reviews", json={"event": "COMMENT", "body": "c"}).json()
    refused = alice.put(f"{url}/reviews/{comment['id']}/dismissals", json={"message": "x"})
    assert refused.status_code == 422


def test_patch_media_type_patch_url_and_clone_without_dot_git(forge: Forge, api: Any) -> None:
    url, shown = _pull(forge, api)
    patch = api().get(url, headers={"Accept": "application/vnd.github.patch"})
    assert patch.status_code == 200 and patch.headers["content-type"].startswith(
        "application/vnd.github.patch"
    )
    assert patch.text.startswith("From ") and "Subject: [PATCH] feature work" in patch.text
    web = httpx.get(shown["patch_url"], headers={"Authorization": f"token {forge.tokens['alice']}"})
    assert web.status_code == 200 and web.text == patch.text
    dest = forge.work / "bare-url"
    git(forge.work, "clone", "-q", f"{forge.url}/alice/demo", str(dest))
    assert git(dest, "rev-parse", "origin/feature") == shown["head"]["sha"]


def test_push_webhook_timestamps_are_integers(forge: Forge, api: Any, receiver: Receiver) -> None:
    _, checkout = forge.repo_with_branch()
    api().post("/repos/alice/demo/hooks", json={"config": {"url": receiver.url}, "events": ["push"]})
    forge.commit(checkout, {"more.txt": "x\n"})
    forge.push(checkout, "feature")
    assert forge.handle.flush_webhooks()
    (push,) = [r.payload for r in receiver.drain() if r.event == "push"]
    assert isinstance(push["repository"]["created_at"], int)
    assert isinstance(push["repository"]["pushed_at"], int)

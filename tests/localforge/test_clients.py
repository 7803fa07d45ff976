"""Two GitHub clients crucible does not use, unmodified, hold a whole review conversation with the
local forge over real HTTP: a draft PR, a review with inline comments, a pending review submitted,
a reply, an edit, a deletion, listings, ready for review, closed.

github3.py asks for ``application/vnd.github.v3.full+json`` and reads ``body_html`` on every
object; gidgethub is asynchronous and speaks GraphQL through ``gh.graphql``. Every JSON answer in
the oracle subset is also checked against GitHub's description by the ``forge`` fixture.
"""

from __future__ import annotations

import asyncio
from typing import Any

import github3
import httpx
from gidgethub.httpx import GitHubAPI

from tests.localforge.conftest import Forge

READY = """
mutation Ready($id: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { isDraft } }
}
"""
THREADS = """
query Threads($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 50) { nodes { path comments(first: 50) { totalCount } } }
    }
  }
}
"""


def test_github3_holds_a_review_conversation(forge: Forge) -> None:
    forge.repo_with_branch()
    alice = github3.GitHubEnterprise(forge.url, token=forge.tokens["alice"])
    bob = github3.GitHubEnterprise(forge.url, token=forge.tokens["bob"])
    # github3's create_pull has no ``draft`` argument: its underlying call sends the body as given
    created = alice.repository("alice", "demo")._create_pull(
        {"title": "Speed up", "body": "Uses **less** time", "head": "feature", "base": "main", "draft": True}
    )
    assert created is not None and created.draft is True
    assert created.body_html == "<p>Uses <strong>less</strong> time</p>\n"
    pull = bob.repository("alice", "demo").pull_request(created.number)
    assert pull.body_text == "Uses less time"
    assert pull.diff().startswith(b"diff --git a/app.py b/app.py")
    assert pull.patch().startswith(b"From ") and b"Subject: [PATCH] feature work" in pull.patch()

    review = pull.create_review(
        "Two notes", event="COMMENT", comments=[{"path": "app.py", "position": 1, "body": "why *one*?"}]
    )
    assert review.state == "COMMENTED" and review.body_html == "<p>Two notes</p>\n"
    pending = pull.create_review("", comments=[{"path": "app.py", "position": 3, "body": "and three"}])
    assert pending.state == "PENDING"
    assert pending.submit("Also this", event="REQUEST_CHANGES") is True
    assert pending.state == "CHANGES_REQUESTED" and pending.submitted_at is not None

    first = next(c for c in pull.review_comments() if c.body == "why *one*?")
    assert first.body_html == "<p>why <em>one</em>?</p>\n" and first.position == 1
    as_alice = alice.repository("alice", "demo").pull_request(created.number)
    reply = next(c for c in as_alice.review_comments() if c.id == first.id).reply("Because.")
    assert reply is not None and reply.body_text == "Because."
    assert first.edit("why *only* one?") is True and first.body_text == "why only one?"
    third = next(c for c in pull.review_comments() if c.body == "and three")
    assert third.delete() is True
    assert sorted(c.body for c in pull.review_comments()) == ["Because.", "why *only* one?"]
    assert [r.state for r in pull.reviews()] == [
        "COMMENTED",
        "CHANGES_REQUESTED",
        "COMMENTED",
    ]  # a reply is one

    graphql = alice.session.post(
        f"{forge.url}/api/graphql", json={"query": READY, "variables": {"id": created.as_dict()["node_id"]}}
    )
    assert graphql.json() == {"data": {"markPullRequestReadyForReview": {"pullRequest": {"isDraft": False}}}}
    assert as_alice.refresh().draft is False
    assert as_alice.close() is True
    assert alice.repository("alice", "demo").pull_request(created.number).state == "closed"
    assert alice.repository("alice", "demo").issue(created.number).closed_by.login == "alice"


async def _gidgethub_conversation(forge: Forge) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        alice = GitHubAPI(
            client, "crucible-tests", oauth_token=forge.tokens["alice"], base_url=forge.handle.api_url
        )
        bob = GitHubAPI(
            client, "crucible-tests", oauth_token=forge.tokens["bob"], base_url=forge.handle.api_url
        )
        graphql_url = f"{forge.url}/api/graphql"
        pull: Any = await alice.post(
            "/repos/alice/demo/pulls", data={"title": "T", "head": "feature", "base": "main", "draft": True}
        )
        url = f"/repos/alice/demo/pulls/{pull['number']}"
        review: Any = await bob.post(
            f"{url}/reviews",
            data={
                "body": "Looks odd",
                "event": "COMMENT",
                "comments": [{"path": "app.py", "line": 2, "body": "x"}],
            },
        )
        assert review["state"] == "COMMENTED"
        pending: Any = await bob.post(
            f"{url}/reviews", data={"comments": [{"path": "app.py", "line": 3, "body": "y"}]}
        )
        submitted: Any = await bob.post(f"{url}/reviews/{pending['id']}/events", data={"event": "COMMENT"})
        assert submitted["state"] == "COMMENTED"
        comments = [c async for c in bob.getiter(f"{url}/comments")]
        assert [c["body"] for c in comments] == ["x", "y"]
        reply: Any = await alice.post(f"{url}/comments/{comments[0]['id']}/replies", data={"body": "fixed"})
        assert reply["in_reply_to_id"] == comments[0]["id"]
        edited: Any = await bob.patch(
            f"/repos/alice/demo/pulls/comments/{comments[1]['id']}", data={"body": "y!"}
        )
        assert edited["body"] == "y!"
        await bob.delete(f"/repos/alice/demo/pulls/comments/{comments[0]['id']}")
        assert sorted([c["body"] async for c in alice.getiter(f"{url}/comments")]) == ["fixed", "y!"]
        assert [r["state"] async for r in alice.getiter(f"{url}/reviews")] == [
            "COMMENTED"
        ] * 3  # with the reply
        threads = await alice.graphql(
            THREADS, endpoint=graphql_url, owner="alice", name="demo", number=pull["number"]
        )
        nodes = threads["repository"]["pullRequest"]["reviewThreads"]["nodes"]
        assert [n["comments"]["totalCount"] for n in nodes] == [1, 1]  # the first thread lost its root
        ready = await alice.graphql(READY, endpoint=graphql_url, id=pull["node_id"])
        assert ready == {"markPullRequestReadyForReview": {"pullRequest": {"isDraft": False}}}
        closed: Any = await alice.patch(url, data={"state": "closed"})
        assert (closed["state"], closed["draft"]) == ("closed", False)


def test_gidgethub_holds_a_review_conversation(forge: Forge) -> None:
    forge.repo_with_branch()
    asyncio.run(_gidgethub_conversation(forge))

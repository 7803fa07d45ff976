"""GraphQL as GitHub clients send it: variables, inline literals, the draft mutations, review
threads, global ids, and GitHub's errors for what the forge's schema does not have."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.localforge.conftest import Forge

THREADS = """
query Threads($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      isDraft
      reviewThreads(first: 1, after: $after) {
        totalCount
        pageInfo { hasNextPage endCursor }
        nodes {
          id path line diffSide isResolved
          comments(first: 10) { nodes { databaseId body author { login } } }
        }
      }
    }
  }
}
"""


@pytest.fixture
def gql(forge: Forge) -> Iterator[Any]:
    clients: dict[str, httpx.Client] = {}

    def post(query: str, user: str = "alice", **variables: Any) -> dict[str, Any]:
        if user not in clients:
            headers = {"Authorization": f"bearer {forge.tokens[user]}"}
            clients[user] = httpx.Client(headers=headers, timeout=30)
        answer = clients[user].post(f"{forge.url}/api/graphql", json={"query": query, "variables": variables})
        assert answer.status_code == 200
        found: dict[str, Any] = answer.json()
        return found

    yield post
    for client in clients.values():
        client.close()


def test_draft_mutations_with_variables_and_inline_literals(forge: Forge, gql: Any) -> None:
    pull, _ = forge.open_pull()
    node = pull.raw_data["node_id"]
    by_variable = gql(
        "mutation($id: ID!) { convertPullRequestToDraft(input: {pullRequestId: $id})"
        " { pullRequest { isDraft } } }",
        id=node,
    )
    assert by_variable == {"data": {"convertPullRequestToDraft": {"pullRequest": {"isDraft": True}}}}
    inline = gql(
        f'mutation {{ ready: markPullRequestReadyForReview(input: {{pullRequestId: "{node}",'
        ' clientMutationId: "c1"})'
        " { clientMutationId pullRequest { number isDraft } } }"
    )
    assert inline["data"]["ready"] == {
        "clientMutationId": "c1",
        "pullRequest": {"number": 1, "isDraft": False},
    }
    assert forge.gh().get_repo("alice/demo").get_pull(1).draft is False

    missing = gql(
        'mutation { convertPullRequestToDraft(input: {pullRequestId: "MDExOlB1bGxSZXF1ZXN0OTk5"})'
        " { clientMutationId } }"
    )
    (error,) = missing["errors"]
    assert missing["data"] == {"convertPullRequestToDraft": None}
    assert error["type"] == "NOT_FOUND" and error["path"] == ["convertPullRequestToDraft"]
    forbidden = gql(
        "mutation($id: ID!) { convertPullRequestToDraft(input: {pullRequestId: $id}) { clientMutationId } }",
        user="carol",
        id=node,
    )
    assert forbidden["errors"][0]["type"] == "FORBIDDEN"
    assert forge.gh().get_repo("alice/demo").get_pull(1).draft is False


def test_review_threads_read_with_paging_and_node_lookup(forge: Forge, gql: Any) -> None:
    pull, _ = forge.open_pull()
    as_bob = forge.gh("bob").get_repo("alice/demo").get_pull(pull.number)
    first = as_bob.create_review_comment("one", pull.head.sha, "app.py", line=1)
    pull.create_review_comment_reply(first.id, "reply")
    as_bob.create_review_comment("three", pull.head.sha, "app.py", line=3)
    page = gql(THREADS, owner="alice", name="demo", number=1)["data"]["repository"]["pullRequest"]
    threads = page["reviewThreads"]
    assert threads["totalCount"] == 2 and threads["pageInfo"]["hasNextPage"] is True
    (thread,) = threads["nodes"]
    assert (thread["path"], thread["line"], thread["diffSide"], thread["isResolved"]) == (
        "app.py",
        1,
        "RIGHT",
        False,
    )
    bodies = [(c["body"], c["author"]["login"]) for c in thread["comments"]["nodes"]]
    assert bodies == [("one", "bob"), ("reply", "alice")]
    after = threads["pageInfo"]["endCursor"]
    rest = gql(THREADS, owner="alice", name="demo", number=1, after=after)["data"]["repository"][
        "pullRequest"
    ]
    assert [t["comments"]["nodes"][0]["body"] for t in rest["reviewThreads"]["nodes"]] == ["three"]
    assert rest["reviewThreads"]["pageInfo"]["hasNextPage"] is False

    looked_up = gql(
        "query($id: ID!) { node(id: $id) { __typename ... on PullRequestReviewThread { path } } }",
        id=thread["id"],
    )
    assert looked_up["data"]["node"] == {"__typename": "PullRequestReviewThread", "path": "app.py"}
    viewer = gql("{ viewer { login } }", user="bob")
    assert viewer["data"]["viewer"]["login"] == "bob"


def test_unknown_fields_and_repositories_get_githubs_errors(forge: Forge, gql: Any) -> None:
    forge.open_pull()
    unknown = gql('{ repository(owner: "alice", name: "demo") { stargazerCount } }')
    assert "data" not in unknown
    (error,) = unknown["errors"]
    assert error["message"] == "Field 'stargazerCount' doesn't exist on type 'Repository'"
    assert error["extensions"] == {
        "code": "undefinedField",
        "typeName": "Repository",
        "fieldName": "stargazerCount",
    }
    assert error["locations"] == [{"line": 1, "column": 46}]
    assert error["path"] == ["query", "repository", "stargazerCount"]
    named = gql("query Mine { viewer { ... on User { email } } }")
    assert named["errors"][0]["path"] == ["query Mine", "viewer", "... on User", "email"]
    nowhere = gql('{ repository(owner: "alice", name: "nope") { name } }')
    assert nowhere["data"] == {"repository": None}
    assert nowhere["errors"][0]["type"] == "NOT_FOUND"
    assert nowhere["errors"][0]["message"] == "Could not resolve to a Repository with the name 'alice/nope'."
    broken = gql("{ repository(")
    assert "data" not in broken and broken["errors"][0]["locations"]

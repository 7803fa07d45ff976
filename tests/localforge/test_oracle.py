"""The OpenAPI check itself: it catches a wrong shape, and the suite reaches every operation of
GitHub's subset with a successful answer that the check validated."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from tests.conftest import git
from tests.localforge.conftest import BOT, Forge, ForgeStarter
from tests.localforge.oracle import Exchange, encoded_path, validate
from tests.testdata import OPENAPI_SUBSET as SUBSET


def test_a_wrong_shape_is_reported() -> None:
    body = json.dumps({"id": 1, "number": 1}).encode()  # a "pull request" without its required fields
    broken = Exchange("GET", "/api/v3/repos/o/r/pulls/1", "", 200, "application/json", body)
    failures, outside = validate([broken])
    assert len(failures) == 1 and "pulls/1" in failures[0] and outside == []


def _operations() -> set[tuple[str, str]]:
    paths = json.loads(SUBSET.read_text())["paths"]
    return {
        (m.upper(), p)
        for p, item in paths.items()
        for m in item
        if m in {"get", "post", "patch", "put", "delete"}
    }


def test_every_subset_operation_answers_and_validates(forge_factory: ForgeStarter) -> None:
    forge = forge_factory()
    pull, checkout = forge.open_pull()
    gh = forge.gh()
    repo = gh.get_repo("alice/demo")
    gh.requester.requestJson("GET", "/")
    gh.get_rate_limit()
    gh.get_user().login  # noqa: B018
    repo.get_branch("main")
    sha = git(checkout, "rev-parse", "origin/main")
    ref = repo.create_git_ref("refs/heads/extra", sha)
    repo.get_git_ref("heads/extra")
    list(repo.get_git_matching_refs("heads/"))
    ref.edit(git(checkout, "rev-parse", "HEAD"))
    ref.delete()
    comment = pull.create_issue_comment("hello")
    comment.edit("hello again")
    repo.get_issue(pull.number)
    list(pull.get_issue_comments())
    list(repo.get_issues_comments())
    list(repo.get_pulls())
    pull.edit(title="Retitled")
    repo.get_pull(pull.number)
    list(pull.get_files())
    as_bob = forge.gh("bob").get_repo("alice/demo").get_pull(pull.number)
    inline = as_bob.create_review_comment("why?", pull.head.sha, "app.py", line=1)
    pull.create_review_comment_reply(inline.id, "because")
    list(pull.get_review_comments())
    list(repo.get_pulls_review_comments())
    repo.get_pull(pull.number).get_review_comment(inline.id)
    review = as_bob.create_review(body="ok", event="COMMENT")
    list(pull.get_reviews())
    pull.get_review(review.id)
    with httpx.Client(base_url=forge.handle.api_url, timeout=30) as rest:
        _beyond_pyGithub(forge, rest, pull.number, review.id, inline.id, comment.id, sha)
        _triage_and_checks(forge, rest, pull.number, pull.head.sha)

    exchanges = forge.recorder.exchanges
    failures, _ = validate(exchanges)
    assert failures == []
    answered = {(e.method, e.path.removeprefix("/api/v3") or "/") for e in exchanges if e.status < 300}
    missing = {
        (method, template)
        for method, template in _operations()
        if not any(m == method and _matches(template, encoded_path(p)) for m, p in answered)
    }
    assert missing == set()


def _beyond_pyGithub(
    forge: Forge, rest: httpx.Client, number: int, review_id: int, inline_id: int, comment_id: int, sha: str
) -> None:
    """The operations crucible's adapter does not call, as other clients call them."""

    def call(method: str, path: str, user: str = "alice", **body: Any) -> Any:
        headers = {"Authorization": f"token {forge.tokens[user]}"}
        answer = rest.request(method, path, json=body or None, headers=headers)
        assert answer.status_code < 300, (method, path, answer.status_code, answer.text)
        return answer.json() if answer.content else None

    repo, pulls = "/repos/alice/demo", f"/repos/alice/demo/pulls/{number}"
    call("GET", "/meta")
    call("GET", "/users/bob")
    call("POST", "/orgs/acme/repos", name="lib")
    call("GET", "/orgs/acme")
    call("POST", f"{repo}/forks", user="carol")
    call("GET", f"{repo}/branches")
    call("GET", f"{repo}/commits/{sha}")
    call("GET", f"{pulls}/commits")
    call("PUT", f"{repo}/collaborators/bob", permission="push")
    call("GET", f"{repo}/collaborators/bob")
    call("GET", f"{repo}/collaborators/bob/permission")
    call("GET", f"{repo}/collaborators")
    call("PUT", f"{pulls}/reviews/{review_id}", user="bob", body="ok, edited")
    call("GET", f"{pulls}/reviews/{review_id}/comments", user="bob")
    approval = call("POST", f"{pulls}/reviews", user="bob", event="APPROVE")
    call("PUT", f"{pulls}/reviews/{approval['id']}/dismissals", message="stale")
    pending = call("POST", f"{pulls}/reviews", user="carol", body="later")
    call("POST", f"{pulls}/reviews/{pending['id']}/events", user="carol", event="COMMENT")
    dropped = call("POST", f"{pulls}/reviews", user="carol", body="never mind")
    call("DELETE", f"{pulls}/reviews/{dropped['id']}", user="carol")
    call("PATCH", f"{repo}/pulls/comments/{inline_id}", user="bob", body="why, exactly?")
    call("GET", f"{repo}/issues/comments/{comment_id}")
    call("DELETE", f"{repo}/issues/comments/{comment_id}")
    hook = call("POST", f"{repo}/hooks", config={"url": "http://127.0.0.1:9/unreachable"})
    hooks = f"{repo}/hooks/{hook['id']}"
    call("GET", f"{repo}/hooks")
    call("GET", hooks)
    call("PATCH", hooks, add_events=["pull_request"])
    call("GET", f"{hooks}/config")
    call("PATCH", f"{hooks}/config", url="http://127.0.0.1:9/elsewhere")
    call("POST", f"{hooks}/pings")
    assert forge.handle.flush_webhooks()
    deliveries = call("GET", f"{hooks}/deliveries")
    call("GET", f"{hooks}/deliveries/{deliveries[0]['id']}")
    call("DELETE", hooks)
    call("DELETE", f"{repo}/pulls/comments/{inline_id}", user="bob")
    call("GET", f"{repo}/compare/main...feature")
    readme = call("GET", f"{repo}/contents/README.md")
    call("PUT", f"{repo}/contents/README.md", message="edit", content="IyBkZW1vCg==", sha=readme["sha"])


def _triage_and_checks(forge: Forge, rest: httpx.Client, number: int, head: str) -> None:
    """Labels, assignees, review requests, issues, statuses and check runs, as a bot calls them."""

    def call(method: str, path: str, user: str = "alice", **body: Any) -> Any:
        headers = {"Authorization": f"token {forge.tokens[user]}"}
        answer = rest.request(method, path, json=body or None, headers=headers)
        assert answer.status_code < 300, (method, path, answer.status_code, answer.text)
        return answer.json() if answer.content else None

    repo, issue = "/repos/alice/demo", f"/repos/alice/demo/issues/{number}"
    call("PUT", f"{repo}/collaborators/{BOT}", permission="push")
    call("POST", f"{repo}/labels", name="perf", color="#00ff00", description="faster")
    call("GET", f"{repo}/labels")
    call("GET", f"{repo}/labels/perf")
    call("PATCH", f"{repo}/labels/perf", new_name="performance")
    call("POST", f"{issue}/labels", labels=["performance", "crucible"])
    call("PUT", f"{issue}/labels", labels=["performance", "crucible", "bot"])
    call("GET", f"{issue}/labels")
    call("DELETE", f"{issue}/labels/bot")
    call("DELETE", f"{issue}/labels")
    call("DELETE", f"{repo}/labels/crucible")
    call("GET", f"{repo}/assignees")
    rest.get(f"{repo}/assignees/bob", headers={"Authorization": f"token {forge.tokens['alice']}"})
    call("GET", f"{repo}/assignees/alice")
    call("GET", f"{issue}/assignees/alice")
    call("POST", f"{issue}/assignees", assignees=["alice", "bob"])
    call("DELETE", f"{issue}/assignees", assignees=["bob"])
    call("PATCH", issue, title="Speed up, retitled", labels=["performance"], assignees=["alice"])
    call("GET", f"{repo}/issues", user="bob")
    pulls = f"{repo}/pulls/{number}"
    call("POST", f"{pulls}/requested_reviewers", reviewers=["bob"])
    call("GET", f"{pulls}/requested_reviewers")
    call("DELETE", f"{pulls}/requested_reviewers", reviewers=["bob"])
    call("GET", "/user/repos", user="bob")
    call("GET", f"{repo}/commits")
    call("POST", f"{repo}/statuses/{head}", state="success", context="crucible/p50_ms", description="ok")
    call("GET", f"{repo}/commits/{head}/statuses")
    call("GET", f"{repo}/commits/feature/status")
    run = call("POST", f"{repo}/check-runs", user=BOT, name="crucible", head_sha=head, status="in_progress")
    done = {"title": "p50_ms", "summary": "41.1 -> 10.9"}
    call("PATCH", f"{repo}/check-runs/{run['id']}", user=BOT, conclusion="success", output=done)
    call("GET", f"{repo}/check-runs/{run['id']}")
    call("GET", f"{repo}/commits/{head}/check-runs")


def _matches(template: str, path: str) -> bool:
    return re.match("^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$", path) is not None

"""GitHub's HTTP conventions on the forge: rate-limit headers, ETag/304, Link pagination."""

from __future__ import annotations

import json
import re

from tests.localforge.conftest import Forge


def test_rate_limit_headers_and_endpoint(forge: Forge) -> None:
    requester = forge.gh().requester
    _, first, _ = requester.requestJson("GET", "/user")
    _, second, _ = requester.requestJson("GET", "/user")
    assert first["x-ratelimit-limit"] == "5000" and first["x-ratelimit-resource"] == "core"
    assert int(second["x-ratelimit-used"]) == int(first["x-ratelimit-used"]) + 1
    assert int(second["x-ratelimit-remaining"]) == 5000 - int(second["x-ratelimit-used"])
    assert int(second["x-ratelimit-reset"]) == int(first["x-ratelimit-reset"])
    limits = forge.gh().get_rate_limit()
    assert limits.resources.core.limit == 5000
    assert limits.resources.core.used == int(second["x-ratelimit-used"])  # /rate_limit itself is free
    status, missing, _ = forge.gh().requester.requestJson("GET", "/repos/nobody/nothing")
    assert status == 404 and "x-ratelimit-limit" in missing


def test_etag_answers_304_without_spending_rate_limit(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    pull.create_issue_comment("one")
    requester = forge.gh().requester
    url = f"{pull.base.repo.url}/issues/comments"
    status, headers, body = requester.requestJson("GET", url)
    etag = headers["etag"]
    assert status == 200 and re.fullmatch(r'W/"[0-9a-f]{64}"', etag)
    used = int(headers["x-ratelimit-used"])
    status, again, body304 = requester.requestJson("GET", url, headers={"If-None-Match": etag})
    assert status == 304 and body304 == "" and again["etag"] == etag
    assert int(again["x-ratelimit-used"]) == used
    pull.create_issue_comment("two")
    status, changed, body = requester.requestJson("GET", url, headers={"If-None-Match": etag})
    assert status == 200 and changed["etag"] != etag and len(json.loads(body)) == 2
    status, _, _ = requester.requestJson(
        "GET", f"{pull.base.repo.url}/pulls/1", headers={"If-None-Match": etag}
    )
    assert status == 200  # an ETag belongs to one resource


def test_link_pagination(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    for n in range(5):
        pull.create_issue_comment(f"comment {n}")
    url = f"{pull.base.repo.url}/issues/comments"
    status, headers, body = forge.gh().requester.requestJson("GET", url, parameters={"per_page": 2})
    assert status == 200 and [c["body"] for c in json.loads(body)] == ["comment 0", "comment 1"]
    links = dict(re.findall(r'<([^>]+)>; rel="(\w+)"', headers["link"])[i][::-1] for i in range(2))
    assert links["next"].endswith("page=2") and links["last"].endswith("page=3")
    assert links["next"].startswith(forge.handle.api_url)
    _, middle, _ = forge.gh().requester.requestJson("GET", url, parameters={"per_page": 2, "page": 2})
    assert {rel for _, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', middle["link"])} == {
        "prev",
        "next",
        "last",
        "first",
    }
    paged = forge.gh(per_page=2).get_repo("alice/demo")
    assert [c.body for c in paged.get_issues_comments()] == [f"comment {n}" for n in range(5)]
    assert paged.get_issues_comments().totalCount == 5

"""Fault injection: requests that fail the ways GitHub sometimes does, for clients' tests."""

from __future__ import annotations

import pytest
import requests
from github import GithubException

from controller.localforge.faults import Fault
from tests.localforge.conftest import Forge

PULLS = r"^/api/v3/repos/[^/]+/[^/]+/pulls$"


def test_error_after_the_write_leaves_the_pull_request_created(forge: Forge) -> None:
    repo, _ = forge.repo_with_branch()
    forge.handle.faults.add(Fault("POST", PULLS, "error_after", status=502))
    with pytest.raises(GithubException) as caught:
        repo.create_pull(title="t", body="", head="feature", base="main")
    assert caught.value.status == 502
    assert [p.title for p in repo.get_pulls(head="alice:feature")] == ["t"]
    assert len(forge.handle.faults.fired) == 1


def test_secondary_rate_limit_and_error_before(forge: Forge) -> None:
    repo, _ = forge.repo_with_branch()
    forge.handle.faults.add(Fault("POST", PULLS, "rate_limit", retry_after=7))
    forge.handle.faults.add(Fault("POST", PULLS, "error_before", status=500))
    status, headers, _ = forge.gh().requester.requestJson(
        "POST", f"{repo.url}/pulls", input={"title": "t", "head": "feature", "base": "main"}
    )
    assert (status, headers["retry-after"]) == (403, "7")
    with pytest.raises(GithubException):
        repo.create_pull(title="t", body="", head="feature", base="main")
    assert list(repo.get_pulls()) == []
    assert repo.create_pull(title="t", body="", head="feature", base="main").number == 1  # rules are used up


def test_dropped_connection_after_the_write(forge: Forge) -> None:
    repo, _ = forge.repo_with_branch()
    forge.handle.faults.add(Fault("POST", PULLS, "drop_after"))
    auth = {"Authorization": f"token {forge.tokens['alice']}"}
    with pytest.raises(requests.exceptions.ChunkedEncodingError):  # the answer stops mid-body
        requests.post(
            f"{repo.url}/pulls", json={"title": "t", "head": "feature", "base": "main"}, headers=auth
        )
    assert [p.number for p in repo.get_pulls()] == [1]


def test_faults_over_http_need_a_site_admin(forge: Forge) -> None:
    rule = {"method": "GET", "path": "^/api/v3/user$", "kind": "error_before", "status": 503}
    for user, expected in (("alice", 403), ("admin", 201)):
        status, _, _ = forge.gh(user).requester.requestJson("POST", f"{forge.url}/_forge/faults", input=rule)
        assert status == expected
    status, _, _ = forge.gh().requester.requestJson("GET", "/user")
    assert status == 503

"""The ``github`` adapter against the local forge only: injected faults on ``POST /pulls`` never
yield a second PR, reads are retried as told, writes are spaced, each method costs one REST call,
errors and logs never carry the token, ``git_auth_env`` authenticates a real ``git push``, and team
reviewers are requested on an organization's repository."""

from __future__ import annotations

import base64
import logging
import subprocess
from collections.abc import Callable

import pytest

from controller.forge.auth import ForgeCredentials
from controller.forge.base import ForgeError, ForgeRateLimited
from controller.forge.github import READ_BACKOFF, WRITE_BACKOFF, GithubForge
from controller.localforge.faults import Fault
from controller.localforge.users import add_org, add_team
from tests.conftest import git
from tests.forge.conftest import COLLABORATOR, OWNER, REPO, LocalForge, Sleeps, environ_with

PULLS = r"^/api/v3/repos/alice/demo/pulls$"
HEAD = f"{OWNER}:crucible/run-1"


def create(forge: GithubForge) -> int:
    return forge.create_pull(REPO, head=HEAD, base="main", title="Speed up", body="b").number


def pull_numbers(local: LocalForge) -> list[int]:
    return [p["number"] for p in local.api("GET", f"/repos/{REPO}/pulls", params={"state": "all"}).json()]


@pytest.mark.parametrize("kind", ["error_after", "drop_after"])
def test_a_write_that_succeeded_but_failed_to_answer_is_found_not_repeated(
    local_forge: LocalForge, sleeps: Sleeps, kind: str
) -> None:
    local_forge.push_branch("crucible/run-1", {"a.py": "a\n"})
    local_forge.handle.faults.add(Fault("POST", PULLS, kind, status=502))
    number = create(local_forge.forge(sleeps))
    assert pull_numbers(local_forge) == [number]
    assert local_forge.log.count("POST", "/pulls") == 1  # looked, found, did not post again
    assert sleeps.calls == [WRITE_BACKOFF]


def test_a_write_refused_before_it_happened_is_posted_once_more(
    local_forge: LocalForge, sleeps: Sleeps
) -> None:
    local_forge.push_branch("crucible/run-1", {"a.py": "a\n"})
    local_forge.handle.faults.add(Fault("POST", PULLS, "error_before", status=500))
    number = create(local_forge.forge(sleeps))
    assert local_forge.log.count("POST", "/pulls") == 2
    assert local_forge.log.count("GET", "/pulls") == 1  # the look before the second POST
    assert pull_numbers(local_forge) == [number]
    assert sleeps.calls == [WRITE_BACKOFF]


def test_posting_is_bounded_and_a_later_call_still_yields_one_pull(
    local_forge: LocalForge, sleeps: Sleeps
) -> None:
    local_forge.push_branch("crucible/run-1", {"a.py": "a\n"})
    local_forge.handle.faults.add(Fault("POST", PULLS, "error_before", status=503, times=2))
    forge = local_forge.forge(sleeps)
    with pytest.raises(ForgeError, match="503"):
        create(forge)
    assert local_forge.log.count("POST", "/pulls") == 2
    assert pull_numbers(local_forge) == []
    number = create(forge)
    assert pull_numbers(local_forge) == [number]


def test_no_second_post_without_a_successful_look(local_forge: LocalForge, sleeps: Sleeps) -> None:
    local_forge.push_branch("crucible/run-1", {"a.py": "a\n"})
    local_forge.handle.faults.add(Fault("POST", PULLS, "error_after", status=503))
    local_forge.handle.faults.add(Fault("GET", PULLS, "error_before", status=502, times=3))  # the look fails
    forge = local_forge.forge(sleeps)
    with pytest.raises(ForgeError, match="502"):
        create(forge)
    assert local_forge.log.count("POST", "/pulls") == 1
    number = create(forge)  # a caller's retry: GitHub's 422 "already exists" resolves to the PR
    assert pull_numbers(local_forge) == [number]
    assert local_forge.log.count("POST", "/pulls") == 2


def test_a_secondary_rate_limit_is_waited_out_then_looked_up(local_forge: LocalForge, sleeps: Sleeps) -> None:
    local_forge.push_branch("crucible/run-1", {"a.py": "a\n"})
    local_forge.handle.faults.add(Fault("POST", PULLS, "rate_limit", retry_after=7))
    number = create(local_forge.forge(sleeps))
    assert sleeps.calls == [7.0]
    assert pull_numbers(local_forge) == [number]


def test_a_rate_limit_longer_than_max_wait_is_raised(local_forge: LocalForge, sleeps: Sleeps) -> None:
    local_forge.push_branch("crucible/run-1", {"a.py": "a\n"})
    local_forge.handle.faults.add(Fault("POST", PULLS, "rate_limit", retry_after=600))
    with pytest.raises(ForgeRateLimited) as caught:
        create(local_forge.forge(sleeps, max_wait=60))
    assert caught.value.retry_after == 600
    assert sleeps.calls == []
    assert pull_numbers(local_forge) == []


def test_reads_are_retried_with_backoff_and_as_told(local_forge: LocalForge, sleeps: Sleeps) -> None:
    forge = local_forge.forge(sleeps)
    branch = r"^/api/v3/repos/alice/demo/branches/main$"
    local_forge.handle.faults.add(Fault("GET", branch, "error_before", status=502))
    local_forge.handle.faults.add(Fault("GET", branch, "drop_before"))
    assert forge.branch_sha(REPO, "main") is not None  # 502, then a dropped answer, then success
    assert sleeps.calls == [READ_BACKOFF, 2 * READ_BACKOFF]
    local_forge.handle.faults.add(Fault("GET", branch, "rate_limit", retry_after=3))
    assert forge.branch_sha(REPO, "main") is not None  # a rate limit, then success
    assert sleeps.calls[2:] == [3.0]
    local_forge.handle.faults.add(Fault("GET", branch, "error_before", status=500, times=5))
    with pytest.raises(ForgeError, match="500"):
        forge.branch_sha(REPO, "main")
    assert local_forge.log.count("GET", "/branches/main") == 3 + 2 + 3


def test_writes_are_spaced_by_the_write_interval(local_forge: LocalForge, sleeps: Sleeps) -> None:
    local_forge.push_branch("crucible/run-1", {"a.py": "a\n"})
    forge = local_forge.forge(sleeps, write_interval=1.0)
    number = create(forge)
    assert sleeps.calls == []
    forge.get_pull(REPO, number)  # reads are not spaced
    assert sleeps.calls == []
    forge.update_pull(REPO, number, body="two")
    assert sleeps.calls == [pytest.approx(1.0)]
    sleeps.now += 5
    forge.update_pull(REPO, number, body="three")
    assert len(sleeps.calls) == 1


def test_each_method_costs_one_rest_call(local_forge: LocalForge) -> None:
    local_forge.push_branch("crucible/run-1", {"a.py": "a\n"})
    forge = local_forge.forge()
    calls: list[Callable[[], object]] = [
        lambda: forge.repo(REPO),
        lambda: forge.branch_sha(REPO, "crucible/run-1"),
        lambda: forge.find_pull(REPO, HEAD),
        lambda: create(forge),
        lambda: forge.find_pull(REPO, HEAD),
        lambda: forge.get_pull(REPO, 1),
        lambda: forge.update_pull(REPO, 1, body="x"),
        lambda: forge.permission(REPO, "bob"),
        lambda: forge.git_auth_env(REPO),
    ]
    counts = []
    for call in calls:
        before = len(local_forge.log.seen)
        call()
        counts.append(len(local_forge.log.seen) - before)
    assert counts == [1, 1, 1, 1, 1, 1, 1, 1, 0]


def test_the_token_is_in_no_error_and_no_log(
    local_forge: LocalForge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = local_forge.tokens[OWNER]
    forge = local_forge.forge()
    forge.repo(REPO)
    wrong = GithubForge(local_forge.handle.api_url, ForgeCredentials.for_token("ghp_wrong_token_value"))
    with pytest.raises(ForgeError) as caught:
        wrong.repo(REPO)
    assert "401" in str(caught.value) and "ghp_wrong_token_value" not in str(caught.value)
    assert token not in caplog.text and "ghp_wrong_token_value" not in caplog.text


def test_git_auth_env_pushes_without_the_token_in_argv_or_config(local_forge: LocalForge) -> None:
    token = local_forge.tokens[OWNER]
    forge = local_forge.forge()
    clone_url = forge.repo(REPO).clone_url
    repo = local_forge.work / "publisher"
    git(local_forge.work, "clone", "-q", clone_url, str(repo))  # public: fetching needs no token
    (repo / "speed.py").write_text("fast = True\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=Crucible", "-c", "user.email=c@example.com", "commit", "-q", "-m", "faster")
    argv = ["git", "push", "-q", "origin", "HEAD:refs/heads/crucible/run-2"]
    refused = subprocess.run(argv, cwd=repo, capture_output=True, text=True, env=environ_with({}))
    assert refused.returncode != 0  # without the environment the forge refuses the push
    pushed = subprocess.run(
        argv, cwd=repo, capture_output=True, text=True, env=environ_with(dict(forge.git_auth_env(REPO)))
    )
    assert pushed.returncode == 0, pushed.stderr
    assert forge.branch_sha(REPO, "crucible/run-2") == git(repo, "rev-parse", "HEAD")
    assert all(token not in arg for arg in argv)
    header = forge.git_auth_env(REPO)["GIT_CONFIG_VALUE_0"].split()[-1]
    stored = [p.read_bytes() for p in (repo / ".git").rglob("*") if p.is_file()]
    assert not [b for b in stored if token.encode() in b or header.encode() in b]


@pytest.mark.parametrize("kind", ["error_before", "error_after", "drop_after", "rate_limit"])
def test_a_failed_update_is_never_resent(local_forge: LocalForge, sleeps: Sleeps, kind: str) -> None:
    local_forge.push_branch("crucible/run-1", {"a.py": "a\n"})
    forge = local_forge.forge(sleeps)
    number = create(forge)
    local_forge.handle.faults.add(Fault("PATCH", rf"/pulls/{number}$", kind, status=502, retry_after=5))
    expected = ForgeRateLimited if kind == "rate_limit" else ForgeError
    with pytest.raises(expected):
        forge.update_pull(REPO, number, body="new")
    assert local_forge.log.count("PATCH", f"/pulls/{number}") == 1
    assert sleeps.calls == []


def test_team_reviewers_are_requested_on_an_org_repository_and_an_unknown_team_is_refused(
    local_forge: LocalForge,
) -> None:
    root = local_forge.handle.root
    add_org(root, "acme", [OWNER])
    add_team(root, "acme", "perf-team", [COLLABORATOR], name="Performance")
    local_forge.api("POST", "/orgs/acme/repos", json={"name": "lib", "auto_init": True})
    main = local_forge.api("GET", "/repos/acme/lib/branches/main").json()["commit"]["sha"]
    local_forge.api(
        "POST", "/repos/acme/lib/git/refs", json={"ref": "refs/heads/crucible/run-1", "sha": main}
    )
    content = base64.b64encode(b"fast\n").decode()
    body = {"message": "faster", "content": content, "branch": "crucible/run-1"}
    local_forge.api("PUT", "/repos/acme/lib/contents/a.py", json=body)
    forge = local_forge.forge()
    number = forge.create_pull(
        "acme/lib", head="acme:crucible/run-1", base="main", title="t", body="b"
    ).number

    process = forge.team_process()
    first = process.request_reviewers("acme/lib", number, [], ["perf-team"])
    again = process.request_reviewers("acme/lib", number, [], ["perf-team"])
    unknown = process.request_reviewers("acme/lib", number, [], ["no-such-team"])

    assert (first.done, first.refused) == (("team:perf-team",), ())
    assert again.done == ("team:perf-team",)
    assert unknown.done == () and [name for name, _ in unknown.refused] == ["team:no-such-team"]
    teams = local_forge.api("GET", f"/repos/acme/lib/pulls/{number}/requested_reviewers").json()["teams"]
    assert [t["slug"] for t in teams] == ["perf-team"]

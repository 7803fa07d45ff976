"""Commits, commit statuses and check runs through PyGithub: the commit list and the status
routes answer as GitHub does (no trailing-slash redirect read as a ref), statuses combine per
context, and only a GitHub App (a ``[bot]`` account) creates and updates check runs."""

from __future__ import annotations

import httpx
import pytest
from github import GithubException

from tests.conftest import git
from tests.localforge.conftest import BOT, Forge


def test_the_commit_list_and_trailing_slashes_answer_as_github(forge: Forge) -> None:
    _, checkout = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    main, feature = git(checkout, "rev-parse", "main"), git(checkout, "rev-parse", "feature")
    assert [c.sha for c in repo.get_commits()] == [main]  # the default branch
    assert [c.sha for c in repo.get_commits(sha="feature")] == [feature, main]
    assert [c.sha for c in repo.get_commits(sha="feature", path="app.py")] == [feature]
    with httpx.Client(base_url=forge.handle.api_url, timeout=30) as rest:
        auth = {"Authorization": f"token {forge.tokens['alice']}"}
        for path in ("/repos/alice/demo/commits/", "/user/", f"/repos/alice/demo/commits/{main}/status/"):
            answer = rest.get(path, headers=auth)
            assert answer.status_code == 200, (path, answer.status_code, answer.text)
        assert rest.get("/repos/alice/demo/commits?sha=nope", headers=auth).status_code == 404


def test_statuses_combine_per_context(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    commit = repo.get_commit(pull.head.sha)
    assert commit.get_combined_status().state == "pending" and commit.get_combined_status().total_count == 0
    commit.create_status("pending", description="measuring", context="crucible/p50_ms")
    commit.create_status("success", "http://runs/1", "p50_ms 41.1 -> 10.9 (-73.5%)", "crucible/p50_ms")
    commit.create_status("success", context="ci")
    combined = repo.get_commit("feature").get_combined_status()  # a branch names the same commit
    assert combined.state == "success" and combined.sha == pull.head.sha
    assert [(s.context, s.state) for s in combined.statuses] == [
        ("crucible/p50_ms", "success"),
        ("ci", "success"),
    ]
    assert [s.state for s in commit.get_statuses()] == ["success", "success", "pending"]  # newest first
    listed = commit.get_statuses()[1]
    assert (listed.target_url, listed.creator.login) == ("http://runs/1", "alice")
    commit.create_status("failure", context="ci")
    assert commit.get_combined_status().state == "failure"
    with pytest.raises(GithubException) as long:
        commit.create_status("success", description="x" * 141)
    assert long.value.data["errors"][0]["message"] == "description is too long (maximum is 140 characters)"
    with pytest.raises(GithubException) as state:
        commit.create_status("done")
    assert state.value.status == 422
    with pytest.raises(GithubException) as reader:
        forge.gh("carol").get_repo("alice/demo").get_commit(pull.head.sha).create_status("success")
    assert reader.value.status == 403


def test_only_a_github_app_runs_checks(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    repo.add_to_collaborators(BOT, "push")
    with pytest.raises(GithubException) as person:
        repo.create_check_run("crucible", pull.head.sha)
    assert (person.value.status, person.value.data["message"]) == (
        403,
        "You must authenticate via a GitHub App.",
    )

    app_repo = forge.gh(BOT).get_repo("alice/demo")
    run = app_repo.create_check_run("crucible", pull.head.sha, status="in_progress")
    assert (run.status, run.conclusion, run.app.slug) == ("in_progress", None, "ci")
    assert [p.number for p in run.pull_requests] == [pull.number]
    table = "| sample | value |\n|---|---|\n| 1 | 10.9 |"
    run.edit(conclusion="success", output={"title": "p50_ms 41.1 -> 10.9", "summary": "kept", "text": table})
    again = repo.get_check_run(run.id)
    assert (again.status, again.conclusion, again.output.text) == ("completed", "success", table)
    assert again.completed_at is not None
    app_repo.create_check_run("crucible", pull.head.sha, conclusion="neutral")  # a re-run: latest counts
    runs = repo.get_commit(pull.head.sha).get_check_runs()
    assert [(r.name, r.conclusion) for r in runs] == [("crucible", "neutral")]
    assert runs.totalCount == 1
    assert len(list(repo.get_commit(pull.head.sha).get_check_runs(filter="all"))) == 2
    with pytest.raises(GithubException) as unconcluded:
        app_repo.create_check_run("other", pull.head.sha, status="completed")
    assert unconcluded.value.status == 422
    with pytest.raises(GithubException) as person_edit:
        repo.get_check_run(run.id).edit(name="mine")
    assert person_edit.value.status == 403

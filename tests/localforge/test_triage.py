"""Labels, assignees, requested reviewers and issue edits, through PyGithub as a PR bot uses them,
with GitHub's rules for who may do what and the webhooks GitHub sends."""

from __future__ import annotations

from typing import Any

import pytest
from github import GithubException

from tests.localforge.conftest import Forge, ForgeStarter, Receiver


def _events(forge: Forge, receiver: Receiver) -> list[tuple[str, str, dict[str, Any]]]:
    assert forge.handle.flush_webhooks()
    return [(d.event, d.payload.get("action", ""), d.payload) for d in receiver.drain()]


def test_labels_go_on_and_off_a_pull_request(forge_factory: ForgeStarter, receiver: Receiver) -> None:
    forge = forge_factory(webhook_url=receiver.url, webhook_secret="s")
    pull, _ = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    created = repo.create_label("perf", "#FF8800", "makes it faster")
    assert (created.name, created.color, created.description) == ("perf", "ff8800", "makes it faster")
    _events(forge, receiver)

    pull.add_to_labels("perf", "crucible")  # PyGithub sends a bare JSON array; "crucible" is created
    assert sorted(lb.name for lb in pull.get_labels()) == ["crucible", "perf"]
    assert repo.get_label("crucible").color == "ededed"
    pull.set_labels("perf", "bot")
    pull.remove_from_labels("perf")
    assert [lb.name for lb in repo.get_pull(pull.number).labels] == ["bot"]
    assert [lb.name for lb in repo.get_issue(pull.number).labels] == ["bot"]
    actions = [(a, p["label"]["name"]) for e, a, p in _events(forge, receiver) if e == "pull_request"]
    assert actions == [
        ("labeled", "perf"),
        ("labeled", "crucible"),
        ("unlabeled", "crucible"),
        ("labeled", "bot"),
        ("unlabeled", "perf"),
    ]
    with pytest.raises(GithubException) as missing:
        pull.remove_from_labels("perf")
    assert missing.value.status == 404 and missing.value.data["message"] == "Label does not exist"


def test_label_rules_are_githubs(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    with pytest.raises(GithubException) as long_name:
        repo.create_label("x" * 51, "ffffff")
    assert long_name.value.status == 422
    assert long_name.value.data["errors"][0]["message"] == "name is too long (maximum is 50 characters)"
    repo.create_label("perf", "ffffff")
    with pytest.raises(GithubException) as taken:
        repo.create_label("PERF", "000000")
    assert taken.value.data["errors"] == [{"resource": "Label", "code": "already_exists", "field": "name"}]
    with pytest.raises(GithubException) as color:
        repo.create_label("other", "blue")
    assert color.value.data["errors"][0]["field"] == "color"
    with pytest.raises(GithubException) as on_issue:
        pull.add_to_labels("y" * 51)
    assert on_issue.value.data["errors"][0]["code"] == "invalid"
    reader = forge.gh("carol").get_repo("alice/demo")
    with pytest.raises(GithubException) as forbidden:
        reader.get_pull(pull.number).add_to_labels("perf")
    assert forbidden.value.status == 403
    label = repo.get_label("perf")
    label.edit("performance", "00ff00", "renamed")
    assert [lb.name for lb in repo.get_labels()] == ["performance"]
    label.delete()
    assert list(repo.get_labels()) == []


def test_review_requests_follow_githubs_rules(forge_factory: ForgeStarter, receiver: Receiver) -> None:
    forge = forge_factory(webhook_url=receiver.url, webhook_secret="s")
    pull, _ = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    repo.add_to_collaborators("bob", "push")
    _events(forge, receiver)
    pull.create_review_request(reviewers=["bob"])
    pull.create_review_request(reviewers=["bob"])  # requested once: no second webhook
    users, teams = pull.get_review_requests()
    assert [u.login for u in users] == ["bob"] and list(teams) == []
    assert [u.login for u in repo.get_pull(pull.number).requested_reviewers] == ["bob"]
    with pytest.raises(GithubException) as outsider:
        pull.create_review_request(reviewers=["carol"])  # may read the public repo, no more
    assert outsider.value.status == 422
    assert outsider.value.data["message"].startswith("Reviews may only be requested from collaborators.")
    with pytest.raises(GithubException) as author:
        pull.create_review_request(reviewers=["alice"])
    assert author.value.data["message"] == "Review cannot be requested from pull request author."

    forge.gh("bob").get_repo("alice/demo").get_pull(pull.number).create_review(event="APPROVE")
    assert list(repo.get_pull(pull.number).requested_reviewers) == []  # the review answered it
    pull.create_review_request(reviewers=["bob"])
    pull.delete_review_request(reviewers=["bob"])
    shown = [(a, p["requested_reviewer"]["login"]) for _, a, p in _events(forge, receiver) if "request" in a]
    assert shown == [
        ("review_requested", "bob"),
        ("review_requested", "bob"),
        ("review_request_removed", "bob"),
    ]


def test_teams_of_the_owning_organization_can_be_requested(forge: Forge) -> None:
    repo = forge.team_repo_with_feature()
    pull = repo.create_pull(title="t", body="b", head="feature", base="main")
    pull.create_review_request(team_reviewers=["perf-team"])
    users, teams = pull.get_review_requests()
    assert list(users) == [] and [(t.slug, t.name) for t in teams] == [("perf-team", "Performance")]
    assert [t.slug for t in repo.get_pull(pull.number).requested_teams] == ["perf-team"]
    with pytest.raises(GithubException) as unknown:
        pull.create_review_request(team_reviewers=["nobody"])
    assert unknown.value.status == 422
    pull.delete_review_request(team_reviewers=["perf-team"])
    assert list(pull.get_review_requests()[1]) == []


def test_assignees_are_writers_and_others_are_dropped(
    forge_factory: ForgeStarter, receiver: Receiver
) -> None:
    forge = forge_factory(webhook_url=receiver.url, webhook_secret="s")
    pull, _ = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    repo.add_to_collaborators("bob", "push")
    repo.add_to_collaborators("carol", "triage")
    _events(forge, receiver)
    assert sorted(u.login for u in repo.get_assignees()) == ["alice", "bob"]
    assert repo.has_in_assignees("bob") and not repo.has_in_assignees("carol")
    issue = repo.get_issue(pull.number)
    issue.add_to_assignees("bob", "carol")  # carol cannot be assigned: silently dropped
    assert [u.login for u in repo.get_pull(pull.number).assignees] == ["bob"]
    assert repo.get_issue(pull.number).raw_data["assignee"]["login"] == "bob"
    issue.remove_from_assignees("bob")
    issue.edit(assignees=["alice", "bob"])
    assert [u.login for u in repo.get_issue(pull.number).assignees] == ["alice", "bob"]
    forge.gh("carol").get_repo("alice/demo").get_issue(pull.number).edit(assignees=[])  # no write: dropped
    assert len(repo.get_issue(pull.number).assignees) == 2
    actions = [(a, p["assignee"]["login"]) for e, a, p in _events(forge, receiver) if "assign" in a]
    assert actions == [("assigned", "bob"), ("unassigned", "bob"), ("assigned", "alice"), ("assigned", "bob")]


def test_issue_edits_and_listing(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    issue = repo.get_issue(pull.number)
    issue.edit(title="Faster router", body="measured", labels=["perf"], assignees=["alice"])
    again = repo.get_pull(pull.number)
    assert (again.title, again.body, [lb.name for lb in again.labels]) == (
        "Faster router",
        "measured",
        ["perf"],
    )
    assert [i.number for i in repo.get_issues()] == [pull.number]
    assert [i.number for i in repo.get_issues(labels=[repo.get_label("perf")])] == [pull.number]
    assert list(repo.get_issues(assignee="none")) == []
    assert [i.number for i in repo.get_issues(assignee="alice")] == [pull.number]
    assert all(i.pull_request is not None for i in repo.get_issues())
    issue.edit(state="closed")
    assert repo.get_pull(pull.number).state == "closed"
    assert list(repo.get_issues()) == [] and len(list(repo.get_issues(state="closed"))) == 1


def test_user_repos_lists_owned_collaborating_and_organization_repos(forge: Forge) -> None:
    forge.repo_with_branch("demo")
    forge.gh().get_repo("alice/demo").add_to_collaborators("bob", "push")
    forge.gh("bob").get_user().create_repo("own")
    assert [r.full_name for r in forge.gh("bob").get_user().get_repos()] == ["alice/demo", "bob/own"]
    assert [r.full_name for r in forge.gh("bob").get_user().get_repos(type="owner")] == ["bob/own"]
    assert [r.full_name for r in forge.gh("carol").get_user().get_repos()] == []

"""A published PR fits the team's review process, checked as people see it: through PyGithub against
the local forge over real HTTP, and git on a clone of the PR branch.

Labels, the review request and the assignee arrive once (a person's removal sticks across later
pushes), a reviewer and an assignee the forge refuses are reported, not fatal; the title follows the
template and the improving result; every commit is the configured author's, with a Conventional
Commits header and a DCO sign-off; each pushed head carries its measurement as a commit status.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from github.Repository import Repository

from controller.config.spec import load_spec
from controller.domain.enums import EventKind
from controller.forge.auth import ForgeCredentials
from controller.forge.github import GithubForge
from controller.localforge.faults import Fault
from controller.localforge.users import add_user
from controller.services.execution.loop import run_loop
from controller.services.execution.runs import open_context
from controller.services.feedback.publish import Publisher, branch_name
from controller.services.views.reads import run_view
from controller.services.views.schemas import dump
from tests.conftest import git
from tests.forgekit import (
    TOKENS,
    PublishingRun,
    clone_as,
    component_toml,
    create_publishing_run,
    spec_toml,
    write_agent,
    write_spec,
)
from tests.publish.test_publish import World

pytestmark = pytest.mark.slow

TEAM = """\
labels = ["performance", "bot"]
reviewers = ["bob", "mallory"]
assignees = ["bob", "mallory"]
title = "{objective}: {metric} {baseline} → {value} ({improvement})"
conventional = true
signoff = true
author = { name = "Perf Bot", email = "perf-bot@example.com" }
"""


def test_a_pr_fits_the_teams_process_and_carries_its_measurement(world: World, tmp_path: Path) -> None:
    store, run_id = world.run(extra=TEAM)
    repo = world.github.get_repo("alice/app")
    [listed] = world.pulls(run_id)
    pr = repo.get_pull(listed.number)  # type: ignore[attr-defined]

    assert pr.title == "perf(app): lower the value: value 10 → 5 (\u221250.0%)"  # retitled after turn 3
    assert sorted(label.name for label in pr.labels) == ["bot", "performance"]
    users, teams = pr.get_review_requests()
    assert [u.login for u in users] == ["bob"] and list(teams) == []
    assert [a.login for a in pr.assignees] == ["bob"]

    view = dump(run_view(world.settings, store, run_id))
    problems = view["pull_requests"][0]["problems"]
    assert len(problems) == 2, problems
    assert problems[0].startswith("reviewer mallory was refused: 422") and "collaborators" in problems[0]
    assert problems[1].startswith("assignee mallory was refused")
    refused = [e.payload["refused"] for e in store.list_events(run_id) if "refused" in e.payload]
    assert refused == [problems]  # reported once, at the first publish

    statuses = list(repo.get_commit(pr.head.sha).get_statuses())
    assert [(s.context, s.state, s.description) for s in statuses] == [
        ("crucible/value", "success", "value 10 \u2192 5 (\u221250.0%)")
    ]
    first = next(c.sha for c in pr.get_commits())  # turn 1's keep, pushed and reported on its own
    assert [s.description for s in repo.get_commit(first).get_statuses()] == [
        "value 10 \u2192 8 (\u221220.0%)"
    ]

    clone = clone_as("bob", world.handle.url + "/alice/app.git", tmp_path / "bob-clone")
    git(clone, "fetch", "-q", "origin", branch_name(run_id))
    log = git(
        clone, "log", "--format=%an <%ae>|%cn|%s|%(trailers:key=Signed-off-by,valueonly)", "main..FETCH_HEAD"
    )
    bot = "Perf Bot <perf-bot@example.com>"
    assert [line for line in log.splitlines() if line] == [
        f"{bot}|Perf Bot|perf(app): set value for turn 3|{bot}",
        f"{bot}|Perf Bot|perf(app): set value for turn 1|{bot}",
    ]


def test_the_process_is_applied_once_and_a_persons_changes_stick(world: World) -> None:
    store, run_id = world.run(turns=1, extra=TEAM)
    repo = world.github.get_repo("alice/app")
    [listed] = world.pulls(run_id)
    pr = repo.get_pull(listed.number)  # type: ignore[attr-defined]
    pr.remove_from_labels("bot")  # alice changes her mind about one label, a request and the title
    pr.delete_review_request(reviewers=["bob"])
    pr.edit(title="Speed up the value (alice's words)")
    ctx = open_context(
        world.settings, store, run_id, load_spec(world.tmp / "crucible.toml"), environ=dict(os.environ)
    )

    Publisher(world.client, store).publish(ctx)
    Publisher(world.client, store).publish(ctx)

    pr = repo.get_pull(pr.number)
    assert [label.name for label in pr.labels] == ["performance"]
    assert [u.login for u in pr.get_review_requests()[0]] == []
    assert pr.title == "Speed up the value (alice's words)"
    assert len([e for e in store.list_events(run_id) if "refused" in e.payload]) == 1
    assert len(list(repo.get_commit(pr.head.sha).get_statuses())) == 1  # one status per head


# Turn 2's agent plays alice between two pushes: she drops the "bot" label and bob's review request
# on the PR turn 1 opened. Turn 3's keep is then pushed to the same PR.
PERSON_BETWEEN_PUSHES = """\
case "$CRUCIBLE_TURN" in
  1) echo 8 > src/value.txt ;;
  2) python3 {person}; echo 12 > src/value.txt ;;
  3) echo 5 > src/value.txt ;;
esac
echo "HYPOTHESIS: set value for turn $CRUCIBLE_TURN"
"""
PERSON = """\
import json, urllib.request
def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request({api!r} + path, data=data, method=method)
    request.add_header("Authorization", "token {token}")
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read() or b"null")
[pull] = call("GET", "/repos/alice/app/pulls")
number = pull["number"]
call("DELETE", f"/repos/alice/app/pulls/{{number}}/requested_reviewers", {{"reviewers": ["bob"]}})
call("DELETE", f"/repos/alice/app/issues/{{number}}/labels/bot")
"""


def test_a_later_push_requests_nothing_again(world: World) -> None:
    person = world.tmp / "person.py"
    person.write_text(PERSON.format(api=world.handle.api_url, token=TOKENS["alice"]))
    write_agent(world.tmp, PERSON_BETWEEN_PUSHES.format(person=person))
    store, run_id = world.run(extra=TEAM)
    repo = world.github.get_repo("alice/app")
    [listed] = world.pulls(run_id)
    pr = repo.get_pull(listed.number)  # type: ignore[attr-defined]

    messages = [c.commit.message.splitlines()[0] for c in pr.get_commits()]
    assert messages == ["perf(app): set value for turn 1", "perf(app): set value for turn 3"]
    assert [label.name for label in pr.labels] == ["performance"]  # "bot" stays off
    assert [u.login for u in pr.get_review_requests()[0]] == []  # bob is not asked again
    assert [a.login for a in pr.assignees] == ["bob"]
    assert len([e for e in store.list_events(run_id) if "refused" in e.payload]) == 1
    assert pr.title.endswith("value 10 \u2192 5 (\u221250.0%)")  # the push after it did update the PR


def test_status_off_reports_nothing_and_no_keys_change_nothing(world: World) -> None:
    store, run_id = world.run(turns=1, extra='status = "off"\n')
    repo = world.github.get_repo("alice/app")
    [listed] = world.pulls(run_id)
    pr = repo.get_pull(listed.number)  # type: ignore[attr-defined]
    assert list(repo.get_commit(pr.head.sha).get_statuses()) == []
    assert list(pr.labels) == [] and [a.login for a in pr.assignees] == []
    assert pr.title == "crucible: Lower the value (value 10 → 8) [app]"
    assert [c.commit.author.name for c in pr.get_commits()] == ["crucible"]
    assert dump(run_view(world.settings, store, run_id))["pull_requests"][0]["problems"] == []


BOT_TOKEN = "tok-crucible-bot-0123456789"


def _app_run(world: World) -> tuple[Repository, GithubForge, PublishingRun]:
    """A run asking for check runs, publishing with the crucible App's token: on the local forge a
    "[bot]" account's token acts for its GitHub App, as an installation token."""
    add_user(world.handle.root, "crucible[bot]", token=BOT_TOKEN)
    repo = world.github.get_repo("alice/app")
    repo.add_to_collaborators("crucible[bot]", permission="push")
    client = GithubForge(world.handle.api_url, ForgeCredentials.for_token(BOT_TOKEN), write_interval=0)
    text = spec_toml(
        agent=world.tmp / "agent.sh",
        api_url=world.handle.api_url,
        components=[component_toml("app", "repo")],
        tail='status = "check-run"\n',
    )
    return repo, client, create_publishing_run(world.settings, client, write_spec(world.tmp, text))


def test_an_app_reports_a_check_run_with_the_samples_once(world: World) -> None:
    repo, client, run = _app_run(world)
    publisher = Publisher(client, run.store, dashboard_url="https://crucible.example/")
    run_loop(run.context(publisher), leases=run.store)
    publisher.publish(run.context())  # again: nothing new

    [listed] = world.pulls(run.run_id)
    head = repo.get_pull(listed.number).head.sha  # type: ignore[attr-defined]
    [check] = list(repo.get_commit(head).get_check_runs())
    assert (check.name, check.status, check.conclusion) == ("crucible/value", "completed", "success")
    assert check.output.title == "value 10 \u2192 8 (\u221220.0%)"
    assert "| baseline | 10 | 10 |" in check.output.text and "| candidate | 8 | 8 |" in check.output.text
    assert check.details_url == f"https://crucible.example/runs/{run.run_id}"
    assert list(repo.get_commit(head).get_statuses()) == []


def test_a_check_run_refused_to_a_person_becomes_a_status_and_says_so(world: World) -> None:
    store, run_id = world.run(turns=1, extra='status = "check-run"\n')
    repo = world.github.get_repo("alice/app")
    [listed] = world.pulls(run_id)
    head = repo.get_pull(listed.number).head.sha  # type: ignore[attr-defined]

    assert [(s.context, s.state) for s in repo.get_commit(head).get_statuses()] == [
        ("crucible/value", "success")
    ]
    [problem] = dump(run_view(world.settings, store, run_id))["pull_requests"][0]["problems"]
    assert problem.startswith("check runs were refused") and "403" in problem


def test_a_mark_the_forge_failed_to_take_is_made_at_the_next_publish(world: World) -> None:
    store, run_id = world.run(turns=1)
    repo = world.github.get_repo("alice/app")
    [listed] = world.pulls(run_id)
    head = repo.get_pull(listed.number).head.sha  # type: ignore[attr-defined]
    # A refinement round that kept nothing, recorded as the round's end records it.
    summary = {"round": 1, "component": "app", "feedback": [], "kept": False, "head": None}
    store.append_event(run_id, EventKind.ROUND_FINISHED, {**summary, "detail": "not held: value 9 > 8"})
    world.handle.faults.add(Fault("POST", r"/statuses/", "error_before", status=502, times=50))

    Publisher(world.client, store).publish(world.context(store, run_id))  # the forge is down for statuses
    assert [s.context for s in repo.get_commit(head).get_statuses()] == ["crucible/value"]
    assert world.handle.faults.fired, "the mark was attempted"

    world.handle.faults.clear()
    Publisher(world.client, store).publish(world.context(store, run_id))  # the next publish makes it
    Publisher(world.client, store).publish(world.context(store, run_id))  # and only once
    marks = [(s.context, s.state, s.description) for s in repo.get_commit(head).get_statuses()]
    assert marks == [
        (
            "crucible/value/refinement",
            "failure",
            "round 1 could not hold the score; nothing was pushed: not held: value 9 > 8",
        ),
        ("crucible/value", "success", marks[1][2]),
    ]


def test_a_tested_keep_shows_its_p_value_and_links_the_run_page(world: World) -> None:
    # Five samples a measurement and a 95% keep rule: the keep is decided by the test, whose p-value
    # the status carries; with the dashboard's address known, the status links to the run's page.
    text = (
        spec_toml(
            agent=world.tmp / "agent.sh",
            api_url=world.handle.api_url,
            components=[component_toml("app", "repo")],
        )
        .replace("samples = 1", "samples = 5")
        .replace("confidence = 0\n", "confidence = 0.95\n")
    )
    run = create_publishing_run(world.settings, world.client, write_spec(world.tmp, text))
    publisher = Publisher(world.client, run.store, dashboard_url="https://crucible.example/")
    run_loop(run.context(publisher), leases=run.store)

    [listed] = world.pulls(run.run_id)
    repo = world.github.get_repo("alice/app")
    head = repo.get_pull(listed.number).head.sha  # type: ignore[attr-defined]
    [status] = list(repo.get_commit(head).get_statuses())
    assert (status.context, status.state) == ("crucible/value", "success")
    assert status.description.startswith("value 10 \u2192 8 (\u221220.0%, p = "), status.description
    p_value = float(status.description.rsplit("p = ", 1)[1].rstrip(")"))
    assert 0 < p_value < 0.05
    assert status.target_url == f"https://crucible.example/runs/{run.run_id}"


def test_with_an_app_an_unheld_round_is_a_neutral_check_run_on_the_head_it_left(world: World) -> None:
    repo, client, run = _app_run(world)
    run_loop(run.context(Publisher(client, run.store)), leases=run.store)
    [listed] = world.pulls(run.run_id)
    head = repo.get_pull(listed.number).head.sha  # type: ignore[attr-defined]
    # A refinement round that kept nothing, recorded as the round's end records it.
    summary = {"round": 1, "component": "app", "feedback": [], "kept": False, "head": None}
    run.store.append_event(run.run_id, EventKind.ROUND_FINISHED, {**summary, "detail": "value 9 > 8"})

    Publisher(client, run.store).publish(run.context())
    Publisher(client, run.store).publish(run.context())  # once per round

    runs = sorted(repo.get_commit(head).get_check_runs(), key=lambda c: c.name)
    assert [(c.name, c.status, c.conclusion) for c in runs] == [
        ("crucible/value", "completed", "success"),
        ("crucible/value/refinement", "completed", "neutral"),
    ]
    assert runs[1].output.title == "round 1 could not hold the score; nothing was pushed: value 9 > 8"
    left = repo.get_pull(listed.number).head.sha  # type: ignore[attr-defined]
    assert left == head  # the round replaced nothing: the mark is on the head it left in place
    assert list(repo.get_commit(head).get_statuses()) == []


def test_the_commit_message_template_shapes_every_pushed_commit(world: World) -> None:
    template = (
        'commit_message = "{hypothesis} [{component}]\\n\\n{metric}: {baseline} -> {value}, turn {turn}"\n'
    )
    _, run_id = world.run(extra=template + 'author = { name = "Perf Bot", email = "perf-bot@example.com" }\n')
    repo = world.github.get_repo("alice/app")
    [listed] = world.pulls(run_id)
    commits = list(repo.get_pull(listed.number).get_commits())  # type: ignore[attr-defined]
    assert [c.commit.message for c in commits] == [  # as written: no "crucible:" prefix added
        "set value for turn 1 [app]\n\nvalue: 10 -> 8, turn 1",
        "set value for turn 3 [app]\n\nvalue: 10 -> 5, turn 3",
    ]
    assert {(c.commit.author.name, c.commit.author.email) for c in commits} == {
        ("Perf Bot", "perf-bot@example.com")
    }

"""A person's push to a crucible PR branch joins the PR's lineage (issue 14, ADR-0002 §5).

A two-component run (alpha + beta, the metric is their sum) publishes alpha's draft PR after turn 1;
then bob, a collaborator with push access, commits to that branch. Later champions are applied
three-way onto bob's commit, re-measured there and pushed as fast-forwards; a conflict pushes
nothing and says ``needs merge``; a resumed run keeps building on the same lineage. Everything is
real: the local forge over HTTP, PyGithub, git pushes and fetches.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from github import Github

from controller.cli.main import cli
from controller.domain.enums import EventKind
from controller.localforge.server import ForgeHandle
from controller.services.execution.context import RunContext
from controller.services.execution.loop import run_loop
from controller.services.feedback.publish import Publisher, branch_name
from controller.services.views.reads import run_view
from controller.services.views.schemas import dump
from controller.wiring import build
from tests.conftest import git, make_repo
from tests.forgekit import (
    PublishingRun,
    clone_as,
    commit_and_push,
    component_toml,
    forge_with_users,
    git_as,
    github_as,
    host_repo,
    spec_toml,
    start_run,
    write_agent,
)

pytestmark = pytest.mark.slow

AGENT = """\
case "$CRUCIBLE_TURN" in
  1) echo 45 > alpha/src/value.txt ;;
  2) echo 43 > alpha/src/value.txt ;;
  3) echo 41 > alpha/src/value.txt ;;
esac
echo "HYPOTHESIS: lower alpha for turn $CRUCIBLE_TURN"
"""

SUM = "echo METRIC value=$(( $(cat alpha/src/value.txt) + $(cat beta/src/value.txt) ))"


@dataclass
class Team:
    tmp: Path
    handle: ForgeHandle
    github: Github

    def start(self, turns: int) -> tuple[PublishingRun, Publisher]:
        spec = spec_toml(
            objective="Lower alpha plus beta",
            agent=write_agent(self.tmp, AGENT),
            api_url=self.handle.api_url,
            components=[component_toml("alpha", "alpha"), component_toml("beta", "beta")],
            turns=turns,
            metric=SUM,
        )
        run = start_run(self.tmp, self.handle.api_url, spec)
        return run, Publisher(run.client, run.store)

    def bob_commits(self, branch: str, path: str, text: str) -> str:
        """Bob clones alpha, adds a commit to the PR branch and pushes it (no force)."""
        work = clone_as("bob", f"{self.handle.url}/alice/alpha.git", self.tmp / "bob")
        git(work, "checkout", "-q", branch)
        (work / path).write_text(text)
        return commit_and_push(work, "bob", branch, "bob's note")

    def fetch(self, branch: str) -> Path:
        """Bob's clone with ``branch`` fetched as ``origin/<branch>``, as anyone would see it."""
        work = self.tmp / "bob"
        git_as("bob", work, "fetch", "-q", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}")
        return work

    def branch_file(self, branch: str, path: str) -> str:
        """``path`` at the head of ``branch`` on the forge."""
        return git(self.fetch(branch), "show", f"origin/{branch}:{path}")

    def descends(self, branch: str, ancestor: str) -> bool:
        """Whether the head of ``branch`` on the forge descends from ``ancestor``."""
        args = ["git", "merge-base", "--is-ancestor", ancestor, f"origin/{branch}"]
        return subprocess.run(args, cwd=self.fetch(branch), capture_output=True).returncode == 0


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    with forge_with_users(tmp_path / "forge") as handle, github_as(handle.api_url, "alice") as github:
        host_repo(
            github, make_repo(tmp_path / "alpha", {"src/value.txt": "50\n"}), "alpha", collaborator="bob"
        )
        host_repo(github, make_repo(tmp_path / "beta", {"src/value.txt": "40\n"}), "beta")
        yield Team(tmp_path, handle, github)


def after_first_publish(
    publisher: Publisher, act: Callable[[RunContext], None]
) -> Callable[[RunContext], None]:
    """Publish as usual, and run ``act`` once, right after the first publish that opened a PR."""
    done: list[bool] = []

    def publish(ctx: RunContext) -> None:
        records = publisher.publish(ctx)
        if records and not done:
            done.append(True)
            act(ctx)

    return publish


def test_a_later_champion_is_built_on_the_collaborators_commit_and_pushed(team: Team) -> None:
    run, publisher = team.start(turns=2)
    branch = branch_name(run.run_id)
    pushed: dict[str, str] = {}

    def bob_adds_a_note(ctx: RunContext) -> None:
        pushed["bob"] = team.bob_commits(branch, "src/NOTE.md", "a note from bob\n")

    ctx = run.context(on_champion=after_first_publish(publisher, bob_adds_a_note))
    result = run_loop(ctx, leases=run.store)

    assert result.stop_reason == "max_turns", result.message
    bobs = pushed["bob"]
    repo = team.github.get_repo("alice/alpha")
    head = repo.get_branch(branch).commit
    assert team.descends(branch, bobs), "pushed as a fast-forward: bob's commit is kept"
    assert team.branch_file(branch, "src/NOTE.md") == "a note from bob"
    assert team.branch_file(branch, "src/value.txt") == "43"
    view = dump(run_view(run.settings, run.store, run.run_id, with_diffs=False))
    assert view["best"]["value"] == 83.0
    [pull] = view["pull_requests"]
    assert (pull["component"], pull["head_sha"], pull["published_value"], pull["note"]) == (
        "alpha",
        head.sha,
        83.0,
        None,
    )
    built = [e for e in run.store.list_events(run.run_id) if e.kind == EventKind.BUILT_ON_ADOPTED]
    assert [(e.payload["adopted"], e.payload["head"], e.payload["value"]) for e in built] == [
        (bobs, head.sha, 83.0)
    ]
    assert [p.sha for p in head.parents] == [bobs, built[0].payload["champion"]]
    body = repo.get_pull(pull["number"]).body or ""
    assert f"built on Bob's commit {bobs[:12]}" in body
    assert [c.name for c in run.store.list_components(run.run_id)] == ["alpha", "beta"]
    assert not list(team.github.get_repo("alice/beta").get_pulls(state="all")), "beta never changed"


def test_a_conflict_with_the_collaborator_pushes_nothing_says_needs_merge_and_the_run_goes_on(
    team: Team,
) -> None:
    run, publisher = team.start(turns=3)
    branch = branch_name(run.run_id)
    pushed: dict[str, str] = {}

    def bob_edits_the_value(ctx: RunContext) -> None:
        pushed["bob"] = team.bob_commits(branch, "src/value.txt", "44\n")

    ctx = run.context(on_champion=after_first_publish(publisher, bob_edits_the_value))
    result = run_loop(ctx, leases=run.store)

    assert result.stop_reason == "max_turns", result.message
    view = dump(run_view(run.settings, run.store, run.run_id, with_diffs=False))
    assert [t["outcome"] for t in view["turns"]] == ["accepted", "accepted", "accepted"]
    assert view["best"]["value"] == 81.0
    repo = team.github.get_repo("alice/alpha")
    assert repo.get_branch(branch).commit.sha == pushed["bob"], "nothing was pushed over bob's commit"
    [pull] = view["pull_requests"]
    assert pull["head_sha"] == pushed["bob"] and pull["published_value"] is None
    assert pull["note"].startswith("needs merge: src/value.txt")
    body = repo.get_pull(pull["number"]).body or ""
    assert "needs merge: src/value.txt" in body
    assert "| candidate | – | – |" in body, "the table does not claim the best's value for bob's head"
    shown = CliRunner().invoke(
        cli, ["runs", "show", run.run_id], env={"CRUCIBLE_HOME": str(run.settings.home)}
    )
    assert shown.exit_code == 0, shown.output
    assert f"published head {pushed['bob'][:12]} value -; the run's best 81" in shown.output
    assert "  needs merge: src/value.txt" in shown.output
    assert not [e for e in run.store.list_events(run.run_id) if e.kind == EventKind.BUILT_ON_ADOPTED]


def test_a_resumed_run_keeps_building_on_the_adopted_lineage(team: Team) -> None:
    run, publisher = team.start(turns=3)
    branch = branch_name(run.run_id)
    pushed: dict[str, str] = {}
    publishes: list[int] = []

    def publish_and_stop_after_turn_2(ctx: RunContext) -> None:
        records = publisher.publish(ctx)
        publishes.append(len(records))
        if len(publishes) == 1:
            pushed["bob"] = team.bob_commits(branch, "src/NOTE.md", "a note from bob\n")
        elif len(publishes) == 2:
            ctx.executor.cancel.set()  # the controller stops after turn 2's publish

    ctx = run.context(on_champion=publish_and_stop_after_turn_2)
    stopped = run_loop(ctx, leases=run.store)
    assert stopped.stop_reason == "cancelled", stopped.message
    merged = team.github.get_repo("alice/alpha").get_branch(branch).commit
    assert [p.sha for p in merged.parents][:1] == [pushed["bob"]]

    root = build(dict(os.environ), settings=run.settings, forge_for=lambda _spec: run.client)
    try:
        result = root.service().resume(run.run_id)
    finally:
        root.close()

    assert result.stop_reason == "max_turns", result.message
    head = team.github.get_repo("alice/alpha").get_branch(branch).commit
    assert [p.sha for p in head.parents] == [merged.sha], "turn 3 is a plain fast-forward on the merge"
    assert team.branch_file(branch, "src/NOTE.md") == "a note from bob"
    assert team.branch_file(branch, "src/value.txt") == "41"
    [pull] = dump(run_view(run.settings, run.store, run.run_id, with_diffs=False))["pull_requests"]
    assert (pull["head_sha"], pull["published_value"], pull["note"]) == (head.sha, 81.0, None)

"""Publishing kept candidates as draft PRs on the local forge, over real HTTP and git (docs/github.md).

The forge is crucible's own GitHub-compatible server in this process; crucible reaches it only through
the ``github`` adapter (PyGithub) and ``git push``, exactly as it would reach GitHub.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from github import Github

from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.engine.prbody import END, START
from controller.forge.github import GithubForge
from controller.localforge.server import ForgeHandle
from controller.services.execution.context import RunContext
from controller.services.execution.loop import run_loop
from controller.services.execution.runs import open_context
from controller.services.feedback.publish import Publisher, branch_name, resume_pull
from controller.services.views.reads import run_view
from controller.services.views.schemas import dump
from controller.store import Store
from tests.conftest import git
from tests.forgekit import (
    TOKENS,
    app_forge,
    clone_as,
    commit_and_push,
    component_toml,
    create_publishing_run,
    crucible_settings,
    forge_client,
    spec_toml,
    write_agent,
    write_spec,
)

pytestmark = pytest.mark.slow

AGENT = """\
case "$CRUCIBLE_TURN" in
  1) echo 8 > src/value.txt ;;
  2) echo 12 > src/value.txt ;;
  3) echo 5 > src/value.txt; echo extra > src/extra.txt ;;
esac
echo "HYPOTHESIS: set value for turn $CRUCIBLE_TURN"
"""


@dataclass
class World:
    tmp: Path
    handle: ForgeHandle
    repo: Path
    github: Github
    client: GithubForge
    settings: Settings

    def run(self, turns: int = 3, extra: str = "") -> tuple[Store, str]:
        text = spec_toml(
            agent=self.tmp / "agent.sh",
            api_url=self.handle.api_url,
            components=[component_toml("app", "repo")],
            turns=turns,
            tail=extra,
        )
        run = create_publishing_run(self.settings, self.client, write_spec(self.tmp, text))
        run_loop(run.context(Publisher(self.client, run.store)), leases=run.store)
        return run.store, run.run_id

    def context(self, store: Store, run_id: str) -> RunContext:
        """The run's context opened again from the spec on disk, as a later crucible command would."""
        return open_context(
            self.settings, store, run_id, load_spec(self.tmp / "crucible.toml"), environ=dict(os.environ)
        )

    def pulls(self, run_id: str) -> list[object]:
        repo = self.github.get_repo("alice/app")
        return list(repo.get_pulls(state="all", head=f"alice:{branch_name(run_id)}"))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    write_agent(tmp_path, AGENT)
    with app_forge(tmp_path) as app:
        client = forge_client(app.handle.api_url, "alice")
        yield World(tmp_path, app.handle, app.source, app.alice, client, crucible_settings(tmp_path))


def test_kept_candidate_becomes_one_draft_pr_with_the_exact_diff(world: World) -> None:
    store, run_id = world.run()
    pulls = world.pulls(run_id)
    assert len(pulls) == 1
    pr = world.github.get_repo("alice/app").get_pull(pulls[0].number)  # type: ignore[attr-defined]
    view = dump(run_view(world.settings, store, run_id))
    champion = view["components"][0]["head_sha"]
    assert pr.draft is True
    assert pr.state == "open"
    assert pr.head.sha == champion
    assert pr.base.ref == "main"
    assert sorted(f.filename for f in pr.get_files()) == ["src/extra.txt", "src/value.txt"]
    body = pr.body or ""
    assert body.count(START) == 1 and body.count(END) == 1
    assert "Lower the value" in body and "xychart-beta" in body
    assert view["components"][0]["base_sha"] in body
    assert "| baseline | 10 |" in body and "| candidate | 5 |" in body
    assert view["pull_requests"] == [
        {
            "component": "app",
            "url": pr.html_url,
            "number": pr.number,
            "branch": branch_name(run_id),
            "draft": True,
            "head_sha": champion,
            "state": "open",
            "paused": False,
            "published_value": 5.0,
            "note": None,
            "problems": [],
        }
    ]
    kinds = [e.kind for e in store.list_events(run_id)]
    assert kinds.count("published") == 2  # turn 1's keep, then turn 3's


def test_publishing_again_creates_nothing_and_keeps_peoples_text(world: World) -> None:
    store, run_id = world.run()
    repo = world.github.get_repo("alice/app")
    pr = repo.get_pull(world.pulls(run_id)[0].number)  # type: ignore[attr-defined]
    edited = "Reviewer context above.\n\n" + (pr.body or "") + "\n\nFooter written by a person."
    pr.edit(body=edited)
    ctx = world.context(store, run_id)
    Publisher(world.client, store).publish(ctx)
    Publisher(world.client, store).publish(ctx)
    assert len(world.pulls(run_id)) == 1
    body = repo.get_pull(pr.number).body or ""
    assert body.startswith("Reviewer context above.\n\n")
    assert body.endswith("Footer written by a person.")
    assert body.count(START) == 1


def test_unpushed_local_commits_never_reach_the_pr(world: World) -> None:
    (world.repo / "LOCAL_ONLY.txt").write_text("not pushed\n")
    git(world.repo, "add", "-A")
    git(world.repo, "commit", "-q", "-m", "local only")
    store, run_id = world.run(turns=1)
    upstream_main = world.github.get_repo("alice/app").get_branch("main").commit.sha
    assert store.list_components(run_id)[0].base_sha == upstream_main
    pr = world.github.get_repo("alice/app").get_pull(world.pulls(run_id)[0].number)  # type: ignore[attr-defined]
    assert [f.filename for f in pr.get_files()] == ["src/value.txt"]


def _bob_pushes(world: World, tmp_path: Path, branch: str) -> str:
    other = clone_as("bob", f"{world.handle.url}/alice/app.git", tmp_path / "bob")
    git(other, "checkout", "-q", branch)
    (other / "src" / "value.txt").write_text("7\n")
    return commit_and_push(other, "bob", branch, "bob's idea")


def test_a_foreign_push_is_adopted_and_never_overwritten(world: World, tmp_path: Path) -> None:
    store, run_id = world.run(turns=1)
    branch = branch_name(run_id)
    bobs = _bob_pushes(world, tmp_path, branch)
    ctx = world.context(store, run_id)

    records = Publisher(world.client, store).publish(ctx)

    repo = world.github.get_repo("alice/app")
    assert not records[0].paused
    assert repo.get_branch(branch).commit.sha == bobs
    assert store.list_components(run_id)[0].extra["adopted_head"] == bobs
    assert f"adopted {bobs[:12]}, Bob's commit" in (repo.get_pull(records[0].number).body or "")
    assert (records[0].pushed_sha, records[0].published_value) == (bobs, None), "nobody measured it"
    assert records[0].note == (
        f"the PR head is Bob's commit {bobs[:12]}, on top of the run's best; crucible has not measured it"
    )
    assert git(ctx.checkout("candidate", "app").path, "rev-parse", "refs/crucible/adopted") == bobs


def test_a_foreign_push_with_pause_stops_every_write(world: World, tmp_path: Path) -> None:
    store, run_id = world.run(turns=1, extra='[feedback]\non_foreign_push = "pause"')
    branch = branch_name(run_id)
    bobs = _bob_pushes(world, tmp_path, branch)
    ctx = world.context(store, run_id)
    records = Publisher(world.client, store).publish(ctx)
    repo = world.github.get_repo("alice/app")
    pr = repo.get_pull(records[0].number)
    assert records[0].paused
    assert "stopped writing to this PR" in (pr.body or "")
    assert (records[0].note or "").startswith(f"paused after someone else pushed {bobs[:12]}")
    pr.edit(body="a person rewrote the body")

    Publisher(world.client, store).publish(ctx)

    assert repo.get_pull(records[0].number).body == "a person rewrote the body"
    assert repo.get_branch(branch).commit.sha == bobs
    assert store.list_pulls(run_id)[0].paused

    resumed = resume_pull(ctx, Publisher(world.client, store), "app")

    assert not resumed.paused and resumed.pushed_sha == bobs
    body = repo.get_pull(records[0].number).body or ""
    assert body.startswith("a person rewrote the body") and f"adopted {bobs[:12]}" in body
    assert repo.get_branch(branch).commit.sha == bobs


def test_the_token_is_stored_nowhere(world: World) -> None:
    store, run_id = world.run()
    assert len(world.pulls(run_id)) == 1
    store.close()
    token = TOKENS["alice"].encode()
    for path in world.settings.home.rglob("*"):
        if path.is_file():
            assert token not in path.read_bytes(), path
    assert token not in (world.repo / ".git" / "config").read_bytes()

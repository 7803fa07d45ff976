"""Publishing kept candidates as draft PRs on the local forge, over real HTTP and git (DESIGN §7).

The forge is crucible's own GitHub-compatible server in this process; crucible reaches it only through
the ``github`` adapter (PyGithub) and ``git push``, exactly as it would reach GitHub.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from github import Auth, Github

from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.engine.prbody import END, START
from controller.forge.auth import ForgeCredentials
from controller.forge.github import GithubForge
from controller.localforge.server import ForgeHandle, running_forge
from controller.localforge.users import add_user
from controller.services.loop import run_loop
from controller.services.publish import Publisher, branch_name, resume_pull
from controller.services.runs import create_run, open_context
from controller.services.views import run_view
from controller.store import Store
from tests.conftest import git, make_repo

pytestmark = pytest.mark.slow

TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-0123456789"}
AGENT = """\
case "$CRUCIBLE_TURN" in
  1) echo 8 > src/value.txt ;;
  2) echo 12 > src/value.txt ;;
  3) echo 5 > src/value.txt; echo extra > src/extra.txt ;;
esac
echo "HYPOTHESIS: set value for turn $CRUCIBLE_TURN"
"""
SPEC = """
objective = "Lower the value"
turns = {turns}
[agent]
command = "sh {agent}"
[sandbox]
mode = "none"
[metric]
command = "echo METRIC value=$(cat src/value.txt)"
name = "value"
samples = 1
warmups = 0
confidence = 0
interleave = false
[[component]]
name = "app"
repo = "repo"
base = "main"
mutable = ["src/**"]
upstream = "alice/app"
[publish]
forge = "{api}"
{extra}
"""


def _auth_env(token: str) -> dict[str, str]:
    return {
        **os.environ,
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Bearer {token}",
    }


@dataclass
class World:
    tmp: Path
    handle: ForgeHandle
    repo: Path
    github: Github
    client: GithubForge
    settings: Settings

    def run(self, turns: int = 3, extra: str = "") -> tuple[Store, str]:
        spec_path = self.tmp / "crucible.toml"
        text = SPEC.format(turns=turns, agent=self.tmp / "agent.sh", api=self.handle.api_url, extra=extra)
        spec_path.write_text(text)
        spec = load_spec(spec_path)
        store = Store.open(self.settings.database_url, upgrade=True)
        run_id = create_run(
            store, spec, spec_path.read_text(), spec_path, options={"publish_prs": True}, forge=self.client
        )
        ctx = open_context(self.settings, store, run_id, spec)
        ctx.on_champion = Publisher(self.client).publish
        run_loop(ctx)
        return store, run_id

    def pulls(self, run_id: str) -> list[object]:
        repo = self.github.get_repo("alice/app")
        return list(repo.get_pulls(state="all", head=f"alice:{branch_name(run_id)}"))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    root = tmp_path / "forge"
    for user, token in TOKENS.items():
        add_user(root, user, token=token)
    (tmp_path / "agent.sh").write_text(AGENT)
    repo = make_repo(tmp_path / "repo", {"src/value.txt": "10\n", "README.md": "app\n"})
    with running_forge(root) as handle:
        github = Github(base_url=handle.api_url, auth=Auth.Token(TOKENS["alice"]), retry=None)
        created = github.get_user().create_repo("app")
        created.add_to_collaborators("bob", permission="push")
        subprocess_git(repo, TOKENS["alice"], "push", "-q", created.clone_url, "main:refs/heads/main")
        client = GithubForge(handle.api_url, ForgeCredentials.for_token(TOKENS["alice"]), write_interval=0)
        home = tmp_path / "crucible-home"
        settings = Settings(home=home, database_url=f"sqlite:///{home / 'crucible.db'}")
        home.mkdir()
        yield World(tmp_path, handle, repo, github, client, settings)
        github.close()


def subprocess_git(cwd: Path, token: str, *args: str) -> str:
    import subprocess

    done = subprocess.run(["git", *args], cwd=cwd, env=_auth_env(token), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kept_candidate_becomes_one_draft_pr_with_the_exact_diff(world: World) -> None:
    store, run_id = world.run()
    pulls = world.pulls(run_id)
    assert len(pulls) == 1
    pr = world.github.get_repo("alice/app").get_pull(pulls[0].number)  # type: ignore[attr-defined]
    view = run_view(world.settings, store, run_id)
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
    spec = load_spec(world.tmp / "crucible.toml")
    ctx = open_context(world.settings, store, run_id, spec)
    Publisher(world.client).publish(ctx)
    Publisher(world.client).publish(ctx)
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
    other = tmp_path / "bob"
    subprocess_git(tmp_path, TOKENS["bob"], "clone", "-q", f"{world.handle.url}/alice/app.git", str(other))
    git(other, "config", "user.email", "bob@example.com")
    git(other, "config", "user.name", "Bob")
    git(other, "checkout", "-q", branch)
    (other / "src" / "value.txt").write_text("7\n")
    git(other, "commit", "-qam", "bob's idea")
    subprocess_git(other, TOKENS["bob"], "push", "-q", "origin", branch)
    return git(other, "rev-parse", "HEAD")


def test_a_foreign_push_is_adopted_and_never_overwritten(world: World, tmp_path: Path) -> None:
    store, run_id = world.run(turns=1)
    branch = branch_name(run_id)
    bobs = _bob_pushes(world, tmp_path, branch)
    spec = load_spec(world.tmp / "crucible.toml")
    ctx = open_context(world.settings, store, run_id, spec)

    records = Publisher(world.client).publish(ctx)

    repo = world.github.get_repo("alice/app")
    assert not records[0].paused
    assert repo.get_branch(branch).commit.sha == bobs
    assert store.list_components(run_id)[0].extra["adopted_head"] == bobs
    assert f"adopted {bobs[:12]}" in (repo.get_pull(records[0].number).body or "")
    assert git(ctx.checkout("candidate", "app").path, "rev-parse", "refs/crucible/adopted") == bobs


def test_a_foreign_push_with_pause_stops_every_write(world: World, tmp_path: Path) -> None:
    store, run_id = world.run(turns=1, extra='[feedback]\non_foreign_push = "pause"')
    branch = branch_name(run_id)
    bobs = _bob_pushes(world, tmp_path, branch)
    spec = load_spec(world.tmp / "crucible.toml")
    ctx = open_context(world.settings, store, run_id, spec)
    records = Publisher(world.client).publish(ctx)
    repo = world.github.get_repo("alice/app")
    pr = repo.get_pull(records[0].number)
    assert records[0].paused
    assert "stopped writing to this PR" in (pr.body or "")
    pr.edit(body="a person rewrote the body")

    Publisher(world.client).publish(ctx)

    assert repo.get_pull(records[0].number).body == "a person rewrote the body"
    assert repo.get_branch(branch).commit.sha == bobs
    assert store.list_pulls(run_id)[0].paused

    resumed = resume_pull(ctx, Publisher(world.client), "app")

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

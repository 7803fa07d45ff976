"""Composite runs (one PR per changed component, cross-linked), forks, and a crash between push and PR."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from github import Auth, Github

from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.forge.auth import ForgeCredentials
from controller.forge.github import GithubForge
from controller.localforge.server import ForgeHandle, running_forge
from controller.localforge.users import add_user
from controller.services.loop import run_loop
from controller.services.publish import Publisher, branch_name
from controller.services.runs import create_run, open_context
from controller.store import Store
from controller.workspace.push import push_commit
from tests.conftest import make_repo
from tests.publish.test_publish import TOKENS, subprocess_git

pytestmark = pytest.mark.slow

AGENT = """\
echo 3 > app/src/value.txt
echo changed > lib/src/lib.txt
echo "HYPOTHESIS: change both"
"""
SPEC = """
objective = "Lower the value across app and lib"
turns = 1
[agent]
command = "sh {agent}"
[sandbox]
mode = "none"
[metric]
command = "echo METRIC value=$(cat app/src/value.txt)"
name = "value"
samples = 1
warmups = 0
confidence = 0
interleave = false
[[component]]
name = "app"
repo = "app"
base = "main"
mutable = ["src/**"]
upstream = "alice/app"
{fork}
[[component]]
name = "lib"
repo = "lib"
base = "main"
mutable = ["src/**"]
upstream = "alice/lib"
[publish]
forge = "{api}"
"""


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[tuple[ForgeHandle, Github]]:
    root = tmp_path / "forge"
    for user, token in TOKENS.items():
        add_user(root, user, token=token)
    with running_forge(root) as handle:
        github = Github(base_url=handle.api_url, auth=Auth.Token(TOKENS["alice"]), retry=None)
        for name, files in (("app", {"src/value.txt": "10\n"}), ("lib", {"src/lib.txt": "lib\n"})):
            repo = make_repo(tmp_path / name, files)
            created = github.get_user().create_repo(name)
            subprocess_git(repo, TOKENS["alice"], "push", "-q", created.clone_url, "main:refs/heads/main")
        yield handle, github
        github.close()


def _run(
    tmp_path: Path, handle: ForgeHandle, token: str, fork: str = "", *, publish: bool = True
) -> tuple[Store, str, Publisher]:
    (tmp_path / "agent.sh").write_text(AGENT)
    spec_path = tmp_path / "crucible.toml"
    spec_path.write_text(SPEC.format(agent=tmp_path / "agent.sh", api=handle.api_url, fork=fork))
    spec = load_spec(spec_path)
    home = tmp_path / "home-crucible"
    home.mkdir()
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'c.db'}")
    store = Store.open(settings.database_url, upgrade=True)
    client = GithubForge(handle.api_url, ForgeCredentials.for_token(token), write_interval=0)
    publisher = Publisher(client)
    run_id = create_run(
        store, spec, spec_path.read_text(), spec_path, options={"publish_prs": True}, forge=client
    )
    ctx = open_context(settings, store, run_id, spec)
    if publish:
        ctx.on_champion = publisher.publish
    run_loop(ctx)
    return store, run_id, publisher


def test_a_composite_change_opens_one_linked_draft_pr_per_component(
    tmp_path: Path, forge: tuple[ForgeHandle, Github]
) -> None:
    handle, github = forge
    store, run_id, _ = _run(tmp_path, handle, TOKENS["alice"])
    records = {p.component: p for p in store.list_pulls(run_id)}
    assert sorted(records) == ["app", "lib"]
    app = github.get_repo("alice/app").get_pull(records["app"].number)
    lib = github.get_repo("alice/lib").get_pull(records["lib"].number)
    assert app.draft and lib.draft
    assert [f.filename for f in app.get_files()] == ["src/value.txt"]
    assert [f.filename for f in lib.get_files()] == ["src/lib.txt"]
    assert f"[#{lib.number}]({lib.html_url})" in (app.body or "")
    assert f"[#{app.number}]({app.html_url})" in (lib.body or "")


def test_branches_go_to_the_fork_and_the_pr_to_upstream(
    tmp_path: Path, forge: tuple[ForgeHandle, Github]
) -> None:
    handle, github = forge
    bob = Github(base_url=handle.api_url, auth=Auth.Token(TOKENS["bob"]), retry=None)
    bob.get_repo("alice/app").create_fork()  # through bob's client: the fork is his
    github.get_repo("alice/lib").add_to_collaborators("bob", permission="push")  # lib: no fork
    store, run_id, publisher = _run(tmp_path, handle, TOKENS["bob"], fork='fork = "bob/app"', publish=False)
    spec = load_spec(tmp_path / "crucible.toml")
    settings = Settings(
        home=tmp_path / "home-crucible", database_url=f"sqlite:///{tmp_path / 'home-crucible' / 'c.db'}"
    )
    publisher.publish(open_context(settings, store, run_id, spec))
    record = next(p for p in store.list_pulls(run_id) if p.component == "app")
    pull = github.get_repo("alice/app").get_pull(record.number)
    assert pull.head.label == f"bob:{branch_name(run_id)}"
    assert pull.head.repo.full_name == "bob/app"
    assert bob.get_repo("bob/app").get_branch(branch_name(run_id)).commit.sha == record.pushed_sha
    bob.close()


def test_a_crash_between_push_and_pr_creation_yields_exactly_one_pr(
    tmp_path: Path, forge: tuple[ForgeHandle, Github]
) -> None:
    handle, github = forge
    store, run_id, publisher = _run(tmp_path, handle, TOKENS["alice"], publish=False)
    spec = load_spec(tmp_path / "crucible.toml")
    settings = Settings(
        home=tmp_path / "home-crucible", database_url=f"sqlite:///{tmp_path / 'home-crucible' / 'c.db'}"
    )
    ctx = open_context(settings, store, run_id, spec)
    head = ctx.champion_heads["app"]
    # The crash: the branch reached the forge, the PR was never opened and nothing was recorded.
    repo = github.get_repo("alice/app")
    clone = ctx.checkout("candidate", "app").path
    push_commit(clone, repo.clone_url, head, branch_name(run_id), publisher.forge.git_auth_env("alice/app"))

    publisher.publish(ctx)
    publisher.publish(ctx)

    pulls = list(repo.get_pulls(state="all", head=f"alice:{branch_name(run_id)}"))
    assert len(pulls) == 1
    assert pulls[0].head.sha == head
    assert [p.number for p in store.list_pulls(run_id) if p.component == "app"] == [pulls[0].number]

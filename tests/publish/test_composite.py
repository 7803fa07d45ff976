"""Composite runs (one PR per changed component, cross-linked), forks, and a crash between push and PR."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from github import Github

from controller.localforge.server import ForgeHandle
from controller.services.execution.loop import run_loop
from controller.services.feedback.publish import Publisher, branch_name
from controller.workspace.push import push_commit
from tests.conftest import make_repo
from tests.forgekit import (
    PublishingRun,
    component_toml,
    forge_with_users,
    github_as,
    host_repo,
    spec_toml,
    start_run,
    write_agent,
)

pytestmark = pytest.mark.slow

AGENT = """\
echo 3 > app/src/value.txt
echo changed > lib/src/lib.txt
echo "HYPOTHESIS: change both"
"""


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[tuple[ForgeHandle, Github]]:
    with forge_with_users(tmp_path / "forge") as handle, github_as(handle.api_url, "alice") as github:
        for name, files in (("app", {"src/value.txt": "10\n"}), ("lib", {"src/lib.txt": "lib\n"})):
            host_repo(github, make_repo(tmp_path / name, files), name)
        yield handle, github


def _run(
    tmp_path: Path, handle: ForgeHandle, user: str, fork: str | None = None, *, publish: bool = True
) -> tuple[PublishingRun, Publisher]:
    spec = spec_toml(
        objective="Lower the value across app and lib",
        agent=write_agent(tmp_path, AGENT),
        api_url=handle.api_url,
        components=[component_toml("app", "app", fork=fork), component_toml("lib", "lib")],
        measured="app/src/value.txt",
    )
    run = start_run(tmp_path, handle.api_url, spec, user=user)
    publisher = Publisher(run.client, run.store)
    run_loop(run.context(publisher if publish else None), leases=run.store)
    return run, publisher


def test_a_composite_change_opens_one_linked_draft_pr_per_component(
    tmp_path: Path, forge: tuple[ForgeHandle, Github]
) -> None:
    handle, github = forge
    run, _ = _run(tmp_path, handle, "alice")
    store, run_id = run.store, run.run_id
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
    bob = github_as(handle.api_url, "bob")
    bob.get_repo("alice/app").create_fork()  # through bob's client: the fork is his
    github.get_repo("alice/lib").add_to_collaborators("bob", permission="push")  # lib: no fork
    run, publisher = _run(tmp_path, handle, "bob", fork="bob/app", publish=False)
    store, run_id = run.store, run.run_id
    publisher.publish(run.context())
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
    run, publisher = _run(tmp_path, handle, "alice", publish=False)
    store, run_id = run.store, run.run_id
    ctx = run.context()
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

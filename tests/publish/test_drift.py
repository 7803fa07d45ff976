"""Base drift: a moved upstream is followed without rewriting history, or reported as a conflict."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from controller.config.spec import load_spec
from controller.services.execution.runs import open_context
from controller.services.feedback.drift import display_name
from controller.services.feedback.publish import Publisher, branch_name
from tests.conftest import git
from tests.forgekit import git_as
from tests.publish.test_publish import World


def test_an_author_name_cannot_bring_markup_into_the_body() -> None:
    assert display_name("Bob") == "Bob"
    assert display_name("Zoë O'Neil-Smith") == "Zoë O'Neil-Smith"
    assert (
        display_name("eve <!-- crucible:end --> **@alice** [x](http://e)")
        == "eve -- crucibleend -- alice xhttpe"
    )
    assert display_name("<>") == "someone" and display_name("__init__ bob") == "init bob"
    assert len(display_name("a" * 200)) == 60


def _alice_moves_main(world: World, tmp_path: Path, path: str, text: str) -> str:
    work = tmp_path / "alice"
    git_as("alice", tmp_path, "clone", "-q", f"{world.handle.url}/alice/app.git", str(work))
    git(work, "config", "user.email", "alice@example.com")
    git(work, "config", "user.name", "Alice")
    (work / path).write_text(text)
    git(work, "commit", "-qam", "upstream moves on")
    git_as("alice", work, "push", "-q", "origin", "main")
    return git(work, "rev-parse", "HEAD")


@pytest.mark.slow
def test_a_clean_drift_is_followed_by_a_fast_forward_merge(world: World, tmp_path: Path) -> None:
    store, run_id = world.run(turns=1)
    old_base = store.list_components(run_id)[0].base_sha
    old_head = store.list_pulls(run_id)[0].pushed_sha
    new_main = _alice_moves_main(world, tmp_path, "README.md", "app, now documented\n")
    ctx = open_context(
        world.settings, store, run_id, load_spec(world.tmp / "crucible.toml"), environ=dict(os.environ)
    )

    [record] = Publisher(world.client, store).publish(ctx)

    repo = world.github.get_repo("alice/app")
    head = repo.get_branch(branch_name(run_id)).commit
    assert head.sha == record.pushed_sha != old_head
    assert [p.sha for p in head.parents] == [old_head, new_main]
    pr = repo.get_pull(record.number)
    assert [f.filename for f in pr.get_files()] == ["src/value.txt"]
    component = store.list_components(run_id)[0]
    assert component.base_sha == new_main and component.head_sha == head.sha
    assert component.extra["bases"] == [old_base, new_main]
    followed = [e for e in store.list_events(run_id) if e.kind == "base_followed"]
    assert len(followed) == 1 and followed[0].payload["value"] == 8.0
    assert f"followed main from {old_base[:12]} to {new_main[:12]}" in (pr.body or "")
    assert new_main in (pr.body or "")


@pytest.mark.slow
def test_a_conflicting_drift_pushes_nothing_and_says_needs_rebase(world: World, tmp_path: Path) -> None:
    store, run_id = world.run(turns=1)
    old_base = store.list_components(run_id)[0].base_sha
    old_head = store.list_pulls(run_id)[0].pushed_sha
    _alice_moves_main(world, tmp_path, "src/value.txt", "11\n")
    ctx = open_context(
        world.settings, store, run_id, load_spec(world.tmp / "crucible.toml"), environ=dict(os.environ)
    )

    [record] = Publisher(world.client, store).publish(ctx)

    repo = world.github.get_repo("alice/app")
    assert repo.get_branch(branch_name(run_id)).commit.sha == old_head
    assert "needs rebase: src/value.txt" in (repo.get_pull(record.number).body or "")
    assert store.list_components(run_id)[0].base_sha == old_base

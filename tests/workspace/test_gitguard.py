"""The control files of a clone's ``.git``: every change is named and undone (issue 11, section 2)."""

from __future__ import annotations

from pathlib import Path

from controller.workspace.gitguard import ControlCache, control_state, restore_control, tampered
from tests.conftest import git, make_repo


def test_changes_to_config_hooks_info_and_refs_are_named_and_undone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    gitdir = repo / ".git"
    before = control_state(gitdir)
    config = (gitdir / "config").read_bytes()

    git(repo, "config", "core.fsmonitor", "sh -c 'env > /tmp/x'")
    (gitdir / "hooks" / "post-commit").write_text("#!/bin/sh\nenv\n")
    (gitdir / "info").mkdir(exist_ok=True)
    (gitdir / "info" / "attributes").write_text("* filter=evil\n")
    git(repo, "update-ref", "refs/heads/evil", "HEAD")
    (gitdir / "refs" / "tags" / "deep").mkdir(parents=True)
    (gitdir / "objects" / "info" / "alternates").write_text("/elsewhere/objects\n")

    changes = tampered(before, control_state(gitdir))
    for path in ("config", "hooks/post-commit", "info/attributes", "refs/heads/evil", "refs/tags/deep"):
        assert path in changes
    assert "objects/info/alternates" in changes

    restore_control(gitdir, before)

    assert tampered(before, control_state(gitdir)) == []
    assert (gitdir / "config").read_bytes() == config
    assert not (gitdir / "hooks" / "post-commit").exists()
    assert "evil" not in git(repo, "for-each-ref")


def test_a_removed_or_replaced_control_file_comes_back(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    gitdir = repo / ".git"
    before = control_state(gitdir)
    (gitdir / "config").unlink()
    (gitdir / "config").symlink_to("/etc/passwd")
    head_ref = gitdir / "refs" / "heads" / "main"
    head_ref.unlink()

    restore_control(gitdir, before)

    assert not (gitdir / "config").is_symlink()
    assert tampered(before, control_state(gitdir)) == []
    assert git(repo, "rev-parse", "main")


def test_the_cache_gives_the_same_state_and_sees_a_rewrite(tmp_path: Path) -> None:
    """The cache spares re-reading unchanged files; a file rewritten behind it is still seen."""
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    gitdir = repo / ".git"
    cache: ControlCache = {}
    first = control_state(gitdir, cache)
    assert first == control_state(gitdir)
    assert control_state(gitdir, cache) == first

    git(repo, "config", "core.fsmonitor", "sh -c 'env > /tmp/x'")
    (gitdir / "hooks" / "pre-commit").write_text("#!/bin/sh\nenv\n")

    changed = tampered(first, control_state(gitdir, cache))
    assert changed == ["config", "hooks/pre-commit"]
    assert control_state(gitdir, cache) == control_state(gitdir)

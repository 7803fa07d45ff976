"""The control files of a clone's ``.git``: every change is named and undone (issue 11, section 2)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from controller.workspace.gitguard import (
    STAMP,
    ControlCache,
    ControlGuard,
    control_state,
    restore_control,
    tampered,
)
from tests.conftest import git, make_repo
from tests.support.waiting import wait_until


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


def _settled(guard: ControlGuard) -> dict[str, bytes | str]:
    """The guard's state once the filesystem's clock has ticked past every control file's ctime, so the
    guard keeps it; the next call with nothing changed must return that very mapping."""
    probe = guard.git_dir.parent / "probe"
    newest = max(p.lstat().st_ctime_ns for p in guard.git_dir.rglob("*") if "objects" not in p.parts)

    def ticked() -> bool:
        probe.write_text("x")
        return probe.stat().st_ctime_ns > newest

    wait_until(ticked, "the filesystem's clock to tick past the control files", timeout=10, interval=0.01)
    state = guard.state()
    assert guard.state() is state, "nothing changed: the last walk stands"
    return state


def test_the_guard_reuses_its_walk_until_a_stat_changes_and_always_answers_as_a_walk(tmp_path: Path) -> None:
    """``ControlGuard`` checks the stat data of what its last walk found instead of walking again: a
    change that keeps the size and the mtime, an entry added below a control directory, a new top-level
    control entry and an alternates file are each seen, and each answer is what a walk gives."""
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    gitdir = repo / ".git"
    guard = ControlGuard(gitdir)
    first = _settled(guard)
    assert first == control_state(gitdir)

    config = gitdir / "config"
    info = config.stat()
    config.write_bytes(config.read_bytes().replace(b"bare = false", b"bare = fals3"))  # same size
    os.utime(config, ns=(info.st_atime_ns, info.st_mtime_ns))  # same mtime: only the ctime tells
    assert tampered(first, guard.state()) == ["config"]
    assert guard.state() == control_state(gitdir)

    changes = [
        ("refs/heads/evil", lambda: (gitdir / "refs/heads/evil").write_text("0" * 40 + "\n")),
        ("modules", lambda: (gitdir / "modules").mkdir()),
        ("objects/info/alternates", lambda: (gitdir / "objects/info/alternates").write_text("/x\n")),
        ("objects/info", lambda: shutil.rmtree(gitdir / "objects/info")),
        ("objects/info", lambda: (gitdir / "objects/info").mkdir()),  # below objects/, not at the top
    ]
    for name, change in changes:
        before = _settled(guard)
        change()
        assert name in tampered(before, guard.state())
        assert guard.state() == control_state(gitdir)
    restore_control(gitdir, first)
    assert tampered(first, guard.state()) == []


def test_a_guard_whose_stamp_is_replaced_walks_every_time(tmp_path: Path) -> None:
    """A command that makes the stamp a FIFO (or a symlink, a directory) only costs the shortcut."""
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    gitdir = repo / ".git"
    guard = ControlGuard(gitdir)
    first = _settled(guard)
    (gitdir / STAMP).unlink()
    os.mkfifo(gitdir / STAMP)
    git(repo, "config", "core.fsmonitor", "sh -c 'env > /tmp/x'")
    changed = guard.state()
    assert tampered(first, changed) == ["config"]
    again = guard.state()
    assert again is not changed and again == changed == control_state(gitdir)

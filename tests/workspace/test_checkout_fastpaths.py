"""The turn's fast paths (commit_paths, advance, clean, set_refs) give the same results as the slow ones."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.workspace import checkout as checkout_module
from controller.workspace.checkout import Checkout
from tests.conftest import git

FILES = {
    "src/a.txt": "a\n",
    "src/b.txt": "b\n",
    "src/gone.txt": "bye\n",
    "src/swap": "file that becomes a directory\n",
    "run.sh": "#!/bin/sh\n",
    ".gitignore": "*.cache\n",
}


def _edits(root: Path) -> None:
    (root / "src/a.txt").write_text("a changed\n")
    (root / "src/new/deep.txt").parent.mkdir(parents=True)
    (root / "src/new/deep.txt").write_text("new\n")
    (root / "src/gone.txt").unlink()
    os.chmod(root / "run.sh", 0o755)


@pytest.fixture
def pair(
    repo_factory: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Checkout, Checkout, str]:
    source = repo_factory(FILES)
    monkeypatch.setattr(checkout_module, "PLUMBING_MIN_ENTRIES", 0)
    base = git(source, "rev-parse", "HEAD")
    fast = Checkout.create(source, tmp_path / "fast", base)
    slow = Checkout.create(source, tmp_path / "slow", base)
    return fast, slow, base


def test_commit_paths_builds_the_same_tree_as_add_all(pair: tuple[Checkout, Checkout, str]) -> None:
    fast, slow, base = pair
    for co in (fast, slow):
        _edits(co.path)
    sha_fast = fast.commit_paths(sorted(fast.status()), "turn 1")
    sha_slow = slow.commit("turn 1")
    assert git(fast.path, "rev-parse", f"{sha_fast}^{{tree}}") == git(
        slow.path, "rev-parse", f"{sha_slow}^{{tree}}"
    )
    assert git(fast.path, "rev-parse", f"{sha_fast}^") == base
    assert fast.head() == sha_fast
    assert fast.status() == {}
    assert (
        git(fast.path, "log", "-1", "--format=%an <%ae>|%cn|%s", sha_fast)
        == "crucible <crucible@localhost>|crucible|turn 1"
    )


def test_commit_paths_falls_back_when_a_file_became_a_directory(pair: tuple[Checkout, Checkout, str]) -> None:
    fast, slow, _ = pair
    for co in (fast, slow):
        (co.path / "src/swap").unlink()
        (co.path / "src/swap").mkdir()
        (co.path / "src/swap/inner.txt").write_text("inner\n")
    sha_fast = fast.commit_paths(sorted(fast.status()), "swap")
    sha_slow = slow.commit("swap")
    assert git(fast.path, "rev-parse", f"{sha_fast}^{{tree}}") == git(
        slow.path, "rev-parse", f"{sha_slow}^{{tree}}"
    )
    assert fast.status() == {}


def test_advance_moves_a_clean_checkout_and_drops_ignored_files(pair: tuple[Checkout, Checkout, str]) -> None:
    fast, slow, _ = pair
    _edits(fast.path)
    new = fast.commit_paths(sorted(fast.status()), "turn 1")
    (slow.path / "warm.cache").write_text("compiled\n")
    (slow.path / ".venv").mkdir()
    (slow.path / ".venv" / "keep.cache").write_text("kept\n")
    git(slow.path, "fetch", "-q", str(fast.path), new)
    slow.advance(new, [".venv"])
    assert slow.head() == new
    assert (slow.path / "src/a.txt").read_text() == "a changed\n"
    assert not (slow.path / "warm.cache").exists()
    assert (slow.path / ".venv" / "keep.cache").exists()
    assert slow.status() == {}


def test_clean_removes_untracked_and_ignored_but_keeps_caches(pair: tuple[Checkout, Checkout, str]) -> None:
    fast, _, base = pair
    (fast.path / "x.cache").write_text("x")
    (fast.path / "node_modules").mkdir()
    (fast.path / "node_modules" / "m.cache").write_text("m")
    fast.clean(["node_modules"])
    assert not (fast.path / "x.cache").exists()
    assert (fast.path / "node_modules" / "m.cache").exists()
    assert fast.head() == base


def test_set_refs_writes_only_crucible_refs(pair: tuple[Checkout, Checkout, str]) -> None:
    fast, _, base = pair
    fast.set_refs({"refs/crucible/champion": base, "refs/crucible/turns/1": base})
    refs = git(fast.path, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    assert sorted(refs) == [f"refs/crucible/champion {base}", f"refs/crucible/turns/1 {base}"]
    with pytest.raises(ValueError):
        fast.set_refs({"refs/heads/main": base})


def test_refs_to_one_commit_share_a_file_and_move_apart(pair: tuple[Checkout, Checkout, str]) -> None:
    """A kept turn's two refs are one file, created once and hard-linked (ADR-0050): moving one later
    replaces its file and leaves the other where it was, even past a crash's leftover temporary
    still linked to a live ref."""
    fast, _, base = pair
    new = fast.commit_tree(git(fast.path, "rev-parse", f"{base}^{{tree}}"), [base], "next")
    refs = fast.git_dir / "refs" / "crucible"
    fast.set_refs({"refs/crucible/champion": base, "refs/crucible/turns/1": base})
    assert os.stat(refs / "champion").st_ino == os.stat(refs / "turns" / "1").st_ino
    os.link(refs / "turns" / "1", refs / ".champion.tmp")  # as a crash after the link would leave it
    fast.set_refs({"refs/crucible/champion": new, "refs/crucible/turns/2": new})
    shown = git(fast.path, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    assert sorted(shown) == [
        f"refs/crucible/champion {new}",
        f"refs/crucible/turns/1 {base}",
        f"refs/crucible/turns/2 {new}",
    ]
    assert sorted(os.listdir(refs)) == ["champion", "turns"]
    assert sorted(os.listdir(refs / "turns")) == ["1", "2"]


def test_refs_are_written_where_hard_links_are_refused(
    pair: tuple[Checkout, Checkout, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a filesystem without hard links each ref gets a file of its own."""
    fast, _, base = pair

    def refuse(*_: object, **__: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(checkout_module.os, "link", refuse)
    fast.set_refs({"refs/crucible/champion": base, "refs/crucible/turns/1": base})
    shown = git(fast.path, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    assert sorted(shown) == [f"refs/crucible/champion {base}", f"refs/crucible/turns/1 {base}"]
    assert sorted(os.listdir(fast.git_dir / "refs" / "crucible" / "turns")) == ["1"]


def test_many_turn_refs_are_packed_and_restore_keeps_them(pair: tuple[Checkout, Checkout, str]) -> None:
    """One ref per kept turn would make the .git guard's scans grow with the run: past
    LOOSE_REFS_MAX loose ones they are packed, and a restore neither loses them nor needs to ask git
    whether packed-refs holds a branch."""
    fast, _, base = pair
    count = checkout_module.LOOSE_REFS_MAX + 3
    for turn in range(1, count + 1):
        fast.set_refs({"refs/crucible/champion": base, f"refs/crucible/turns/{turn}": base})
    assert len(os.listdir(fast.git_dir / "refs" / "crucible" / "turns")) <= checkout_module.LOOSE_REFS_MAX
    git(fast.path, "branch", "planted", base)
    fast.restore(base)
    refs = git(fast.path, "for-each-ref", "--format=%(refname)").splitlines()
    assert sorted(refs) == sorted(
        ["refs/crucible/champion"] + [f"refs/crucible/turns/{n}" for n in range(1, count + 1)]
    )
    assert not fast._may_have_foreign_refs()
    git(fast.path, "branch", "planted", base)
    git(fast.path, "pack-refs", "--all")
    assert fast._may_have_foreign_refs(), "a packed branch is found in packed-refs"


def test_commit_paths_of_tracked_changes_is_one_commit_with_the_same_tree(
    repo_factory: Callable[..., Path], tmp_path: Path
) -> None:
    """On a small tree, changes to tracked files only (a kept agent's usual edit) are committed by one
    ``commit --only``; the tree is add -A's, file names are not read as pathspec magic."""
    source = repo_factory({**FILES, ":odd": "magic\n", "src/[ab].txt": "glob\n"})
    base = git(source, "rev-parse", "HEAD")
    fast = Checkout.create(source, tmp_path / "fast", base)
    slow = Checkout.create(source, tmp_path / "slow", base)
    for co in (fast, slow):
        (co.path / "src/a.txt").write_text("a changed\n")
        (co.path / ":odd").write_text("changed\n")
        (co.path / "src/[ab].txt").unlink()
        os.chmod(co.path / "run.sh", 0o755)
    status = fast.status()
    assert set(status.values()) <= {" M", " D"}
    sha_fast = fast.commit_paths(sorted(status), "turn 1", tracked_only=True)
    sha_slow = slow.commit("turn 1")
    assert git(fast.path, "rev-parse", f"{sha_fast}^{{tree}}") == git(
        slow.path, "rev-parse", f"{sha_slow}^{{tree}}"
    )
    assert git(fast.path, "rev-parse", f"{sha_fast}^") == base
    assert fast.head() == sha_fast and fast.status() == {}
    assert git(fast.path, "log", "-1", "--format=%an|%s", sha_fast) == "crucible|turn 1"

"""A working tree's print (ADR 0049): a walk that finds the tree as recorded stands in for git's, so every
change a walk of git's would see must make ``holds`` refuse, including the ones that keep a file's size
and mtime, and the ones within the tick of the filesystem's clock the print was taken in."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.workspace import treeprint
from tests.conftest import git, make_repo
from tests.support.waiting import wait_until

FILES = {"a.txt": "alpha\n", "src/b.txt": "bravo\n", "src/deep/c.txt": "charlie\n", ".gitignore": "*.log\n"}


def _repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo", FILES)
    os.symlink("a.txt", repo / "link")
    git(repo, "add", "link")
    git(repo, "commit", "-qm", "link")
    git(repo, "checkout", "-q", "--detach")
    return repo


def _aged(repo: Path) -> treeprint.TreePrint:
    """A print taken once the filesystem's clock ticked past every entry's ctime: none is racy, so
    every check below stands on the stat data alone."""
    probe = repo.parent / "probe"
    newest = max(p.lstat().st_ctime_ns for p in repo.rglob("*"))

    def ticked() -> bool:
        probe.write_text("x")
        return probe.stat().st_ctime_ns > newest

    wait_until(ticked, "the filesystem's clock to tick past the tree", timeout=10, interval=0.01)
    recorded = treeprint.take(repo)
    assert recorded is not None and not recorded.hashes
    return recorded


def _same_size_same_mtime(repo: Path) -> None:
    info = (repo / "a.txt").stat()
    (repo / "a.txt").write_text("ALPHA\n")
    os.utime(repo / "a.txt", ns=(info.st_atime_ns, info.st_mtime_ns))
    after = (repo / "a.txt").stat()
    assert (after.st_size, after.st_mtime_ns) == (info.st_size, info.st_mtime_ns)


def _replaced_by_rename(repo: Path) -> None:
    (repo / "src" / ".b.tmp").write_text("BRAVO\n")
    os.replace(repo / "src" / ".b.tmp", repo / "src" / "b.txt")


def _symlink_swapped_for_a_file(repo: Path) -> None:
    (repo / "link").unlink()
    (repo / "link").write_text("a.txt")  # what the link held, as a file of the same size


def _staged(repo: Path) -> None:
    (repo.parent / "staged.txt").write_text("staged\n")
    blob = git(repo, "hash-object", "-w", str(repo.parent / "staged.txt"))
    git(repo, "update-index", "--cacheinfo", f"100644,{blob},a.txt")


def _head_moved(repo: Path) -> None:
    git(repo, "update-ref", "--no-deref", "HEAD", "HEAD~1")


CHANGES: dict[str, Callable[[Path], object]] = {
    "rewrite with the same size and mtime": _same_size_same_mtime,
    "new untracked file": lambda r: (r / "src" / "new.txt").write_text("new\n"),
    "new ignored file": lambda r: (r / "debug.log").write_text("log\n"),
    "new empty directory": lambda r: (r / "src" / "empty").mkdir(),
    "deleted file": lambda r: (r / "src" / "deep" / "c.txt").unlink(),
    "chmod": lambda r: (r / "a.txt").chmod(0o755),
    "chmod of a directory": lambda r: (r / "src").chmod(0o700),
    "symlink swapped for a file": _symlink_swapped_for_a_file,
    "file replaced by rename": _replaced_by_rename,
    "change staged in the index": _staged,
    "HEAD moved": _head_moved,
}


@pytest.mark.parametrize("change", list(CHANGES.values()), ids=list(CHANGES))
def test_any_change_a_walk_of_gits_could_see_refuses_the_print(
    tmp_path: Path, change: Callable[[Path], object]
) -> None:
    repo = _repo(tmp_path)
    recorded = _aged(repo)
    assert treeprint.holds(repo, recorded) is not None, "nothing changed yet"
    change(repo)
    assert treeprint.holds(repo, recorded) is None


def test_a_rewrite_in_the_tick_the_print_was_taken_in_is_seen(tmp_path: Path) -> None:
    """A file written just before the print is hashed by it when the clock has not ticked since; a rewrite
    that keeps its size and mtime right after is refused, by the ctime where the clock ticked, by the
    content where it did not."""
    repo = _repo(tmp_path)
    (repo / "a.txt").write_text("alpha\n")  # crucible's checkout, say: the file is new
    recorded = treeprint.take(repo)
    assert recorded is not None
    mtime = recorded.entries["a.txt"][2]
    (repo / "a.txt").write_text("ALPHA\n")
    os.utime(repo / "a.txt", ns=(mtime, mtime))
    assert treeprint.holds(repo, recorded) is None


def test_a_racy_entry_is_decided_by_its_content(tmp_path: Path) -> None:
    """Where the clock's tick hides a rewrite (every stat field as recorded), the content the print
    hashed decides. The kernel here may stamp finer than a tick, so the racy entry is made so: the
    print's stat data for a.txt are set to the rewritten file's, its hash kept."""
    repo = _repo(tmp_path)
    recorded = _aged(repo)
    hashed = treeprint._content(repo, "a.txt", recorded.entries["a.txt"])
    assert hashed is not None
    racy = dataclasses.replace(recorded, hashes={"a.txt": hashed})
    assert treeprint.holds(repo, racy) is not None
    _same_size_same_mtime(repo)
    now = (repo / "a.txt").lstat()
    entries = {**recorded.entries, "a.txt": treeprint._key(now)}
    assert treeprint.holds(repo, dataclasses.replace(racy, entries=entries)) is None
    (repo / "a.txt").write_text("alpha\n")  # back as hashed, and the stat data recorded again
    entries = {**recorded.entries, "a.txt": treeprint._key((repo / "a.txt").lstat())}
    assert treeprint.holds(repo, dataclasses.replace(racy, entries=entries)) is not None


def test_what_crucible_changed_may_differ_and_nothing_else(tmp_path: Path) -> None:
    """``changed`` (a checkout's paths, the index), ``gone`` (removed ignored entries) and ``head``."""
    repo = _repo(tmp_path)
    recorded = _aged(repo)
    (repo / "src" / "deep" / "c.txt").write_text("CHARLIE, longer\n")
    (repo / "new" / "dir").mkdir(parents=True)
    (repo / "new" / "dir" / "d.txt").write_text("delta\n")
    changed = ["src/deep/c.txt", "new/dir/d.txt"]
    now = treeprint.holds(repo, recorded, changed=changed)
    assert now is not None and "new/dir/d.txt" in now.entries
    (repo / "a.txt").chmod(0o755)
    assert treeprint.holds(repo, recorded, changed=changed) is None, "a.txt was not changed by crucible"

    recorded = _aged(repo)
    (repo / "new" / "dir" / "d.txt").unlink()
    (repo / "new" / "dir").rmdir()
    (repo / "new" / "dir").write_text("a file where a directory above a changed path was\n")
    assert treeprint.holds(repo, recorded, changed=changed) is None

    repo2 = make_repo(tmp_path / "two", {"a.txt": "a\n", ".gitignore": "build/\n"})
    (repo2 / "build" / "x").mkdir(parents=True)
    (repo2 / "build" / "x" / "y.o").write_text("o\n")
    recorded = _aged(repo2)
    (repo2 / "build" / "x" / "y.o").unlink()
    (repo2 / "build" / "z.o").write_text("rebuilt\n")
    assert treeprint.holds(repo2, recorded, gone=["build"]) is not None
    assert treeprint.holds(repo2, recorded, gone=["buil"]) is None, "a prefix of a name is not a path"

    first = git(repo2, "rev-parse", "HEAD").strip()
    (repo2 / "b.txt").write_text("b\n")
    git(repo2, "add", "b.txt")
    git(repo2, "commit", "-qm", "b")
    second = git(repo2, "rev-parse", "HEAD").strip()
    git(repo2, "checkout", "-q", "--detach", first)
    recorded = treeprint.take(repo2)
    assert recorded is not None and treeprint.at(recorded, first)
    git(repo2, "checkout", "-q", "--detach", second)
    moved = ["b.txt", treeprint.INDEX]
    assert treeprint.holds(repo2, recorded, changed=moved, gone=["build"]) is None, "HEAD moved"
    after = treeprint.holds(repo2, recorded, changed=moved, gone=["build"], head=second)
    assert after is not None and treeprint.at(after, second)


def test_a_large_tree_is_left_to_git(tmp_path: Path) -> None:
    """Past ``limit`` entries, tracked (the index's header says so before any walk) or not, no print is
    taken, and a walk finding more entries than a print's refuses it."""
    repo = _repo(tmp_path)
    assert treeprint.tracked(repo) == 5
    assert treeprint.take(repo, limit=4) is None
    assert not (repo / ".git" / treeprint.STAMP).exists(), "not walked at all"
    assert treeprint.take(repo, limit=20) is not None
    for i in range(30):
        (repo / f"untracked-{i}.txt").write_text("x\n")
    assert treeprint.take(repo, limit=20) is None
    assert treeprint.MAX_ENTRIES < 20_000


def test_a_stamp_that_cannot_be_touched_costs_the_shortcut_only(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    recorded = _aged(repo)
    (repo / ".git" / treeprint.STAMP).unlink()
    os.mkfifo(repo / ".git" / treeprint.STAMP)
    assert treeprint.take(repo) is None
    assert treeprint.holds(repo, recorded) is None


def test_added_lists_new_names_as_git_lists_untracked_ones(tmp_path: Path) -> None:
    """A new directory is one entry ending in "/" (nothing below it), a new file in a known directory
    its own; rewritten or removed entries are not new."""
    repo = _repo(tmp_path)
    recorded = treeprint.take(repo)
    assert recorded is not None
    assert treeprint.added(repo, recorded) == []
    (repo / "new" / "deep").mkdir(parents=True)
    (repo / "new" / "deep" / "x").write_text("x\n")
    (repo / "empty").mkdir()
    (repo / "src" / "c.txt").write_text("c\n")
    (repo / "a.txt").write_text("rewritten\n")
    (repo / "src" / "b.txt").unlink()
    assert treeprint.added(repo, recorded) == ["empty/", "new/", "src/c.txt"]

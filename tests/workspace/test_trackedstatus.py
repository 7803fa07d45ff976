"""The candidate's status read in this process (``trackedstatus``, ADR 0052) against git's own walk.

Each case starts from a real checkout just reset to its commit (the index recorded as matching HEAD, as
crucible records it after its reset), makes one change, then reads the status both ways: this process's
answer, when it gives one, must be exactly ``git status``'s (the same codes for the same paths, and no
ignored entry), and each case says whether this process must answer at all, so a case the fast path
gives up on cannot pass for one it decided. Every case runs twice: with the files' entries racy (just
checked out, as after crucible's reset: git reads their content) and settled (their stat data cached
in an index written later: git trusts it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.workspace import trackedstatus, treeprint
from controller.workspace.checkout import Checkout
from tests.support.small_tree import commit_small_tree

FILES = {
    "a.txt": "alpha\n",
    "b.txt": "bravo\n",
    "src/c.py": "print('c')\n",
    "src/deep/d.py": "d = 1\n",
    "tool.sh": "#!/bin/sh\n",
    ".gitignore": "*.log\nbuild/\n",
}


def _git(root: Path, *args: str, data: bytes | None = None) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], input=data, capture_output=True, check=True)
    return done.stdout.decode()


@dataclass
class Repo:
    root: Path
    config: bytes
    head: str

    def reset(self, settled: bool) -> bytes:
        """Back to the commit, exactly; returns the index's checksum, recorded as crucible records it."""
        (self.root / ".git" / "config").write_bytes(self.config)
        (self.root / ".git" / "info" / "attributes").unlink(missing_ok=True)
        for entry in self.root.iterdir():  # a change git cannot see (within a clock tick) must go too
            if entry.name != ".git":
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for index in (self.root / ".git").glob("*index*"):  # flags and formats a case set go with it
            index.unlink()
        _git(self.root, "reset", "-q", "--hard", self.head)
        if settled:  # the files' stat data cached in an index written after their mtimes
            for path in FILES:
                os.utime(self.root / path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
            _git(self.root, "update-index", "--refresh")
        checksum = trackedstatus.index_checksum(self.root)
        assert checksum is not None
        return checksum


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    root = tmp_path_factory.mktemp("tracked") / "repo"
    root.mkdir()
    base = commit_small_tree(root, FILES)
    yield Repo(root, (root / ".git" / "config").read_bytes(), base)


def _rewrite_keeping_mtime(path: Path, text: str) -> None:
    info = path.stat()
    path.write_text(text)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def _replace_by_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside.txt").write_text("x\n")


def _replace_dir_by_file(path: Path) -> None:
    for child in sorted(path.rglob("*"), reverse=True):
        child.rmdir() if child.is_dir() else child.unlink()
    path.rmdir()
    path.write_text("now a file\n")


def _delete_tree(path: Path) -> None:
    for child in sorted(path.rglob("*"), reverse=True):
        child.rmdir() if child.is_dir() else child.unlink()
    path.rmdir()


def _chmod_there_and_back(path: Path) -> None:
    path.chmod(0o755)
    path.chmod(0o644)


def _relink(path: Path, target: str) -> None:
    path.unlink()
    os.symlink(target, path)


def _stage(root: Path) -> None:
    (root / "a.txt").write_text("staged\n")
    _git(root, "add", "a.txt")


def _add_all(root: Path) -> None:
    (root / "a.txt").write_text("changed\n")
    (root / "new.txt").write_text("new\n")
    _git(root, "add", "-A")


def _with_config(key: str, value: str) -> Callable[[Path], object]:
    def change(root: Path) -> None:
        (root / "a.txt").write_text("alpha\r\n")
        _git(root, "config", key, value)

    return change


def _info_attributes(root: Path) -> None:
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "attributes").write_text("*.txt text eol=crlf\n")
    (root / "a.txt").write_text("alpha\r\n")


# name -> (the change, whether this process must decide the status itself; None: it may, or may leave
# it to git, as the clock falls: a same-size rewrite with its mtime kept, within the second of the stat
# data the index cached, is a change only to a git built with ``USE_NSEC``)
CASES: dict[str, tuple[Callable[[Path], object], bool | None]] = {
    "modified, another size": (lambda r: (r / "a.txt").write_text("alpha, longer\n"), True),
    "same-size rewrite, mtime kept": (lambda r: _rewrite_keeping_mtime(r / "a.txt", "ALPHA\n"), None),
    "same-size rewrite in a subdirectory": (lambda r: (r / "src/deep/d.py").write_text("d = 2\n"), True),
    "same-size rewrite, racy": (lambda r: (r / "b.txt").write_text("BRAVO\n"), True),
    "rewritten with the same content": (lambda r: (r / "b.txt").write_text("bravo\n"), True),
    "touched": (lambda r: os.utime(r / "b.txt", ns=(5, 5)), True),
    "emptied": (lambda r: (r / "b.txt").write_text(""), True),
    "deleted": (lambda r: (r / "b.txt").unlink(), True),
    "directory deleted": (lambda r: _delete_tree(r / "src"), True),
    "directory emptied, left": (lambda r: (r / "src/deep/d.py").unlink(), True),
    "directory's mode changed": (lambda r: (r / "src").chmod(0o700), True),
    "tracked file replaced by a fifo": (lambda r: ((r / "b.txt").unlink(), os.mkfifo(r / "b.txt")), False),
    "deleted, the name written back alike": (
        lambda r: ((r / "a.txt").unlink(), (r / "a.txt").write_text("alpha\n")),
        True,
    ),
    "deleted, the name written back changed": (
        lambda r: ((r / "a.txt").unlink(), (r / "a.txt").write_text("other\n")),
        True,
    ),
    "chmod +x": (lambda r: (r / "a.txt").chmod(0o755), True),
    "chmod -x": (lambda r: (r / "tool.sh").chmod(0o644), True),
    "chmod +x and back": (lambda r: _chmod_there_and_back(r / "a.txt"), True),
    "read-only": (lambda r: (r / "a.txt").chmod(0o444), True),
    "nothing": (lambda r: None, True),
    "new untracked file": (lambda r: (r / "new.txt").write_text("new\n"), False),
    "new ignored file": (lambda r: (r / "debug.log").write_text("x\n"), False),
    "new ignored directory": (lambda r: (r / "build").mkdir(), False),
    "new empty directory": (lambda r: (r / "empty").mkdir(), False),
    "renamed": (lambda r: (r / "a.txt").rename(r / "z.txt"), False),
    "new symlink in the tree": (lambda r: os.symlink("b.txt", r / "src" / "l"), False),
    "new symlink out of the tree": (lambda r: os.symlink("/etc/passwd", r / "out"), False),
    "tracked file replaced by a symlink": (
        lambda r: ((r / "b.txt").unlink(), os.symlink("a.txt", r / "b.txt")),
        False,
    ),
    "tracked symlink retargeted": (lambda r: _relink(r / "link", "b.txt"), True),
    "tracked symlink out of the tree": (lambda r: _relink(r / "link", "/etc"), True),
    "tracked symlink replaced by a file": (
        lambda r: ((r / "link").unlink(), (r / "link").write_text("a")),
        False,
    ),
    "file replaced by a directory": (lambda r: _replace_by_dir(r / "b.txt"), False),
    "directory replaced by a file": (lambda r: _replace_dir_by_file(r / "src" / "deep"), False),
    "staged change": (_stage, False),
    "git add -A": (_add_all, False),
    "index refreshed": (
        lambda r: (os.utime(r / "a.txt", ns=(7, 7)), _git(r, "update-index", "--refresh")),
        False,
    ),
    "assume-unchanged": (lambda r: _git(r, "update-index", "--assume-unchanged", "a.txt"), False),
    "untracked .gitattributes": (lambda r: (r / ".gitattributes").write_text("*.txt eol=crlf\n"), False),
    "core.autocrlf": (_with_config("core.autocrlf", "true"), False),
    "core.fileMode off": (_with_config("core.fileMode", "false"), False),
    "a clean filter": (_with_config("filter.x.clean", "cat"), False),
    "info/attributes": (_info_attributes, False),
}


@pytest.mark.parametrize("settled", [False, True], ids=["racy", "settled"])
@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_the_status_read_in_process_is_gits(
    repo: Repo, case: tuple[Callable[[Path], object], bool | None], settled: bool
) -> None:
    change, decided = case
    clean = repo.reset(settled)
    change(repo.root)
    tree = treeprint.take(repo.root)
    assert tree is not None
    mine = trackedstatus.derive(repo.root, tree, clean)
    status, ignored = Checkout(repo.root).status_and_ignored()
    assert decided is None or (mine is not None) == decided, (mine, status, ignored)
    if mine is not None:
        assert mine == status
        assert ignored == []


def test_an_index_not_known_to_match_head_is_left_to_git(repo: Repo) -> None:
    repo.reset(settled=False)
    (repo.root / "a.txt").write_text("changed\n")
    tree = treeprint.take(repo.root)
    assert tree is not None
    assert trackedstatus.derive(repo.root, tree, b"\0" * 20) is None


def test_a_tracked_gitattributes_is_left_to_git(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    (root / ".gitattributes").write_text("*.txt text eol=crlf\n")
    (root / "a.txt").write_text("alpha\n")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    clean = trackedstatus.index_checksum(root)
    assert clean is not None
    (root / "a.txt").write_text("alpha\r\n")
    tree = treeprint.take(root)
    assert tree is not None
    assert trackedstatus.derive(root, tree, clean) is None


@pytest.mark.parametrize(
    "special",
    [
        ["update-index", "--index-version", "4"],
        ["update-index", "--skip-worktree", "a.txt"],
        ["add", "-N", "new.txt"],
        ["update-index", "--split-index"],
    ],
    ids=["version 4", "skip-worktree", "intent-to-add", "split index"],
)
def test_an_index_git_reads_apart_is_not_read(repo: Repo, special: list[str]) -> None:
    repo.reset(settled=False)
    (repo.root / "new.txt").write_text("new\n")
    assert trackedstatus.read_index(repo.root) is not None
    _git(repo.root, *special)
    assert trackedstatus.read_index(repo.root) is None


def _entry(path: Path, blob: bytes, *, ctime_ns: int, size: int | None) -> trackedstatus.Entry:
    """An index entry caching ``path``'s stat data as it is now (``ctime_ns``, ``size``: as given)."""
    info = path.lstat()
    ctime = ctime_ns
    mtime = info.st_mtime_ns
    cached = (
        ctime // 10**9,
        ctime % 10**9,
        mtime // 10**9,
        mtime % 10**9,
        info.st_ino & 0xFFFFFFFF,
        info.st_uid,
        info.st_gid,
        info.st_size if size is None else size,
    )
    return trackedstatus.Entry(0o100644, blob, cached)


MTIME = 1_700_000_000_500_000_000  # the file's mtime in the cases below, mid-second


@pytest.mark.parametrize(
    ("ctime_shift", "size", "index_after", "code"),
    [
        (0, None, 10**9, ""),  # stat data as cached, not racy: git does not read it (nor does this)
        (1, None, 10**9, None),  # ctime apart by 1 ns: a change to a git built with USE_NSEC only
        (10**9, None, 10**9, " M"),  # apart by a second: a change to either build
        (0, None, 1, None),  # the index 1 ns after the file: racy to the second, not to the nanosecond
        (0, None, 0, " M"),  # racy to both: the index's mtime is the file's
        (0, 0, 10**9, " M"),  # smudged (size 0): git reads it
    ],
    ids=["cached", "nanoseconds apart", "a second apart", "racy to the second", "racy", "smudged"],
)
def test_where_a_git_built_with_or_without_nanoseconds_would_differ_git_is_asked(
    tmp_path: Path, ctime_shift: int, size: int | None, index_after: int, code: str | None
) -> None:
    path = tmp_path / "f.txt"
    path.write_text("changed\n")
    os.utime(path, ns=(MTIME, MTIME))
    info = path.lstat()
    entry = _entry(path, b"\1" * 20, ctime_ns=info.st_ctime_ns - ctime_shift, size=size)
    index_mtime = divmod(MTIME + index_after, 10**9)
    assert trackedstatus._code(tmp_path, "f.txt", treeprint._key(info), entry, index_mtime) == code


def test_an_index_past_the_print_limit_is_not_read(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree too large for a print is git's anyway: its index is not parsed (20,000 entries cost more
    than the walk they would spare)."""
    repo.reset(settled=False)
    assert trackedstatus.read_index(repo.root) is not None
    monkeypatch.setattr(treeprint, "MAX_ENTRIES", len(FILES))  # the repository has one more: the link
    assert trackedstatus.read_index(repo.root) is None
    assert trackedstatus.index_checksum(repo.root) is None


def test_names_git_quotes_or_does_not_decode_are_read_as_git_lists_them(tmp_path: Path) -> None:
    """A newline, a byte that is not UTF-8, a space: the index's names and the walk's meet as git's
    ``-z`` listing decodes them (``os.fsdecode``)."""
    root = tmp_path / "repo"
    root.mkdir()
    names = [b"new\nline.txt", b"caf\xe9.txt", b"d\xff/f.txt", b"sp ace.txt"]
    _git(root, "init", "-q", "-b", "main")
    for name in names:
        path = os.path.join(os.fsencode(root), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Path(os.fsdecode(path)).write_bytes(b"x\n")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    clean = trackedstatus.index_checksum(root)
    assert clean is not None
    for name in names[:3]:
        Path(os.fsdecode(os.path.join(os.fsencode(root), name))).write_bytes(b"changed\n")
    Path(os.fsdecode(os.path.join(os.fsencode(root), names[3]))).unlink()
    tree = treeprint.take(root)
    assert tree is not None
    mine = trackedstatus.derive(root, tree, clean)
    assert mine is not None and len(mine) == 4
    assert mine == Checkout(root).status_and_ignored()[0]

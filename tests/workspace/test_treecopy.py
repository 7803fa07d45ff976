"""The champion's copy moved by copying the candidate's files (``treecopy``, ADR 0052) against ``git
checkout``.

Each case commits one change in a real candidate clone (the index recorded after the commit, as crucible
records it), then moves a clean champion clone to that commit with ``treecopy.advance`` and a reference
clone with ``git checkout``: every entry of the two trees (name, kind, execute bit, content), HEAD and the
index's entries must be the same, and git must find the moved copy clean. Each case says whether the copy
must be done in this process; where it is not, the champion must be untouched.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.workspace import trackedstatus, treecopy
from controller.workspace.checkout import Checkout
from tests.support.small_tree import commit_small_tree

FILES = {
    "a.txt": "alpha\n",
    "b.txt": "bravo\n",
    "src/c.py": "print('c')\n",
    "src/deep/d.py": "d = 1\n",
    "tool.sh": "#!/bin/sh\n",
    ".gitignore": "*.log\n",
}


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True)
    return done.stdout.decode("utf-8", "surrogateescape")


@dataclass
class Clones:
    candidate: Path
    champion: Path
    reference: Path
    base: str

    def reset(self) -> None:
        for root in (self.candidate, self.champion, self.reference):
            (root / ".git" / "index").unlink(missing_ok=True)
            _git(root, "checkout", "-q", "--detach", "-f", self.base)
            _git(root, "clean", "-ffdxq")

    def keep_a(self) -> tuple[str, bytes]:
        """From the base, the candidate commits a new ``a.txt`` as a kept turn does: the new commit and
        the checksum of the index that commit left."""
        self.reset()
        (self.candidate / "a.txt").write_text("kept\n")
        _git(self.candidate, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "kept")
        new = _git(self.candidate, "rev-parse", "HEAD").strip()
        clean = trackedstatus.index_checksum(self.candidate)
        assert clean is not None
        return new, clean


@pytest.fixture(scope="module")
def clones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clones]:
    top = tmp_path_factory.mktemp("treecopy")
    source = top / "source"
    source.mkdir()
    base = commit_small_tree(source, FILES)
    roots = []
    for name in ("candidate", "champion", "reference"):
        subprocess.run(["git", "clone", "-q", "--shared", str(source), str(top / name)], check=True)
        roots.append(top / name)
    # The champion and the reference borrow the candidate's new objects, as crucible's arms do.
    for root in roots[1:]:
        alternates = root / ".git" / "objects" / "info" / "alternates"
        alternates.write_text(alternates.read_text() + f"{roots[0] / '.git' / 'objects'}\n")
    yield Clones(roots[0], roots[1], roots[2], base)


def _relink(path: Path, target: str) -> None:
    path.unlink()
    os.symlink(target, path)


def _file_to_dir(root: Path) -> None:
    (root / "b.txt").unlink()
    (root / "b.txt").mkdir()
    (root / "b.txt" / "inner.txt").write_text("x\n")


# name -> (the candidate's change, committed; whether the move must be done in this process)
CASES: dict[str, tuple[Callable[[Path], object], bool]] = {
    "modified": (lambda r: (r / "a.txt").write_text("alpha, longer\n"), True),
    "same size": (lambda r: (r / "a.txt").write_text("ALPHA\n"), True),
    "added": (lambda r: (r / "src" / "e.py").write_text("e = 1\n"), True),
    "added in new directories": (
        lambda r: ((r / "n" / "m").mkdir(parents=True), (r / "n/m/f.txt").write_text("f\n")),
        True,
    ),
    "deleted": (lambda r: (r / "b.txt").unlink(), True),
    "a directory's last file deleted": (lambda r: (r / "src/deep/d.py").unlink(), True),
    "chmod +x": (lambda r: (r / "a.txt").chmod(0o755), True),
    "chmod -x": (lambda r: (r / "tool.sh").chmod(0o644), True),
    "symlink added": (lambda r: os.symlink("../a.txt", r / "src" / "l"), True),
    "symlink retargeted": (lambda r: _relink(r / "link", "b.txt"), True),
    "file replaced by a symlink": (lambda r: _relink(r / "b.txt", "a.txt"), True),
    "symlink replaced by a file": (lambda r: ((r / "link").unlink(), (r / "link").write_text("l\n")), True),
    "renamed": (lambda r: (r / "a.txt").rename(r / "z.txt"), True),
    "emptied": (lambda r: (r / "a.txt").write_text(""), True),
    "file replaced by a directory": (_file_to_dir, False),
    "a .gitattributes": (lambda r: (r / ".gitattributes").write_text("*.txt text\n"), False),
}


def _tree(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry below ``root`` but ``.git``: kind (with the execute bit) and content."""
    out: dict[str, tuple[str, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (dirpath == str(root) and d == ".git")]
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                out[rel] = ("link", os.readlink(full).encode())
            elif stat.S_ISDIR(info.st_mode):
                out[rel] = ("dir", b"")
            else:
                kind = "exec" if info.st_mode & stat.S_IXUSR else "file"
                out[rel] = (kind, Path(full).read_bytes())
    return out


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_the_copy_is_what_git_checkout_makes(
    clones: Clones, case: tuple[Callable[[Path], object], bool]
) -> None:
    change, copied = case
    clones.reset()
    change(clones.candidate)
    _git(clones.candidate, "add", "-A")
    _git(clones.candidate, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "kept")
    new = _git(clones.candidate, "rev-parse", "HEAD").strip()
    clean = trackedstatus.index_checksum(clones.candidate)
    assert clean is not None
    before = _tree(clones.champion)
    moved = treecopy.advance(clones.champion, clones.candidate, clean, new)
    assert (moved is not None) == copied
    if moved is None:
        assert _tree(clones.champion) == before, "nothing touched"
        return
    listed = _git(clones.candidate, "diff", "--name-only", "-z", "--no-renames", clones.base, new)
    assert moved == sorted(listed.split("\0")[:-1])
    _git(clones.reference, "checkout", "-q", "--detach", new)
    assert _tree(clones.champion) == _tree(clones.reference)
    assert Checkout(clones.champion).head() == new
    assert _git(clones.champion, "ls-files", "-s") == _git(clones.reference, "ls-files", "-s")
    assert Checkout(clones.champion).status_and_ignored() == ({}, [])


def test_a_candidate_file_that_is_not_its_blob_is_not_copied(clones: Clones) -> None:
    new, clean = clones.keep_a()
    (clones.candidate / "a.txt").write_text("then changed\n")  # the measurement wrote it, say
    before = _tree(clones.champion)
    assert treecopy.advance(clones.champion, clones.candidate, clean, new) is None
    assert _tree(clones.champion) == before
    assert treecopy.advance(clones.champion, clones.candidate, b"\0" * 20, new) is None


def test_a_symlinked_head_is_not_written_through(clones: Clones, tmp_path: Path) -> None:
    """A HEAD replaced by a symlink (holding what HEAD held, so a print would not tell) is not written:
    the move is git's."""
    new, clean = clones.keep_a()
    outside = tmp_path / "outside"
    head = clones.champion / ".git" / "HEAD"
    outside.write_bytes(head.read_bytes())
    head.unlink()
    os.symlink(outside, head)
    try:
        assert treecopy.advance(clones.champion, clones.candidate, clean, new) is None
        assert outside.read_text() == f"{clones.base}\n"
    finally:
        head.unlink()
        head.write_text(f"{clones.base}\n")


def test_a_file_with_another_name_is_replaced_not_written_through(clones: Clones) -> None:
    """A champion file hard-linked elsewhere keeps the other name's content: the move makes a new file,
    as git's checkout does."""
    new, clean = clones.keep_a()
    other = clones.champion.parent / "other-name"
    other.unlink(missing_ok=True)
    os.link(clones.champion / "a.txt", other)
    assert treecopy.advance(clones.champion, clones.candidate, clean, new) == ["a.txt"]
    assert (clones.champion / "a.txt").read_text() == "kept\n"
    assert other.read_text() == "alpha\n"

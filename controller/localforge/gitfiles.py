"""Git plumbing over files and trees of the bare repositories: reading a path at a commit, committing
one file without a checkout (the contents API), and a trial merge (a pull request's ``mergeable``).

Bare repositories have no working tree, so a file is written the way GitHub's own backend does it:
blob, then a tree built in a throwaway index, then a commit whose parent is the branch head, then a
compare-and-swap of the ref. Nothing here touches a working copy or takes a lock: callers hold the
repository's lock around the ref update.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from controller.localforge.gitops import git_env, run


@dataclass(frozen=True)
class TreeEntry:
    """One entry of ``git ls-tree -l``: ``kind`` is ``blob``, ``tree`` or ``commit`` (a submodule)."""

    mode: str
    kind: str
    sha: str
    size: int
    path: str

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Person:
    """A commit's author or committer: name, email and an optional ISO 8601 date."""

    name: str
    email: str
    date: str | None = None


def _entries(out: bytes) -> list[TreeEntry]:
    found = []
    for record in out.decode(errors="surrogateescape").split("\0"):
        if not record:
            continue
        meta, path = record.split("\t", 1)
        mode, kind, sha, size = meta.split()
        found.append(TreeEntry(mode, kind, sha, int(size) if size != "-" else 0, path))
    return found


def entry(path: Path, commit: str, filepath: str) -> TreeEntry | None:
    """The entry at ``filepath`` in ``commit``'s tree, or None; ``""`` is the root tree."""
    if not filepath:
        tree = run(path, "rev-parse", f"{commit}^{{tree}}").decode().strip()
        return TreeEntry("040000", "tree", tree, 0, "")
    out = run(path, "ls-tree", "-z", "-l", "--full-tree", commit, "--", filepath)
    return next((e for e in _entries(out) if e.path == filepath), None)


def children(path: Path, commit: str, directory: str) -> list[TreeEntry]:
    """The entries directly inside ``directory`` (``""``: the root) of ``commit``."""
    spec = f"{directory.rstrip('/')}/" if directory else ""
    out = run(path, "ls-tree", "-z", "-l", "--full-tree", commit, "--", *([spec] if spec else []))
    return _entries(out)


def blob(path: Path, sha: str) -> bytes:
    return run(path, "cat-file", "blob", sha)


def commit_file(
    path: Path,
    parent: str,
    filepath: str,
    content: bytes,
    message: str,
    author: Person,
    committer: Person,
) -> str:
    """A new commit on top of ``parent`` whose tree is ``parent``'s with ``filepath`` set to ``content``
    (a regular file, mode 100644 unless the file already was executable). Returns its sha."""
    sha = run(path, "hash-object", "-w", "--stdin", stdin=content).decode().strip()
    existing = entry(path, parent, filepath)
    mode = existing.mode if existing is not None and existing.kind == "blob" else "100644"
    with tempfile.TemporaryDirectory(prefix="localforge-index-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        run(path, "read-tree", parent, env=env)
        run(path, "update-index", "--add", "--cacheinfo", f"{mode},{sha},{filepath}", env=env)
        tree = run(path, "write-tree", env=env).decode().strip()
    who = {
        "GIT_AUTHOR_NAME": author.name,
        "GIT_AUTHOR_EMAIL": author.email,
        "GIT_COMMITTER_NAME": committer.name,
        "GIT_COMMITTER_EMAIL": committer.email,
    }
    if author.date:
        who["GIT_AUTHOR_DATE"] = author.date
    if committer.date:
        who["GIT_COMMITTER_DATE"] = committer.date
    return run(path, "commit-tree", tree, "-p", parent, "-m", message, env=who).decode().strip()


def merges_cleanly(path: Path, base: str, head: str) -> bool:
    """Whether ``head`` merges into ``base`` without conflicts (``git merge-tree --write-tree``, which
    writes objects but no ref: what GitHub's ``mergeable`` reports)."""
    proc = subprocess.run(
        ["git", "-C", str(path), "merge-tree", "--write-tree", "--no-messages", base, head],
        capture_output=True,
        env=git_env(),
    )
    if proc.returncode not in (0, 1):
        raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout, proc.stderr)
    return proc.returncode == 0

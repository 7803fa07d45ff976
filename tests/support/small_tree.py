"""A small committed tree of tracked files (nested directories, an executable, a symlink, an ignore
file): the shape the in-process status (``trackedstatus``) and the in-process champion move
(``treecopy``) must answer for exactly as git does, built once per test module."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path


def commit_small_tree(root: Path, files: Mapping[str, str]) -> str:
    """A new repository at ``root`` (which must exist) holding ``files``, ``tool.sh`` executable and a
    symlink ``link`` to ``a.txt``, committed once on ``main``: its commit id."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, check=True, text=True
        ).stdout

    git("init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "tool.sh").chmod(0o755)
    os.symlink("a.txt", root / "link")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return git("rev-parse", "HEAD").strip()

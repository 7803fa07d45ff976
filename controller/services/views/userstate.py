"""A fingerprint of the user's checkout, taken at run start and checked by ``accept``.

``accept`` writes into the user's working tree, the only command that ever does; it refuses unless the
checkout is exactly as it was when the run started (same HEAD, same uncommitted changes), so it can never
mix the run's patch with work the user did meanwhile.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from controller.workspace.git import run_git


def user_head(repo: Path) -> str | None:
    try:
        return run_git(["rev-parse", "--verify", "-q", "HEAD"], repo)
    except Exception:
        return None


def user_state(repo: Path) -> str:
    """sha256 over ``git status`` (untracked files included) and the bytes of every path it lists.

    Only read-only commands run here: ``status --no-optional-locks`` refreshes the index in memory
    without writing it, while ``git diff`` would rewrite a user's index whose stat cache is stale.
    """
    digest = hashlib.sha256()
    status = [
        "--no-optional-locks",
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
    ]
    raw = run_git(status, repo)
    digest.update(raw.encode("utf-8", "surrogateescape"))
    for entry in raw.split("\0"):
        if len(entry) < 4:
            continue
        path = repo / entry[3:]
        digest.update(b"\0" + entry[3:].encode("utf-8", "surrogateescape") + b"\0")
        if path.is_symlink():
            digest.update(os.readlink(path).encode("utf-8", "surrogateescape"))
        elif path.is_file():
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()

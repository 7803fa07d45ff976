"""A fingerprint of the user's checkout, taken at run start and checked by ``accept``.

``accept`` writes into the user's working tree, the only command that ever does; it refuses unless the
checkout is exactly as it was when the run started (same HEAD, same uncommitted changes), so it can never
mix the run's patch with work the user did meanwhile.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from controller.workspace.git import run_git


def user_head(repo: Path) -> str | None:
    try:
        return run_git(["rev-parse", "--verify", "-q", "HEAD"], repo)
    except Exception:
        return None


def user_state(repo: Path) -> str:
    """sha256 over ``git status`` (untracked included) and the tracked diff against HEAD."""
    digest = hashlib.sha256()
    digest.update(run_git(["status", "--porcelain=v1", "-z", "--untracked-files=all"], repo).encode())
    digest.update(b"\0--\0")
    digest.update(run_git(["diff", "HEAD", "--binary", "--no-color", "--no-ext-diff"], repo).encode())
    return digest.hexdigest()

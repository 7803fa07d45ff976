"""git's writes in a workspace sent to a scratch copy, for a CLI that ``git add``\\ s (``git_scratch``).

Aider ``git add``\\ s every file it creates, and the sandbox shows ``.git`` read-only: the ``add`` fails
after the file was created empty, and the edit is lost. ``GIT_INDEX_FILE`` (a copy of the checkout's
index) and ``GIT_OBJECT_DIRECTORY`` (an empty folder, the checkout's objects as its alternate) in the
turn's folder take those writes, so the new file gets its content and the checkout's ``.git`` stays
untouched, with or without the sandbox. The controller makes the copy before the spawn (``turn.prepare``),
where aider's launcher used to make it inside the sandbox (ADR-0039).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

GIT_TIMEOUT_S = 30.0


def git_scratch(workdir: Path, scratch: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that send git's writes in ``workdir`` (index and new objects) into ``scratch``,
    made here; {} when ``workdir`` is no git checkout (a composite workspace's root)."""
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--git-path", "index", "--git-path", "objects"],
            cwd=workdir,
            env=dict(environ),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = found.stdout.splitlines()
    if found.returncode != 0 or len(lines) != 2:
        return {}
    index, objects = (workdir / line for line in lines)
    (scratch / "objects").mkdir(parents=True, exist_ok=True)
    if index.is_file():
        shutil.copyfile(index, scratch / "index")
    return {
        "GIT_INDEX_FILE": str(scratch / "index"),
        "GIT_OBJECT_DIRECTORY": str(scratch / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects.resolve()),
    }

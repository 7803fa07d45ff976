"""The parts of a clone's ``.git`` that decide what crucible's own git runs, and their restoration.

Without a sandbox, an agent (or kept code that a metric runs) can write a checkout's ``.git``: a
``core.fsmonitor`` or filter driver in ``config``, a hook, an ``info/attributes`` line, an alternate
object store, a branch. Crucible's next git command there runs outside any sandbox with the
controller's environment, and the change would stay for every later turn. ``-c`` pins
(``controller.workspace.git.pinned_config``) cover the programs git starts on its own; this module
covers the rest: it records the control files of a ``.git`` before an untrusted command runs and,
after it, names and undoes every change, in plain Python, before any git command reads them.

Not recorded: objects (crucible adds them too; extra ones are harmless), the index, logs and the
HEAD file (HEAD has its own check and the restore rewrites the index from HEAD).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path

# Entries of a .git directory whose content can make git run a program or read another repository.
CONTROL_ENTRIES = (
    "config",
    "config.worktree",
    "commondir",
    "gitdir",
    "packed-refs",
    "shallow",
    "hooks",
    "info",
    "refs",
    "branches",
    "remotes",
    "modules",
    "worktrees",
    "objects/info",
)
_MAX_FILE = 1 << 20  # a larger control file is recorded by size and mtime only

Entry = bytes | str


def _entry(full: Path) -> Entry | None:
    try:
        info = os.lstat(full)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "symlink:" + os.readlink(full)
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    if not stat.S_ISREG(info.st_mode):
        return f"special:{info.st_mode:o}"
    if info.st_size > _MAX_FILE:
        return f"large:{info.st_size}:{info.st_mtime_ns}:{info.st_mode:o}"
    mode = "x" if info.st_mode & stat.S_IXUSR else "-"
    try:
        with open(full, "rb") as handle:
            return mode.encode() + handle.read()
    except OSError:
        return f"unreadable:{info.st_mode:o}"


def control_state(git_dir: Path) -> dict[str, Entry]:
    """Every control entry under ``git_dir`` (relative path -> content, "dir", "symlink:…")."""
    state: dict[str, Entry] = {}
    for name in CONTROL_ENTRIES:
        top = git_dir / name
        entry = _entry(top)
        if entry is None:
            continue
        state[name] = entry
        if entry != "dir":
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            for child in [*dirnames, *filenames]:
                full = Path(dirpath) / child
                found = _entry(full)
                if found is not None:
                    state[full.relative_to(git_dir).as_posix()] = found
    return state


def tampered(before: Mapping[str, Entry], after: Mapping[str, Entry]) -> list[str]:
    """Control paths added, removed or changed, sorted."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def restore_control(git_dir: Path, before: Mapping[str, Entry]) -> None:
    """Put every control entry of ``git_dir`` back as ``before`` recorded it (what was added is deleted).

    A "large:" file cannot be rewritten from its record; it is left alone (crucible writes none)."""
    after = control_state(git_dir)
    for rel in sorted(set(after) - set(before), key=lambda p: -p.count("/")):
        full = git_dir / rel
        if full.is_dir() and not full.is_symlink():
            shutil.rmtree(full, ignore_errors=True)
        else:
            full.unlink(missing_ok=True)
    for rel in sorted(before, key=lambda p: p.count("/")):
        entry = before[rel]
        if after.get(rel) == entry:
            continue
        full = git_dir / rel
        if full.is_dir() and not full.is_symlink() and entry != "dir":
            shutil.rmtree(full)
        elif (full.exists() or full.is_symlink()) and not full.is_dir():
            full.unlink()
        if entry == "dir":
            full.mkdir(parents=True, exist_ok=True)
        elif isinstance(entry, str) and entry.startswith("symlink:"):
            full.symlink_to(entry[len("symlink:") :])
        elif isinstance(entry, bytes):
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_bytes(entry[1:])
            full.chmod(0o755 if entry[:1] == b"x" else 0o644)

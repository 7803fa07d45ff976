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
import time
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


StatKey = tuple[int, int, int, int, int]
ControlCache = dict[str, tuple[StatKey, bytes]]
"""Content of control files already read, by absolute path, with the ``lstat`` data it was read at."""

# A file whose ctime is this close to the moment it was read is read again next time: file times come
# from a coarse clock, so a second write within the same tick could keep every stat field (git's
# "racy" entries). A write cannot set ctime back, so an older ctime proves the content is unchanged.
_RACY_NS = 2_000_000_000


def _entry_of(full: str, info: os.stat_result, cache: ControlCache | None) -> Entry:
    """What ``control_state`` records for the entry at ``full`` with ``lstat`` data ``info``.

    With ``cache``, a regular file whose stat data (mode, size, mtime, ctime, inode) matches the last
    read is not read again: that keeps the scan before and after every command a few dozen ``lstat``
    calls instead of as many file reads."""
    if stat.S_ISLNK(info.st_mode):
        return "symlink:" + os.readlink(full)
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    if not stat.S_ISREG(info.st_mode):
        return f"special:{info.st_mode:o}"
    if info.st_size > _MAX_FILE:
        return f"large:{info.st_size}:{info.st_mtime_ns}:{info.st_mode:o}"
    key = (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    if cache is not None and (hit := cache.get(full)) is not None and hit[0] == key:
        return hit[1]
    mode = b"x" if info.st_mode & stat.S_IXUSR else b"-"
    try:
        with open(full, "rb") as handle:
            content = mode + handle.read()
    except OSError:
        return f"unreadable:{info.st_mode:o}"
    if cache is not None:
        if time.time_ns() - info.st_ctime_ns > _RACY_NS:
            cache[full] = (key, content)
        else:
            cache.pop(full, None)
    return content


def control_state(git_dir: Path, cache: ControlCache | None = None) -> dict[str, Entry]:
    """Every control entry under ``git_dir`` (relative path -> content, "dir", "symlink:…").

    ``cache`` (kept by the caller between calls on the same ``git_dir``) spares re-reading files
    whose stat data did not change; the result is the same with or without it."""
    return _scan(git_dir, cache, {})


def _key(info: os.stat_result) -> StatKey:
    return (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def _scan(git_dir: Path, cache: ControlCache | None, keys: dict[str, StatKey]) -> dict[str, Entry]:
    """``control_state``, recording the stat data of every entry it found into ``keys``."""
    state: dict[str, Entry] = {}
    base = os.fspath(git_dir) + "/"
    for name in CONTROL_ENTRIES:
        try:
            info = os.lstat(base + name)
        except OSError:
            continue
        entry = _entry_of(base + name, info, cache)
        state[name] = entry
        keys[name] = _key(info)
        if entry != "dir":
            continue
        pending = [name]
        while pending:
            current = pending.pop()
            try:
                children = list(os.scandir(base + current))
            except OSError:
                continue
            for child in children:
                rel = f"{current}/{child.name}"
                try:
                    child_info = child.stat(follow_symlinks=False)
                except OSError:
                    continue
                found = _entry_of(base + rel, child_info, cache)
                state[rel] = found
                keys[rel] = _key(child_info)
                if found == "dir":
                    pending.append(rel)
    return state


_TOP = frozenset(name for name in CONTROL_ENTRIES if "/" not in name)
_NESTED = tuple(name for name in CONTROL_ENTRIES if "/" in name)
STAMP = "crucible-guard-stamp"
"""A file in ``.git`` (not a control entry) touched before each walk: its ctime is the filesystem's
own "now", whatever its clock's granularity (``ControlGuard``)."""


class ControlGuard:
    """``control_state`` of one ``.git``, scanned before and after every command, most often to find it
    unchanged: then a check of the stat data of each entry the last scan found, and of the names at the
    top of ``.git``, stands in for the walk (no directory listed below the top, no file read).

    Why that proves nothing changed: every write sets the ctime of what it changes, an entry added to
    or removed from a directory changes the directory's, and a process cannot set a ctime. A change
    within the same tick of the filesystem's clock as the scan could keep every stat field, so the last
    scan is reused only if each entry's ctime is older than a stamp file touched just before it (git's
    "racy" rule, with the filesystem's clock and granularity, not this process's; a write during the
    walk has a ctime no older than the stamp's); else the next call walks again. The result is always
    what ``control_state`` would return (tests/workspace)."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.cache: ControlCache = {}
        self._last: tuple[dict[str, Entry], dict[str, StatKey], frozenset[str]] | None = None

    def state(self) -> dict[str, Entry]:
        """The control entries now (do not change the mapping: it may be returned again)."""
        if self._last is not None and self._holds(*self._last[1:]):
            return self._last[0]
        keys: dict[str, StatKey] = {}
        stamp = self._stamp()  # before the walk: whatever changes during it has a ctime >= the stamp's
        state = _scan(self.git_dir, self.cache, keys)
        settled = stamp is not None and all(key[3] < stamp for key in keys.values())
        top = frozenset(name for name in keys if "/" not in name)
        self._last = (state, keys, top) if settled else None
        return state

    def _holds(self, keys: dict[str, StatKey], top: frozenset[str]) -> bool:
        """Whether every entry the last scan found is as it found it, and no other exists."""
        base = os.fspath(self.git_dir) + "/"
        try:
            with os.scandir(base) as listing:
                names = {entry.name for entry in listing if entry.name in _TOP}
            if names != top or any(name not in keys and os.path.lexists(base + name) for name in _NESTED):
                return False
            return all(_key(os.lstat(base + rel)) == key for rel, key in keys.items())
        except OSError:
            return False

    def _stamp(self) -> int | None:
        """Touch the stamp file and return its ctime; None if it cannot be (a command replaced it with
        a directory, a symlink or a FIFO: then every call walks)."""
        # Written over in place, not truncated: a write sets the ctime as well, and truncating freed and
        # allocated the file's block on every scan (50 us of CPU against a few on ext4 here, ADR-0050).
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(os.path.join(self.git_dir, STAMP), flags, 0o600)
        except OSError:
            return None
        try:
            os.pwrite(fd, b"x", 0)
            return os.fstat(fd).st_ctime_ns
        except OSError:
            return None
        finally:
            os.close(fd)


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

"""The champion's copy moved to a kept commit by copying the candidate's files, not by ``git checkout``
(ADR 0052, decision 6).

After a keep, the candidate's copy holds the new commit: its index is one crucible recorded as matching
that commit (``trackedstatus.index_checksum`` after the commit), and its files are what the commit
took. The champion's copy is the old commit, proved clean by its print (ADR 0049). The paths the two
indexes disagree on are exactly the files that differ between the commits; ``advance`` writes those from
the candidate's files, each checked against the blob id the candidate's index holds for it, removes the
ones the new commit does not have, and puts the candidate's index (git's own bytes, not a second writer
of its format) and the new HEAD in place. Everything is checked before anything is written: where a
check fails (a file whose content is not its blob, a directory where a file goes, an index this module
does not read, content conversion: ``trackedstatus.config_allows``), nothing is touched and the caller
runs ``git checkout`` as before.

The index's stat data then describe the candidate's files, not the champion's (other inodes): git
finds every entry stat-dirty and reads its content at its next walk there, which is what it does after
any copy of a repository.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from controller.workspace import trackedstatus, treeprint
from controller.workspace.overwrite import write_over

_HEAD = ".git/HEAD"


def advance(target: Path, source: Path, clean: bytes, new: str) -> list[str] | None:
    """Move the clean checkout at ``target`` (its index matching its HEAD) to commit ``new``, which the
    checkout at ``source`` holds with an index of checksum ``clean`` known to match ``new``. Returns the
    paths written or removed (the commits' difference), or None if nothing was done (ask git)."""
    after = trackedstatus.read_index(source)
    before = trackedstatus.read_index(target)
    if after is None or before is None or after.checksum != clean:
        return None
    if not trackedstatus.config_allows(target) or not trackedstatus.config_allows(source):
        return None
    new_entries, old_entries = after.entries, before.entries
    if any(os.path.basename(p) == ".gitattributes" for p in (*new_entries, *old_entries)):
        return None
    names = new_entries.keys() | old_entries.keys()
    differ = sorted(p for p in names if _differs(new_entries, old_entries, p))
    plan = _plan(target, source, after, differ)
    if plan is None or not all(_regular(os.path.join(target, p)) for p in (treeprint.INDEX, _HEAD)):
        return None
    try:
        index = Path(source, treeprint.INDEX).read_bytes()
    except OSError:
        return None
    if index[-20:] != clean:
        return None
    _apply(target, plan)
    write_over(Path(target, treeprint.INDEX), index, flags=os.O_NOFOLLOW)
    write_over(Path(target, _HEAD), f"{new}\n".encode(), flags=os.O_NOFOLLOW)
    return differ


def _differs(a: Mapping[str, trackedstatus.Entry], b: Mapping[str, trackedstatus.Entry], path: str) -> bool:
    one, other = a.get(path), b.get(path)
    return one is None or other is None or one.mode != other.mode or one.blob != other.blob


# A step of the move: the path, and what goes there (None: removed; else the mode and the content, a
# symlink's target for a symlink).
_Step = tuple[str, tuple[int, bytes] | None]


def _plan(target: Path, source: Path, after: trackedstatus.Index, differ: list[str]) -> list[_Step] | None:
    """What ``advance`` writes, each file read from ``source`` and checked against its blob id; None if
    a step cannot be done as git's checkout does it plainly."""
    steps: list[_Step] = []
    for path in differ:
        entry = after.entries.get(path)
        where = os.path.join(target, path)
        try:
            info: os.stat_result | None = os.lstat(where)
        except FileNotFoundError:
            info = None
        except OSError:
            return None
        if info is not None and stat.S_ISDIR(info.st_mode):
            return None  # a directory where a file was or goes: git's
        if entry is None:
            if info is None:
                return None  # the old commit's file is not there: the copy is not what it was proved
            steps.append((path, None))
            continue
        if not _parents_are_directories(target, path):
            return None
        content = _read(os.path.join(source, path), entry.mode)
        if content is None or trackedstatus.blob_id(content) != entry.blob:
            return None
        steps.append((path, (entry.mode, content)))
    return steps


def _regular(path: str) -> bool:
    """Whether ``path`` is a regular file (not a symlink ``advance`` would write through)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _parents_are_directories(root: Path, path: str) -> bool:
    """Whether every directory above ``path`` is a directory or absent (created by the move)."""
    parts = path.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        try:
            info = os.lstat(os.path.join(root, *parts[:i]))
        except FileNotFoundError:
            return True
        except OSError:
            return False
        if not stat.S_ISDIR(info.st_mode):
            return False
    return True


def _read(path: str, mode: int) -> bytes | None:
    try:
        if mode == trackedstatus.SYMLINK:
            return os.readlink(os.fsencode(path)) if os.path.islink(path) else None
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or bool(info.st_mode & stat.S_IXUSR) != (mode == 0o100755):
            return None
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _apply(target: Path, steps: list[_Step]) -> None:
    """Do ``steps`` as git's checkout does: a changed file removed and created anew, with 0666 or 0777
    under the umask; a removed file's emptied directories removed. A regular file that stays one, with
    its execute bit, and has no other name (git never writes into a file another name may share) is
    written over in place instead: creating a file costs 100-450 us of CPU on this disk, writing over
    one a few (ADR-0050); its mode is the one git gave it."""
    for path, what in steps:
        where = os.path.join(target, path)
        if what is not None and what[0] != trackedstatus.SYMLINK and _overwritable(where, what[0]):
            write_over(Path(where), what[1], flags=os.O_NOFOLLOW)
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(where)
        if what is None:
            _prune(target, os.path.dirname(path))
            continue
        mode, content = what
        os.makedirs(os.path.dirname(where), exist_ok=True)
        if mode == trackedstatus.SYMLINK:
            os.symlink(content, os.fsencode(where))
            continue
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o777 if mode == 0o100755 else 0o666)
        try:
            written = 0
            while written < len(content):
                written += os.write(fd, content[written:])
        finally:
            os.close(fd)


def _overwritable(path: str, mode: int) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    executable = bool(info.st_mode & stat.S_IXUSR)
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and executable == (mode == 0o100755)


def _prune(root: Path, directory: str) -> None:
    """Remove ``directory`` and those above it while they are empty, as git does after a removal."""
    while directory:
        try:
            os.rmdir(os.path.join(root, directory))
        except OSError:
            return
        directory = os.path.dirname(directory)

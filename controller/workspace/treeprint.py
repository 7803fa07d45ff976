"""A checkout's working tree as ``lstat`` data, to prove in-process that nothing changed since a moment.

Three of a served turn's six git processes (ADR 0049) are walks that almost always find nothing: the
champion's copy after the agent (``champion_copy.repair``), the candidate after the measurement, and
the champion's listing after it moved. On a small tree a Python walk of the tree costs less than
starting git, so crucible records the tree where it leaves it (``take``) and later walks it again
(``holds``): equal, the tree is what it was and git's answer would be what it was; anything else, and
the caller asks git as before. This module only ever concludes "unchanged".

What proves it, entry by entry outside ``.git`` (plus ``.git/HEAD``'s content and ``.git/index``, which
decide what ``git status`` reports): type and mode, size, mtime, ctime and inode. A process can set a
file's mtime back (``os.utime``), not its ctime; a write, a chmod, a rename or a new link sets it, and a
file put in another's place by rename has another inode. The catch is git's "racy" one: the kernel
stamps files from a coarse clock (a jiffy, several milliseconds), so a file rewritten within the tick
it was recorded in can keep every field, size included. So ``take`` first touches a stamp file in
``.git`` (its ctime is the filesystem's own "now") and hashes the content of every entry whose ctime
is not older than the stamp (a symlink: its target); ``holds`` hashes those again. Files crucible just
wrote or checked out are the ones that can be, and there are few of them.

A directory is compared on its type, mode and inode: entries added to or removed from it are seen by
their names, not by its times. Past ``MAX_ENTRIES`` entries a walk costs more than git's own (git's
index caches the stat data and its walk is C): ``take`` gives up and the caller keeps git.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

# Entries (files, links and directories, outside ``.git``) past which a tree is left to git. Measured
# (ADR 0049): a walk costs about 2.7 µs of CPU an entry here, a small `git status` 2 ms plus 1.3 µs a
# file; a turn makes five walks in place of three git processes, which breaks even near 550 entries.
MAX_ENTRIES = 500
STAMP = "crucible-tree-stamp"
"""A file in ``.git`` (not a control entry: ``gitguard``) touched before each walk."""

Key = tuple[int, int, int, int, int, int, int]
"""``lstat`` data of an entry: mode, size, mtime, ctime (ns), inode, owner and group; a directory's is
(mode, 0, 0, 0, inode, 0, 0). The owner is there for ``trackedstatus``, which compares what git's
index caches (a ``chown`` within the clock tick of a recorded ctime keeps the ctime)."""

_HEAD = ".git/HEAD"
INDEX = ".git/index"
"""The index's path in a print: a ``changed`` path for ``holds`` after crucible's own checkout."""
# Entries a walk in ``holds`` may find beyond the print's and what crucible changed, before it gives up.
SLACK = 256


@dataclass(frozen=True)
class TreePrint:
    """A working tree as ``take`` found it: ``entries`` by "/"-separated relative path (with
    ``.git/index``; ``.git/HEAD`` is kept as ``head``, its content), ``hashes`` the content of the
    entries that were racy then (files changed within the stamp's tick), by path."""

    entries: Mapping[str, Key]
    hashes: Mapping[str, bytes]
    head: bytes


def _key(info: os.stat_result) -> Key:
    if stat.S_ISDIR(info.st_mode):
        return (info.st_mode, 0, 0, 0, info.st_ino, 0, 0)
    mode, size, ino = info.st_mode, info.st_size, info.st_ino
    return (mode, size, info.st_mtime_ns, info.st_ctime_ns, ino, info.st_uid, info.st_gid)


def _walk(root: Path, limit: int) -> dict[str, Key] | None:
    """``lstat`` data of every entry below ``root`` but ``.git`` (symlinks not followed), and of
    ``.git/index``; None past ``limit`` entries (counted as they come: a ``node_modules`` of 50,000
    is given up after ``limit``, not listed first) or if a directory cannot be listed."""
    base = os.fspath(root) + "/"
    found: dict[str, Key] = {}
    pending = [""]
    isdir = stat.S_ISDIR
    try:
        while pending:
            current = pending.pop()
            with os.scandir(base + current) as listing:
                for entry in listing:
                    rel = current + entry.name
                    if rel == ".git":
                        continue
                    info = entry.stat(follow_symlinks=False)
                    mode = info.st_mode
                    if isdir(mode):
                        found[rel] = (mode, 0, 0, 0, info.st_ino, 0, 0)
                        pending.append(rel + "/")
                    else:
                        found[rel] = (
                            mode,
                            info.st_size,
                            info.st_mtime_ns,
                            info.st_ctime_ns,
                            info.st_ino,
                            info.st_uid,
                            info.st_gid,
                        )
                    if len(found) > limit:
                        return None
    except OSError:
        return None
    try:
        found[INDEX] = _key(os.lstat(base + INDEX))
    except FileNotFoundError:
        pass
    except OSError:
        return None
    return found


def _content(root: Path, rel: str, key: Key) -> bytes | None:
    """What an entry holds beyond its stat data: a file's sha256, a symlink's target; None for a
    directory or a special file (nothing to rewrite in place), or if it cannot be read."""
    full = os.path.join(root, rel)
    try:
        if stat.S_ISLNK(key[0]):
            return b"link:" + os.fsencode(os.readlink(full))
        if not stat.S_ISREG(key[0]):
            return b""
        with open(full, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").digest()
    except OSError:
        return None


def _head(root: Path) -> bytes | None:
    try:
        return (root / _HEAD).read_bytes()
    except OSError:
        return None


def _stamp(root: Path) -> int | None:
    """Touch the stamp file and return its ctime (the filesystem's clock, at its granularity). Its
    times are set, no data written: rewriting a file's data through ``O_TRUNC`` makes ext4 flush it at
    close (``auto_da_alloc``), 3 ms of waiting a call on this disk. None if it cannot be touched (a
    command replaced it with a FIFO or a directory): then no print is taken or trusted."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(os.path.join(root, ".git", STAMP), flags, 0o600)
    except OSError:
        return None
    try:
        os.utime(fd)
        return os.fstat(fd).st_ctime_ns
    except OSError:
        return None
    finally:
        os.close(fd)


def take(root: Path, limit: int | None = None) -> TreePrint | None:
    """The tree at ``root`` now; None when it is larger than ``limit`` entries (``MAX_ENTRIES``) or
    cannot be read whole (then the caller asks git, as it would without a print). A tree whose index
    lists more is not walked at all."""
    limit = MAX_ENTRIES if limit is None else limit
    if tracked(root) > limit:
        return None
    stamp = _stamp(root)  # before the walk: what changes during it has a ctime no older than this
    if stamp is None:
        return None
    head = _head(root)
    found = _walk(root, limit)
    if head is None or found is None:
        return None
    hashes: dict[str, bytes] = {}
    for rel, key in found.items():
        if key[3] >= stamp and not stat.S_ISDIR(key[0]):
            content = _content(root, rel, key)
            if content is None:
                return None
            hashes[rel] = content
    return TreePrint(found, hashes, head)


def with_index(root: Path, print_: TreePrint) -> TreePrint | None:
    """``print_`` with ``.git/index`` as it is now, for a print taken just before a git command that
    rewrites nothing but the index (``git status`` writes back the stat data it refreshed): the print
    stands for the tree that command saw, walked once. The index's content is recorded too (as ``take``
    records an entry written after its stamp). None if the index cannot be read."""
    entries = dict(print_.entries)
    hashes = dict(print_.hashes)
    try:
        key = _key(os.lstat(os.path.join(root, INDEX)))
    except FileNotFoundError:
        entries.pop(INDEX, None)
        hashes.pop(INDEX, None)
        return TreePrint(entries, hashes, print_.head)
    except OSError:
        return None
    content = _content(root, INDEX, key)
    if content is None:
        return None
    entries[INDEX], hashes[INDEX] = key, content
    return TreePrint(entries, hashes, print_.head)


def holds(
    root: Path,
    print_: TreePrint,
    *,
    changed: Collection[str] = (),
    gone: Collection[str] = (),
    head: str | None = None,
) -> TreePrint | None:
    """Whether the tree at ``root`` is still as ``print_`` recorded it: the same entries, each with the
    same stat data, the racy ones with the same content, and the same HEAD. Returns a print of the tree
    now if so (taken as ``take`` takes one, so it serves the next check), else None: ask git.

    What crucible itself did since, and the caller vouches for: ``changed``, paths a checkout rewrote
    (``INDEX`` for the index), which may differ, appear or disappear; ``gone``, paths it deleted with
    everything under them (ignored files), which may be anything now; above either, directories may
    appear or disappear (but are directories if they are there). ``head``: the commit HEAD was moved
    to since (else HEAD is unchanged)."""
    changed = [rel.rstrip("/") for rel in changed]  # a directory listed as git lists one: "build/"
    gone = [rel.rstrip("/") for rel in gone]
    stamp = _stamp(root)
    expected_head = print_.head if head is None else f"{head}\n".encode()
    if stamp is None or _head(root) != expected_head:
        return None
    expected = print_.entries
    spread = sum(rel.count("/") + 1 for rel in (*changed, *gone))
    found = _walk(root, len(expected) + spread + SLACK)
    if found is None:
        return None
    hashes: dict[str, bytes] = {}
    if not changed and not gone:  # the common case: one comparison in C, then the racy entries
        if found != expected:
            return None
        fresh = [rel for rel, key in found.items() if key[3] >= stamp and not stat.S_ISDIR(key[0])]
        for rel in {*fresh, *print_.hashes}:
            content = _content(root, rel, found[rel])
            if content is None or content != print_.hashes.get(rel, content):
                return None
            if found[rel][3] >= stamp:
                hashes[rel] = content
        return TreePrint(found, hashes, expected_head)
    free = frozenset((*changed, *gone))
    under = tuple(f"{rel}/" for rel in gone)
    above = _above(free)
    for rel in expected.keys() - found.keys():
        if rel not in free and rel not in above and not rel.startswith(under):
            return None
    for rel, key in found.items():
        before: bytes | None = None
        if rel in free or (under and rel.startswith(under)):
            pass  # crucible changed it: whatever it is now is recorded below
        elif rel in above:
            if not stat.S_ISDIR(key[0]):
                return None
        elif expected.get(rel) != key:
            return None
        else:
            before = print_.hashes.get(rel)
        racy = key[3] >= stamp and not stat.S_ISDIR(key[0])
        if not racy and before is None:
            continue
        content = _content(root, rel, key)
        if content is None or (before is not None and content != before):
            return None
        if racy:
            hashes[rel] = content
    return TreePrint(found, hashes, expected_head)


def added(root: Path, print_: TreePrint) -> list[str] | None:
    """The entries at ``root`` now whose names ``print_`` does not have, as ``git ls-files --others
    --directory`` lists untracked ones: a new directory as one entry ending in "/", nothing below it.
    Only names are compared. None if the tree cannot be walked or grew past ``SLACK`` more entries."""
    found = _walk(root, len(print_.entries) + SLACK)
    if found is None:
        return None
    known = print_.entries
    out: list[str] = []
    for rel, key in found.items():
        if rel in known:
            continue
        parent = rel.rpartition("/")[0]
        if parent and parent not in known:
            continue  # below a new directory, which is listed instead
        out.append(f"{rel}/" if stat.S_ISDIR(key[0]) else rel)
    return sorted(out)


def at(print_: TreePrint, sha: str) -> bool:
    """Whether ``print_`` was taken with HEAD detached at ``sha``."""
    return print_.head == f"{sha}\n".encode()


def tracked(root: Path) -> int:
    """Entries in the index of the checkout at ``root``, from its header (bytes 8-12), without git."""
    try:
        with open(os.path.join(root, INDEX), "rb") as handle:
            header = handle.read(12)
    except OSError:
        return 0
    return int.from_bytes(header[8:12], "big") if len(header) == 12 else 0


def _above(paths: Collection[str]) -> frozenset[str]:
    """Every directory above one of ``paths``."""
    out: set[str] = set()
    for rel in paths:
        parts = rel.split("/")
        out.update("/".join(parts[:i]) for i in range(1, len(parts)))
    return frozenset(out)

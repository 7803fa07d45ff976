"""``git status`` of a small checkout that holds tracked files only, decided in this process (ADR 0052).

The candidate's policy check asks ``git status --porcelain=v1 -z --untracked-files=all
--ignored=matching`` what the agent changed: a git process a turn (2-2.5 ms of CPU here) for what is,
on a small tree where the agent edited a few files, a few lines. Most of what git needs for that
answer is data this process can read exactly as git reads it:

- the index (``.git/index``, versions 2 and 3): each tracked path's mode, blob id and the stat data git
  cached for it, and the index file's own mtime (git's "racy" line);
- an ``lstat`` of every entry of the tree (``treeprint``'s walk, which the check takes anyway).

A tracked file is then what git's ``ie_match_stat`` and ``ie_modified`` make of it (read-cache.c): its
owner-execute bit differs from the index's mode, " M"; its cached stat data equal (mtime, ctime,
inode, owner, group, size) and the entry neither racy (its mtime not older than the index's) nor
smudged (size 0: git's mark for an entry written racily clean), clean without reading it; otherwise
git reads it, and its content decides (git's blob id, ``sha1("blob <size>\\0" + data)``, against the
index's; a symlink's data is its target). Missing, " D". Git compares the nanoseconds, and draws its
racy line to the nanosecond, only when built with ``USE_NSEC`` (Debian's is not): so a change within
the second of the cached stat data is a change to one build and not to the other. Where the two would
answer differently, this module does not choose: git is asked (``_looks``).

Everything else is git's to decide, so the caller asks git (``derive`` returns None):

- any entry that is neither a tracked path nor a directory above one (an untracked or ignored file, a
  new directory, a nested repository): ignore rules (``.gitignore`` files, ``info/exclude``,
  ``core.excludesFile``) would decide how it is listed. With none, no ignore rule can matter;
- an index not known to match HEAD (``clean``: the checksum of an index crucible's own reset or commit
  left, or that a status walk found nothing staged in), or with entries git treats apart (conflicts,
  assume-unchanged, skip-worktree, intent-to-add, submodules, a split or sparse index);
- a change of a tracked path's type;
- config or attributes that change what git compares: content filters and end-of-line conversion
  (``.gitattributes`` anywhere, ``info/attributes``, a global or system attributes file,
  ``core.autocrlf``, ``filter.*``), ``core.fileMode``, ``core.trustCtime``, ``core.checkStat``,
  ``core.ignoreCase`` and the like (``_REQUIRED``).

The config is read once with ``git config --list --show-origin`` and again whenever a file it can
come from or the environment changes.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.workspace import treeprint
from controller.workspace.git import git_env, run_git, run_git_bytes

# An index entry as git writes it (versions 2 and 3): ctime s, ns; mtime s, ns; dev, ino, mode, uid,
# gid, size; the blob id; flags. The path follows, NUL-padded to a multiple of 8 bytes.
_ENTRY = struct.Struct(">10I20sH")
_MASK = 0xFFFFFFFF
# Flags git gives an entry apart: assume-valid, extended (skip-worktree, intent-to-add), a merge stage.
_SPECIAL = 0x8000 | 0x4000 | 0x3000
_REGULAR = frozenset({0o100644, 0o100755})
SYMLINK = 0o120000
_EMPTY_BLOB = hashlib.sha1(b"blob 0\0").digest()
_CHUNK = 1 << 20

_TRUE = frozenset({"", "true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
# Config that changes what ``git status`` reports for a tracked file, with the values at which it does
# not (git's defaults on Linux). Absent is the default.
_REQUIRED: Mapping[str, frozenset[str]] = {
    "core.autocrlf": _FALSE,
    "core.filemode": _TRUE,
    "core.symlinks": _TRUE,
    "core.ignorecase": _FALSE,
    "core.precomposeunicode": _FALSE,
    "core.trustctime": _TRUE,
    "core.checkstat": frozenset({"default"}),
    "core.ignorestat": _FALSE,
    "core.fsmonitor": _FALSE,
    "core.splitindex": _FALSE,
    "core.sparsecheckout": _FALSE,
    "core.bare": _FALSE,
    "index.skiphash": _FALSE,
    "index.sparse": _FALSE,
}
# Keys whose presence alone sends the check to git: content conversion, another work tree or object
# format, and includes (a file this module would not watch).
_DENIED = ("filter.", "core.eol", "core.attributesfile", "core.worktree", "extensions.", "include")


@dataclass(frozen=True)
class Entry:
    """A tracked path as the index has it: mode, blob id, and the stat data git cached (ctime s, ns;
    mtime s, ns; inode, owner, group, size: each as the 32 bits git keeps)."""

    mode: int
    blob: bytes
    cached: tuple[int, int, int, int, int, int, int, int]


@dataclass(frozen=True)
class Index:
    """``.git/index`` read whole: its entries by path, its checksum (the last 20 bytes, verified), and
    its mtime, seconds and nanoseconds (the line past which git treats an entry as racy)."""

    entries: Mapping[str, Entry]
    checksum: bytes
    mtime: tuple[int, int]


def read_index(root: Path) -> Index | None:
    """The index of the checkout at ``root``, or None if it is not one this module reads exactly: more
    than ``treeprint.MAX_ENTRIES`` entries (read from its header first: a tree that large is git's
    anyway), not version 2 or 3, a bad checksum, an entry git treats apart (``_SPECIAL``, a submodule,
    a mode other than a file's or a symlink's), a required extension it does not know, a split or
    sparse index."""
    try:
        with open(os.path.join(root, treeprint.INDEX), "rb") as handle:
            head = handle.read(12)
            if len(head) < 12 or head[:4] != b"DIRC":
                return None
            count = int.from_bytes(head[8:12], "big")
            if count > treeprint.MAX_ENTRIES:  # a tree git walks anyway: not worth reading
                return None
            mtime = divmod(os.fstat(handle.fileno()).st_mtime_ns, 1_000_000_000)
            data = head + handle.read()
    except OSError:
        return None
    if len(data) < 32:
        return None
    version = int.from_bytes(data[4:8], "big")
    body, checksum = memoryview(data)[:-20], data[-20:]
    if version not in (2, 3) or hashlib.sha1(body).digest() != checksum:
        return None
    entries: dict[str, Entry] = {}
    offset, end = 12, len(body)
    for _ in range(count):
        if offset + _ENTRY.size > end:
            return None
        cs, cns, ms, mns, _dev, ino, mode, uid, gid, size, blob, flags = _ENTRY.unpack_from(body, offset)
        if flags & _SPECIAL or (mode not in _REGULAR and mode != SYMLINK):
            return None
        start = offset + _ENTRY.size
        length = flags & 0x0FFF
        if length == 0x0FFF:  # a long path: its length is where its NUL is
            length = data.find(b"\0", start, end) - start
            if length < 0:
                return None
        if start + length >= end or data[start + length] != 0:
            return None
        path = os.fsdecode(data[start : start + length])
        entries[path] = Entry(mode, blob, (cs, cns, ms, mns, ino, uid, gid, size))
        offset += (_ENTRY.size + length + 8) & ~7
    while offset + 8 <= end:  # extensions: an optional one's name starts with a capital
        name = data[offset : offset + 4]
        if name in (b"link", b"sdir", b"FSMN") or not b"A" <= name[:1] <= b"Z":
            return None
        offset += 8 + int.from_bytes(data[offset + 4 : offset + 8], "big")
    if offset != end or len(entries) != count:
        return None
    return Index(entries, checksum, mtime)


def index_checksum(root: Path) -> bytes | None:
    """The checksum of the index at ``root`` if ``read_index`` reads it: what a caller records as an
    index known to match a commit (after ``git reset --hard`` or a commit there). An index is known by
    its content, wherever it is: the same checksum is the same entries."""
    index = read_index(root)
    return None if index is None else index.checksum


def derive(root: Path, tree: treeprint.TreePrint, clean: bytes) -> dict[str, str] | None:
    """What ``git status --porcelain=v1 --untracked-files=all --ignored=matching`` would report for the
    checkout at ``root``, whose print ``tree`` was taken just now: path -> code (" M", " D"), and no
    ignored entry. ``clean``: the checksum of an index known to match HEAD. None when git must decide
    (see the module's docstring): then the caller runs it."""
    index = read_index(root)
    if index is None or index.checksum != clean:
        return None
    tracked = index.entries
    if any(os.path.basename(path) == ".gitattributes" for path in tracked) or not config_allows(root):
        return None
    above = _above(tracked)
    status: dict[str, str] = {}
    for rel, key in tree.entries.items():
        if rel == treeprint.INDEX:
            continue
        entry = tracked.get(rel)
        if entry is None:
            if rel in above and stat.S_ISDIR(key[0]):
                continue
            return None  # untracked or ignored: ignore rules decide how git lists it
        code = _code(root, rel, key, entry, index.mtime)
        if code is None:
            return None
        if code:
            status[rel] = code
    for rel in tracked.keys() - tree.entries.keys():
        status[rel] = " D"
    return status


def _code(root: Path, rel: str, key: treeprint.Key, entry: Entry, index_mtime: tuple[int, int]) -> str | None:
    """A tracked path's worktree code: "" unchanged, " M" changed, None for git to decide."""
    mode = key[0]
    if entry.mode == SYMLINK:
        if not stat.S_ISLNK(mode):
            return None  # a type change
    elif not stat.S_ISREG(mode):
        return None  # a type change
    elif (entry.mode ^ mode) & stat.S_IXUSR:
        return " M"  # git compares the owner's execute bit only, and then looks no further
    with_ns, without_ns = _looks(key, entry, index_mtime)
    if not with_ns and not without_ns:
        return ""  # git trusts the stat data it cached, whichever way it was built
    full = os.path.join(root, rel)
    blob = _link_blob(full) if entry.mode == SYMLINK else _blob(full)
    if blob is None:
        return None
    if blob == entry.blob:
        return ""
    # Changed: git says so only where it looks at the content. A git built without ``USE_NSEC`` does
    # not see a change within the second of its cached stat data (nor one built with it, a change
    # within the clock tick): where the two builds would differ, git is asked.
    return " M" if with_ns and without_ns else None


def _looks(key: treeprint.Key, entry: Entry, index_mtime: tuple[int, int]) -> tuple[bool, bool]:
    """Whether git reads the file's content (``ie_match_stat``: stat data changed, the entry racy or
    smudged), as built with ``USE_NSEC`` and without it: the nanoseconds are compared, and the racy
    line drawn, only with it."""
    _mode, size, mtime, ctime, ino, uid, gid = key
    cs, cns, ms, mns, cino, cuid, cgid, csize = entry.cached
    m_s, m_ns = divmod(mtime, 1_000_000_000)
    c_s, c_ns = divmod(ctime, 1_000_000_000)
    seconds = (
        ms != m_s & _MASK
        or cs != c_s & _MASK
        or cino != ino & _MASK
        or cuid != uid & _MASK
        or cgid != gid & _MASK
        or csize != size & _MASK
        or (csize == 0 and entry.blob != _EMPTY_BLOB)  # smudged: written racily clean
    )
    index_s, index_ns = index_mtime
    racy_s = index_s != 0 and index_s <= ms
    racy_ns = index_s != 0 and (index_s < ms or (index_s == ms and index_ns <= mns))
    return seconds or mns != m_ns or cns != c_ns or racy_ns, seconds or racy_s


def _link_blob(path: str) -> bytes | None:
    """Git's blob id of the symlink at ``path``: its target's bytes."""
    try:
        target = os.readlink(os.fsencode(path))
    except OSError:
        return None
    return blob_id(target)


def blob_id(content: bytes) -> bytes:
    """Git's id of a blob holding ``content`` (SHA-1)."""
    return hashlib.sha1(b"blob %d\0%s" % (len(content), content)).digest()


def _blob(path: str) -> bytes | None:
    """Git's blob id of the file at ``path`` (no filter applies: ``derive`` checked), or None."""
    try:
        with open(path, "rb", buffering=0) as handle:
            size = os.fstat(handle.fileno()).st_size
            digest = hashlib.sha1(b"blob %d\0" % size)
            read = 0
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
                read += len(chunk)
    except OSError:
        return None
    return digest.digest() if read == size else None


def _above(paths: Mapping[str, Entry]) -> frozenset[str]:
    out: set[str] = set()
    for rel in paths:
        parts = rel.split("/")
        out.update("/".join(parts[:i]) for i in range(1, len(parts)))
    return frozenset(out)


_verdicts: dict[tuple[object, ...], bool] = {}
_verdicts_lock = threading.Lock()


def config_allows(root: Path) -> bool:
    """Whether git's config and attributes for the checkout at ``root`` leave a tracked file's status
    to its mode, stat data and raw content (``_REQUIRED``, ``_DENIED``, no attributes file). Read
    with git once, then again whenever the checkout's config, a user or system config or attributes
    file, or the environment changes (its key: ``_config_key``)."""
    if os.path.lexists(os.path.join(root, ".git", "info", "attributes")):
        return False
    key = _config_key(root)
    if key is None:
        return False
    with _verdicts_lock:
        known = _verdicts.get(key)
    if known is not None:
        return known
    verdict = _allowed(root)
    with _verdicts_lock:
        if len(_verdicts) > 64:
            _verdicts.clear()
        _verdicts[key] = verdict
    return verdict


def _config_key(root: Path) -> tuple[object, ...] | None:
    """What the verdict depends on: the checkout's config by content (every clone's is alike), the
    other files git reads config or attributes from by their ``lstat`` data (absent: None), and the
    environment's variables that choose them. None if the checkout's config cannot be read."""
    try:
        local = Path(root, ".git", "config").read_bytes()
    except OSError:
        return None
    env = git_env()
    files = _env_files(env)
    return (local, tuple(_stat(path) for path in files[1]), files[2])


_env_seen: list[tuple[Mapping[str, str], list[str], tuple[tuple[str, str], ...]]] = []


def _env_files(env: Mapping[str, str]) -> tuple[Mapping[str, str], list[str], tuple[tuple[str, str], ...]]:
    """``_files(env)`` and ``env`` as a key, worked out again only for another environment: ``git_env``
    gives the same mapping while the process's environment is unchanged (held here, so its id is not
    reused)."""
    seen = _env_seen[0] if _env_seen else None
    if seen is not None and seen[0] is env:
        return seen
    made = (env, _files(env), tuple(sorted(env.items())))
    _env_seen[:] = [made]
    return made


def _files(env: Mapping[str, str]) -> list[str]:
    """The config and attributes files git may read besides the checkout's own."""
    home = env.get("HOME", "")
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    etc = _sysconfdir()
    return [
        env.get("GIT_CONFIG_GLOBAL", ""),
        os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        env.get("GIT_CONFIG_SYSTEM", ""),
        os.path.join(etc, "gitconfig"),
        os.path.join(xdg, "git", "attributes"),
        os.path.join(etc, "gitattributes"),
    ]


def _stat(path: str) -> tuple[int, int, int, int] | None:
    if not path:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@functools.lru_cache(maxsize=1)
def _sysconfdir() -> str:
    """Where this git reads its system config and attributes: ``/etc`` for a git installed under
    ``/usr``, else ``<prefix>/etc`` (git's Makefile), the prefix found from ``git --exec-path``."""
    exec_path = Path(run_git(["--exec-path"], Path("/")))
    prefix = next((p for p in exec_path.parents if p.name in ("libexec", "lib")), None)
    base = prefix.parent if prefix is not None else Path("/usr")
    return "/etc" if base == Path("/usr") else str(base / "etc")


def _allowed(root: Path) -> bool:
    """The verdict itself, from ``git config --list --show-origin -z`` run in the checkout (crucible's
    pinned ``-c`` options included, as every git call of crucible has them)."""
    env = git_env()
    watched = {os.path.realpath(path) for path in _files(env) if path}
    watched.add(os.path.realpath(os.path.join(root, ".git", "config")))
    code, raw, _ = run_git_bytes(["config", "--list", "--show-origin", "-z"], root, check=False)
    if code != 0:
        return False
    for path in _etc_attributes(env):
        if os.path.lexists(path):
            return False
    values: dict[str, str] = {}
    fields = raw.split(b"\0")
    for origin, item in zip(fields[0::2], fields[1::2], strict=False):
        where = origin.decode("utf-8", "surrogateescape")
        if where.startswith("file:") and os.path.realpath(os.path.join(root, where[5:])) not in watched:
            return False  # a file this module would not see change
        name, _, value = item.decode("utf-8", "surrogateescape").partition("\n")
        name = name.lower()
        if name.startswith(_DENIED):
            return False
        values[name] = value.strip().lower()
    return all(values[name] in ok for name, ok in _REQUIRED.items() if name in values)


def _etc_attributes(env: Mapping[str, str]) -> list[str]:
    """The attributes files outside the checkout: any of them, and git is asked."""
    home = env.get("HOME", "")
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return [os.path.join(xdg, "git", "attributes"), os.path.join(_sysconfdir(), "gitattributes")]

"""Ignored files: what ``git status`` does not show and a measurement could still read (ADR 0007).

The policy check and the evaluator checks look at ``git status``, which hides ignored files. An agent
that may not touch the evaluator can still plant what the evaluator *reads*: a stale bytecode file for a
protected module, a ``.env``, a cache. What is measured must therefore be the committed tree plus only
the ignored paths the spec keeps (``workspace.keep_ignored``), and those kept paths are inputs the
agent's turn may not have written. This module lists a checkout's ignored files, removes the ones the
spec does not keep, and fingerprints the kept ones so a change by the agent can be refused.

A fingerprint is ``lstat`` data including ``st_ctime_ns`` and the inode: a process can forge a file's
mtime (``os.utime``), but not its ctime, and replacing a file changes its inode.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathspec

from controller.workspace.git import run_git_bytes

Fingerprint = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class IgnoredScan:
    """``kept``: ignored files matching ``keep_ignored`` with their fingerprints; ``unkept``: the others."""

    kept: dict[str, Fingerprint]
    unkept: tuple[str, ...]


def _fingerprint(full: Path) -> Fingerprint | None:
    try:
        info = os.lstat(full)
    except OSError:
        return None
    return (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def list_ignored(root: Path) -> list[str]:
    """The ignored, untracked entries of the checkout at ``root`` ("/"-separated, relative): a wholly
    ignored directory is one entry ending in "/" (``git ls-files --directory``), which keeps a
    ``.venv`` of ten thousand files one line."""
    args = ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"]
    _, raw, _ = run_git_bytes(args, root)
    return [os.fsdecode(item) for item in raw.split(b"\0") if item]


def others(root: Path) -> list[str]:
    """Every entry of the checkout at ``root`` that is not tracked, ignored or not, empty directories
    included (``git ls-files --others --directory``: a wholly untracked directory is one entry ending
    in "/"): what ``git clean -ffdx`` would look at, so ``classify`` and ``remove`` over it do what
    ``git clean -ffdx -e <keep>`` does, and fingerprint the kept entries in the same pass."""
    _, raw, _ = run_git_bytes(["ls-files", "-z", "--others", "--directory"], root)
    return [os.fsdecode(item) for item in raw.split(b"\0") if item]


def _tree(root: Path, rel_dir: str) -> dict[str, Fingerprint]:
    """Fingerprints of every non-directory entry below ``rel_dir`` (symlinks not followed), relative to
    ``root``. ``os.scandir`` and string paths: a ``.venv`` of 13,000 files costs ~0.3 s, not ~1 s."""
    found: dict[str, Fingerprint] = {}
    pending = [rel_dir]
    base = os.fspath(root) + "/"
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(base + current))
        except OSError:
            continue
        for entry in entries:
            rel = f"{current}/{entry.name}"
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(rel)
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found[rel] = (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    return found


def scan(root: Path, keep_ignored: Sequence[str]) -> IgnoredScan:
    """The ignored files of ``root``, split by whether a gitignore-style ``keep_ignored`` pattern matches
    (see ``classify``)."""
    return classify(root, list_ignored(root), keep_ignored)


@functools.lru_cache(maxsize=64)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    """``keep_ignored`` compiled once per list (twice a served turn before, ADR-0053); only ever read."""
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def classify(root: Path, entries: Sequence[str], keep_ignored: Sequence[str]) -> IgnoredScan:
    """The ignored ``entries`` of ``root`` (from ``list_ignored``, or the "!!" lines of a status walk
    that also listed them, so one walk serves the policy check and this), split by ``keep_ignored``.

    A wholly ignored directory that a pattern matches is kept as a whole and fingerprinted file by
    file; one that no pattern matches is unkept as a whole, unless a pattern may match inside it
    (``target/cache`` in an ignored ``target/``), in which case its files are matched one by one."""
    keep = _spec(tuple(keep_ignored))
    kept: dict[str, Fingerprint] = {}
    unkept: list[str] = []
    for entry in entries:
        rel = entry.rstrip("/")
        is_dir = entry.endswith("/")
        if keep_ignored and (keep.match_file(rel) or keep.match_file(rel + "/")):
            if is_dir:
                kept.update(_tree(root, rel))
            elif (fingerprint := _fingerprint(root / rel)) is not None:
                kept[rel] = fingerprint
        elif is_dir and keep_ignored and any(p.lstrip("/").startswith(rel + "/") for p in keep_ignored):
            for path, fingerprint in _tree(root, rel).items():
                if keep.match_file(path):
                    kept[path] = fingerprint
                else:
                    unkept.append(path)
        else:
            unkept.append(entry)
    return IgnoredScan(kept, tuple(unkept))


def changed(before: Mapping[str, Fingerprint], after: Mapping[str, Fingerprint]) -> list[str]:
    """Kept ignored paths created, removed or changed between two scans, sorted."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def remove(root: Path, paths: Sequence[str]) -> None:
    """Delete ``paths`` (files, symlinks, or nested repositories ending in "/") under ``root``, then
    the directories they leave empty, so the tree is what a fresh clone has."""
    parents: set[Path] = set()
    for rel in paths:
        full = root / rel.rstrip("/")
        if full.is_dir() and not full.is_symlink():
            shutil.rmtree(full, ignore_errors=True)
        else:
            full.unlink(missing_ok=True)
        parents.update(p for p in full.parents if p != root and p.is_relative_to(root))
    for directory in sorted(parents, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):  # not empty (tracked or kept files), or already gone
            directory.rmdir()

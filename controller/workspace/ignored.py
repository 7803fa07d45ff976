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
    """Every ignored, untracked path of the checkout at ``root`` ("/"-separated, relative).

    Files inside ignored directories are listed one by one; a nested repository is one entry ending
    in "/"."""
    args = ["ls-files", "-z", "--others", "--ignored", "--exclude-standard"]
    _, raw, _ = run_git_bytes(args, root)
    return [os.fsdecode(item) for item in raw.split(b"\0") if item]


def scan(root: Path, keep_ignored: Sequence[str]) -> IgnoredScan:
    """The ignored files of ``root``, split by whether a gitignore-style ``keep_ignored`` pattern matches."""
    keep = pathspec.GitIgnoreSpec.from_lines(keep_ignored)
    kept: dict[str, Fingerprint] = {}
    unkept: list[str] = []
    for rel in list_ignored(root):
        if keep_ignored and keep.match_file(rel.rstrip("/")):
            fingerprint = _fingerprint(root / rel)
            if fingerprint is not None:
                kept[rel] = fingerprint
        else:
            unkept.append(rel)
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

"""Loose ref files written the way git writes them, without a git process (ADR-0050).

``Checkout.set_refs`` points crucible's own refs (``refs/crucible/*``, in a clone only crucible writes,
gc off) at commits after every kept turn. A ``git update-ref`` would cost a process; a loose ref file
replaced atomically is all it would do here. A kept turn points two refs at one commit, and creating a
file costs far more on this kind of disk than linking one, so refs to the same commit share a file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path


def write_loose_refs(git_dir: Path, refs: Mapping[str, str]) -> set[Path]:
    """Point each ref (``refs/...`` under ``git_dir``) at its full object id; returns the folders
    written into (the caller packs them when loose refs pile up). ValueError, before anything is
    written, for an id that is not a full lowercase hex object id."""
    by_sha: dict[str, list[Path]] = {}
    for name, sha in refs.items():
        if len(sha) not in (40, 64) or any(c not in "0123456789abcdef" for c in sha):
            raise ValueError(f"not a full object id: {sha!r}")
        by_sha.setdefault(sha, []).append(git_dir / name)
    folders: set[Path] = set()
    for sha, targets in by_sha.items():
        _write_loose_refs(sha, targets)
        folders.update(target.parent for target in targets)
    return folders


def _write_loose_refs(sha: str, targets: Sequence[Path]) -> None:
    """Point the loose refs at ``targets`` at ``sha``, each replaced atomically (a new file renamed
    over it), all of them one file: created once, hard-linked under the other names.

    Creating a file costs 100-450 us of CPU on this ext4, a link about 17 (ADR-0050), and a kept
    turn points two refs at its commit. Sharing the file is safe because nothing writes a loose ref in
    place: git replaces one by renaming a new file over it or deletes it, the `.git` guard's restore
    deletes before it writes, and so does this."""
    first = targets[0]
    first.parent.mkdir(parents=True, exist_ok=True)
    temporary = first.with_name(f".{first.name}.tmp")
    temporary.unlink(missing_ok=True)  # a crash's leftover may be linked under another ref's name
    temporary.write_text(sha + "\n")
    for target in targets[1:]:
        target.parent.mkdir(parents=True, exist_ok=True)
        linked = target.with_name(f".{target.name}.tmp")
        linked.unlink(missing_ok=True)
        try:
            os.link(temporary, linked)
        except OSError:  # a filesystem without hard links: a file of its own
            linked.write_text(sha + "\n")
        os.replace(linked, target)
    os.replace(temporary, first)

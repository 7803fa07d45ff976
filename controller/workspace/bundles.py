"""Git bundles: how commits travel between the controller and ``crucible worker`` (ADR-0014).

A bundle is git's own file format for a set of refs and the objects behind them, with the commits
it presumes the receiver has (prerequisites). The controller sends a round's start commits as one;
the worker sends back what it committed as another. Nothing here decides whether a bundle is
acceptable: these are the git steps (write, list, verify, fetch, which paths commits touch) the
controller's checks in ``services.remote.remote_rounds`` are made of.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from controller.domain.errors import GitError
from controller.workspace.git import is_ancestor, run_git, run_git_bytes

# Seconds any git command over a bundle a worker sent may run, and seconds of CPU it may use: git's
# bundle parsing costs ~0.6 s of CPU per MiB of junk, so a bad bundle must not hold a thread for as
# long, nor the controller's CPU for as much, as its size makes it.
INPUT_TIMEOUT_S = 120.0
INPUT_CPU_S = 60
GITLINK, SYMLINK = "160000", "120000"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def can_exclude(repo: Path, have: str | None, start: str) -> bool:
    """Whether a bundle of ``start`` for a receiver that says it has ``have`` (a warm pod's previous
    start, ADR-0034) may leave out what ``have`` reaches: a full sha that ``repo`` knows, strictly
    behind ``start``. A string that is not a sha never reaches git's command line."""
    if have is None or not _SHA.fullmatch(have) or have == start:
        return False
    try:
        return is_ancestor(repo, have, start)
    except GitError:  # a commit this host does not know
        return False


def _input_git(args: Sequence[str], cwd: Path) -> str:
    """``run_git`` over a bundle a worker sent: bounded in time and CPU."""
    return run_git(args, cwd, timeout=INPUT_TIMEOUT_S, cpu_s=INPUT_CPU_S)


def _input_git_bytes(args: Sequence[str], cwd: Path, *, check: bool = True) -> tuple[int, bytes, str]:
    """``run_git_bytes`` over a bundle a worker sent: bounded in time and CPU."""
    return run_git_bytes(args, cwd, check=check, timeout=INPUT_TIMEOUT_S, cpu_s=INPUT_CPU_S)


def create_bundle(repo: Path, out: Path, refs: Mapping[str, str], *, exclude: tuple[str, ...] = ()) -> None:
    """Write a bundle of ``refs`` (full ref name -> sha) from ``repo`` to ``out``; commits reachable
    from an ``exclude`` sha are left out (the receiver must have them: they become prerequisites).
    The refs are created in ``repo`` first (a bundle names refs, not bare shas)."""
    for name, sha in refs.items():
        run_git(["update-ref", name, sha], repo)
    out.parent.mkdir(parents=True, exist_ok=True)
    run_git(["bundle", "create", "-q", str(out), *refs, *(f"^{sha}" for sha in exclude)], repo)


def list_heads(bundle: Path, cwd: Path) -> dict[str, str]:
    """The refs a bundle carries (ref name -> sha); GitError if it is not a bundle."""
    out = _input_git(["bundle", "list-heads", str(bundle)], cwd)
    heads: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, name = line.partition(" ")
        if name:
            heads[name] = sha
    return heads


def verify(bundle: Path, repo: Path) -> str | None:
    """None when ``repo`` has every commit the bundle presumes; otherwise git's complaint."""
    args = ["bundle", "verify", "-q", str(bundle)]
    code, _, stderr = _input_git_bytes(args, repo, check=False)
    return None if code == 0 else stderr.strip() or f"git bundle verify exited {code}"


def fetch(bundle: Path, repo: Path, refs: Sequence[str]) -> None:
    """Bring the objects behind the bundle's ``refs`` into ``repo`` (no local ref is written: the
    caller pins what it accepts with ``pin``; the rest is unreachable and left to gc)."""
    args = ["fetch", "-q", "--no-tags", "--no-write-fetch-head", str(bundle), *refs]
    _input_git(args, repo)


def pin(repo: Path, ref: str, sha: str) -> None:
    """Point ``ref`` at ``sha`` in ``repo`` (created or moved)."""
    run_git(["update-ref", ref, sha], repo)


def paths_by_commit(repo: Path, start: str, head: str) -> dict[str, list[str]]:
    """Every commit in ``start..head`` with the paths it changes (against each of its parents, so
    a merge cannot hide a change)."""
    commits = _input_git(["rev-list", f"{start}..{head}"], repo).split()
    changed: dict[str, list[str]] = {}
    for sha in commits:
        args = ["diff-tree", "-r", "-m", "--no-commit-id", "--name-only", "-z", "--no-renames", sha]
        _, raw, _ = _input_git_bytes(args, repo)
        changed[sha] = sorted({os.fsdecode(item) for item in raw.split(b"\0") if item})
    return changed


def unsafe_entries(repo: Path, start: str, head: str) -> list[str]:
    """What the commits of ``start..head`` add that the local path refuses too: a submodule link
    (gitlink), or a symlink whose target leaves the repository (absolute, or climbing above its root).
    Each as ``"<commit>: <path>: why"``; [] when there is none."""
    problems: list[str] = []
    for sha in _input_git(["rev-list", f"{start}..{head}"], repo).split():
        args = ["diff-tree", "-r", "-m", "--no-commit-id", "-z", "--no-renames", sha]
        _, raw, _ = _input_git_bytes(args, repo)
        fields = raw.split(b"\0")
        for meta, name in zip(fields[0::2], fields[1::2], strict=False):
            parts = meta.decode("ascii", "replace").lstrip(":").split()
            if len(parts) < 5:
                continue
            mode, blob, path = parts[1], parts[3], os.fsdecode(name)
            if mode == GITLINK:
                problems.append(f"{sha[:12]}: {path}: a submodule link (gitlink)")
            elif mode == SYMLINK:
                _, target, _ = _input_git_bytes(["cat-file", "blob", blob], repo)
                where = os.fsdecode(target)
                inside = os.path.normpath(os.path.join(os.path.dirname(path), where))
                if os.path.isabs(where) or inside == ".." or inside.startswith("../"):
                    problems.append(f"{sha[:12]}: {path}: a symlink to {where!r} leaves the repository")
    return problems

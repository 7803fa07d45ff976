"""Git bundles: how commits travel between the controller and ``crucible worker`` (ADR-0014).

A bundle is git's own file format for a set of refs and the objects behind them, with the commits
it presumes the receiver has (prerequisites). The controller sends a round's start commits as one;
the worker sends back what it committed as another. Nothing here decides whether a bundle is
acceptable: these are the git steps (write, list, verify, fetch, which paths commits touch) the
controller's checks in ``services.remote.remote_rounds`` are made of.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from controller.workspace.git import run_git, run_git_bytes


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
    out = run_git(["bundle", "list-heads", str(bundle)], cwd)
    heads: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, name = line.partition(" ")
        if name:
            heads[name] = sha
    return heads


def verify(bundle: Path, repo: Path) -> str | None:
    """None when ``repo`` has every commit the bundle presumes; otherwise git's complaint."""
    code, _, stderr = run_git_bytes(["bundle", "verify", "-q", str(bundle)], repo, check=False)
    return None if code == 0 else stderr.strip() or f"git bundle verify exited {code}"


def fetch(bundle: Path, repo: Path, refs: Sequence[str]) -> None:
    """Bring the objects behind the bundle's ``refs`` into ``repo`` (no local ref is written: the
    caller pins what it accepts with ``pin``; the rest is unreachable and left to gc)."""
    run_git(["fetch", "-q", "--no-tags", "--no-write-fetch-head", str(bundle), *refs], repo)


def pin(repo: Path, ref: str, sha: str) -> None:
    """Point ``ref`` at ``sha`` in ``repo`` (created or moved)."""
    run_git(["update-ref", ref, sha], repo)


def paths_by_commit(repo: Path, start: str, head: str) -> dict[str, list[str]]:
    """Every commit in ``start..head`` with the paths it changes (against each of its parents, so
    a merge cannot hide a change)."""
    commits = run_git(["rev-list", f"{start}..{head}"], repo).split()
    changed: dict[str, list[str]] = {}
    for sha in commits:
        args = ["diff-tree", "-r", "-m", "--no-commit-id", "--name-only", "-z", "--no-renames", sha]
        _, raw, _ = run_git_bytes(args, repo)
        changed[sha] = sorted({os.fsdecode(item) for item in raw.split(b"\0") if item})
    return changed

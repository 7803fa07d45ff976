"""The sandbox of one run on this machine: its homes, deny list, ``sandbox.readonly`` and projects.

``sandbox.Sandbox`` knows how to hide and show; this module says what, for a run here. The run, its
``--dry-run`` probe and the check made when a run is submitted all build their sandbox through
:func:`run_sandbox` and :func:`readonly_paths`, so what the dry run starts is what a turn will start,
and the deny list applies to every command whatever ``HOME`` is: the homes are ``$HOME`` and the
passwd entry's (``denylist.home_dirs``), which differ when ``HOME`` is unset or points elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from controller.domain.errors import SpecError
from controller.workspace.denylist import denied_paths, home_dirs, readonly_problem
from controller.workspace.sandbox import Sandbox


def readonly_paths(entries: Sequence[str], environ: Mapping[str, str]) -> list[Path]:
    """The ``sandbox.readonly`` entries as paths (``~`` is the controller's home: ``$HOME``, else the
    passwd one). SpecError naming ``sandbox.readonly[i]`` for an entry that does not exist or that
    equals, contains or lies inside a path of the deny list (it would show credentials)."""
    homes = home_dirs(environ)
    home = homes[0] if homes else Path("/")
    denied = denied_paths(homes)
    found: list[Path] = []
    for index, entry in enumerate(entries):
        path = home / entry[2:] if entry.startswith("~/") else home if entry == "~" else Path(entry)
        problem = readonly_problem(entry, path, denied)
        if problem is not None:
            raise SpecError(f"sandbox.readonly[{index}]", problem)
        found.append(Path(os.path.normpath(path)))
    return found


def run_sandbox(
    *,
    network: bool,
    home: str,
    environ: Mapping[str, str],
    readonly: Sequence[Path] = (),
    private: Sequence[Path] = (),
    projects: Sequence[Path] = (),
    secret_files: Sequence[Path] = (),
    tmpfs_bytes: int | None = None,
) -> Sandbox:
    """The :class:`Sandbox` of a run whose controller has ``environ``: the user's homes hidden and
    denied in, ``private`` (``CRUCIBLE_HOME``) hidden for good, ``readonly`` (from
    :func:`readonly_paths`) shown, ``projects`` (the component repositories) where pyenv looks for a
    ``.python-version``, and the controller's ``secret_files`` masked wherever they are."""
    return Sandbox(
        network=network,
        home=home,
        homes=home_dirs(environ),
        hide=[p.resolve() for p in private if p.is_dir()],
        private=[p.resolve() for p in private],
        readonly=readonly,
        secret_files=[p.resolve() for p in secret_files],
        projects=projects,
        environ=environ,
        tmpfs_bytes=tmpfs_bytes,
    )

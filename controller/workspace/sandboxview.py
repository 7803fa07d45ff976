"""What one command sees of the masked directories inside the sandbox, computed once per command.

``sandboxpaths.needed_paths`` finds the files a command needs to start; ``toolchains`` finds the
toolchains they belong to; ``denylist`` says what no bind may show. :func:`expose` puts them together
into an :class:`Exposure`: the read-only binds (toolchain roots, then single files no toolchain
holds, then ``sandbox.readonly``), the variables managers need because ``HOME`` moves, the dotfiles
mirrored into the sandbox's ``HOME``, and the paths to probe before a run (``--dry-run``). It reads
files and resolves ``PATH`` (a few milliseconds for a pyenv shim), so a run computes it once per
command and ``PATH`` (``sandbox.Sandbox`` caches it), not once per turn.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from controller.workspace.denylist import withheld
from controller.workspace.sandboxpaths import needed_paths, under
from controller.workspace.toolchains import Host, Toolchain, find_toolchains, resolve_pyenv_shim, shim_hints


@dataclass(frozen=True)
class Exposure:
    """What the sandbox binds back for one command (all paths absolute and normalised).

    ``binds``: bound read-only, outermost only (a path inside another bind is left out).
    ``toolchains``: the toolchains among ``binds``, for ``--dry-run`` to show.
    ``env``: variables set inside unless the command's environment has them.
    ``home_files``: (real file, path relative to the sandbox's HOME), bound read-only there.
    ``probes``: every path under a masked directory the command needs to start, for the probe.
    ``withheld``: paths it needs that lie inside a denied path: never bound, reported instead."""

    binds: tuple[Path, ...] = ()
    toolchains: tuple[Toolchain, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    home_files: tuple[tuple[Path, str], ...] = ()
    probes: tuple[Path, ...] = ()
    withheld: tuple[Path, ...] = ()


def _closure(argv: Sequence[str], search: str, host: Host) -> tuple[list[Path], list[Path]]:
    """(what ``argv`` needs to start, what its shims exec as well): ``needed_paths`` of the command,
    then of each shim's hints and each pyenv shim's selected program, until nothing new turns up."""
    needed = needed_paths(argv, search)
    seen = set(needed)
    extra: list[Path] = []
    frontier = list(needed)
    while frontier:
        follow: list[Path] = []
        for path in frontier:
            if path.is_file():
                follow += shim_hints(path, search)
                if (target := resolve_pyenv_shim(path, host)) is not None:
                    follow.append(target)
        found = [p for p in needed_paths([str(p) for p in follow], search) if p not in seen]
        seen.update(found)
        extra += found
        frontier = found
    return needed, extra


def expose(
    argv: Sequence[str],
    *,
    masks: Sequence[Path],
    host: Host,
    denied: Sequence[Path] = (),
    private: Sequence[Path] = (),
    readonly: Sequence[Path] = (),
    search_path: str | None = None,
) -> Exposure:
    """The :class:`Exposure` of ``argv`` (see the module docstring) in a sandbox that masks ``masks``,
    never shows anything inside ``private`` or ``denied``, and binds ``readonly`` as well."""
    search = os.defpath if search_path is None else search_path  # no PATH: what exec searches
    needed, extra = _closure(argv, search, host)
    chains = find_toolchains([*needed, *extra], host, masks)

    def shown(path: Path) -> bool:
        return not any(_inside(path, p) for p in private) and not withheld(path, denied)

    chains = [c for c in chains if shown(c.root)]
    roots = [c.root for c in chains]
    hidden = sorted({p for p in [*needed, *extra] if any(p != m and p.is_relative_to(m) for m in masks)})
    singles = [p for p in under(needed, masks) if shown(p)]
    # A readonly entry that is a symlink shows as the link, and its target is bound as well.
    entries = [q for p in readonly for q in (p, Path(os.path.realpath(p))) if shown(q)]
    binds = under([*roots, *singles, *entries], [Path("/")])
    env: dict[str, str] = {}
    for chain in chains:
        for name, value in chain.env:
            env.setdefault(name, value)
    home_files = {rel: real for chain in chains for real, rel in chain.home_files if shown(real)}
    return Exposure(
        binds=tuple(binds),
        toolchains=tuple(chains),
        env=tuple(sorted(env.items())),
        home_files=tuple((real, rel) for rel, real in sorted(home_files.items())),
        probes=tuple(p for p in hidden if shown(p)),
        withheld=tuple(p for p in hidden if withheld(p, denied)),
    )


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)

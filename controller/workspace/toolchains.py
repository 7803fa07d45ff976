"""Toolchains under the home directory or ``/tmp``, found from what a command's programs resolve to.

The sandbox puts an empty tmpfs on ``$HOME``, the real home and ``/tmp``. On a developer machine the
programs a command runs mostly live there: ``python3`` is a pyenv shim (``~/.pyenv/shims/python3``, a
bash script that execs ``~/.pyenv/libexec/pyenv``), ``claude`` sits in npm's user prefix or an nvm
version, ``cargo`` is a rustup proxy that reads ``~/.rustup``. Binding the program file alone is not
enough: a shim needs its manager, an interpreter its standard library, a rustup proxy its toolchains.
So for each path a command needs (``sandboxpaths.needed_paths``: PATH lookups, symlinks, ``#!``
interpreters, virtualenvs and their ``pyvenv.cfg`` home) this module finds the toolchain it belongs
to and returns that toolchain's root, to be bound read-only as a whole, and the variables the
manager needs because ``HOME`` moves inside the sandbox (``RUSTUP_HOME``, ``VOLTA_HOME`` …).

Managers are recognised by their roots (the environment variable that moves them, else the default
under each home) and by markers on the way up (``conda-meta``, ``libexec/pyenv``). A shim that is a
script is read for the absolute paths and the program it execs (``exec "/home/me/.pyenv/libexec/pyenv"``,
``exec asdf exec``), and a pyenv shim is resolved to the selected version's program.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

_SHIM_MAX = 8192  # bytes: a shim is a few lines; a longer script is a program, not a shim
_ABSOLUTE = re.compile(r"""(?<![\w$])(/[A-Za-z0-9._+@%\-/]+)""")
_EXEC_WORD = re.compile(r"""\bexec\s+["']?([A-Za-z0-9._+\-]+)["']?\s""")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
# Variables the environment may move a manager's root with; read from the controller's environment.
ROOT_VARIABLES = (
    "PYENV_ROOT",
    "PYENV_VERSION",
    "RUSTUP_HOME",
    "CARGO_HOME",
    "VOLTA_HOME",
    "ASDF_DATA_DIR",
    "MISE_DATA_DIR",
    "MISE_CONFIG_DIR",
    "NVM_DIR",
    "UV_PYTHON_INSTALL_DIR",
    "UV_TOOL_DIR",
    "PIPX_HOME",
    "PYTHONUSERBASE",
    "GOPATH",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
)


@dataclass(frozen=True)
class Toolchain:
    """A directory bound read-only because a program of the command lives there.

    ``env``: variables the manager needs inside (set unless the command's environment has them).
    ``home_files``: (real file, path relative to the sandbox's ``HOME``) mirrored read-only, for
    managers whose global selection is a dotfile (``~/.tool-versions``)."""

    kind: str
    root: Path
    env: tuple[tuple[str, str], ...] = ()
    home_files: tuple[tuple[Path, str], ...] = ()


@dataclass(frozen=True)
class Host:
    """What the resolver knows of this machine: the home directories (``$HOME`` first), the
    variables of ROOT_VARIABLES that are set, and the directories of the projects (the component
    repositories, where pyenv looks for ``.python-version``)."""

    homes: tuple[Path, ...]
    environ: Mapping[str, str] = field(default_factory=dict)
    projects: tuple[Path, ...] = ()

    @staticmethod
    def of(homes: Sequence[Path], environ: Mapping[str, str], projects: Sequence[Path] = ()) -> Host:
        kept = {k: environ[k] for k in ROOT_VARIABLES if environ.get(k)}
        return Host(homes=tuple(homes), environ=kept, projects=tuple(projects))

    def roots(self, variable: str, *defaults: str) -> list[Path]:
        """``$variable`` when set, else each of ``defaults`` (relative to each home)."""
        if self.environ.get(variable):
            return [Path(os.path.normpath(self.environ[variable]))]
        return [home / rel for home in self.homes for rel in defaults]

    def data_dirs(self, name: str) -> list[Path]:
        """``$XDG_DATA_HOME/name`` and ``~/.local/share/name`` for each home."""
        found = [Path(self.environ["XDG_DATA_HOME"]) / name] if self.environ.get("XDG_DATA_HOME") else []
        return found + [home / ".local" / "share" / name for home in self.homes]


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _child(path: Path, parent: Path) -> Path | None:
    """The direct child of ``parent`` that ``path`` lies in (``parent/x`` for ``parent/x/y``)."""
    if path == parent or not path.is_relative_to(parent):
        return None
    return parent / path.relative_to(parent).parts[0]


def _env(host: Host, name: str, value: Path) -> tuple[tuple[str, str], ...]:
    return () if host.environ.get(name) else ((name, str(value)),)


# ------------------------------------------------------------------------------------------ pyenv


def pyenv_selection(root: Path, host: Host) -> tuple[list[str], Path | None]:
    """The versions pyenv selects (``PYENV_VERSION``, the nearest ``.python-version`` above the first
    project, else ``<root>/version``) and the ``.python-version`` file they came from, if one."""
    if host.environ.get("PYENV_VERSION"):
        return host.environ["PYENV_VERSION"].split(":"), None
    for project in host.projects[:1]:
        for folder in [project, *project.parents]:
            candidate = folder / ".python-version"
            if candidate.is_file():
                return _version_words(candidate), candidate
    global_file = root / "version"
    return (_version_words(global_file) if global_file.is_file() else []), None


def _version_words(path: Path) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return [w for line in text.splitlines() for w in line.split() if not w.startswith("#")]


def _pyenv(path: Path, host: Host) -> Toolchain | None:
    roots = host.roots("PYENV_ROOT", ".pyenv")
    root = next((r for r in roots if _inside(path, r)), None)
    if root is None:
        root = next((a for a in path.parents if (a / "libexec" / "pyenv").is_file()), None)
    if root is None:
        return None
    env = [("PYENV_ROOT", str(root))] if not host.environ.get("PYENV_ROOT") else []
    versions, source = pyenv_selection(root, host)
    # A .python-version above the repository is not in the workspace: inside, pyenv would fall back to
    # the global version. The sandbox selects what the user's shell in the repository selects.
    single_root = len(host.projects) == 1 and source is not None and source.parent == host.projects[0]
    if source is not None and not single_root and versions:
        env.append(("PYENV_VERSION", ":".join(versions)))
    return Toolchain("pyenv", root, tuple(env))


def pyenv_extra_roots(root: Path, host: Host) -> list[Path]:
    """Selected versions that are symlinks out of the pyenv root (``pyenv versions`` can point at any
    installation): their targets."""
    found = []
    for version in pyenv_selection(root, host)[0]:
        link = root / "versions" / version
        if link.is_symlink():
            target = Path(os.path.realpath(link))
            if not _inside(target, root) and target.exists():
                found.append(target)
    return found


def resolve_pyenv_shim(program: Path, host: Host) -> Path | None:
    """What a pyenv shim runs: ``<root>/versions/<selected>/bin/<name>``, the first that exists. The
    root is ``$PYENV_ROOT`` (else ``~/.pyenv``), or the shim's own when it sits beside ``libexec/pyenv``
    (a second pyenv, or ``PYENV_ROOT`` inherited from another one: pyenv's shims name their root)."""
    roots = host.roots("PYENV_ROOT", ".pyenv")
    own = program.parent.parent
    if program.parent.name == "shims" and (own / "libexec" / "pyenv").is_file() and own not in roots:
        roots.append(own)
    for root in roots:
        if program.parent == root / "shims":
            for version in pyenv_selection(root, host)[0]:
                target = root / "versions" / version / "bin" / program.name
                if target.exists():
                    return target
    return None


# ------------------------------------------------------------------------------------------ rules


def _python_tools(path: Path, host: Host) -> Toolchain | None:
    """uv's managed Pythons, uv tools, pipx, conda environments."""
    for base in host.roots("UV_PYTHON_INSTALL_DIR") or host.data_dirs("uv/python"):
        if (install := _child(path, base)) is not None:
            return Toolchain("uv-python", install)
    for base in host.roots("UV_TOOL_DIR") or host.data_dirs("uv/tools"):
        if (tool := _child(path, base)) is not None:
            return Toolchain("uv-tool", tool)
    pipx = host.roots("PIPX_HOME") or [*host.data_dirs("pipx"), *(h / ".local" / "pipx" for h in host.homes)]
    for base in pipx:
        if _inside(path, base) and path != base:
            return Toolchain("pipx", base)
    for ancestor in path.parents:
        if ancestor in host.homes or ancestor == Path("/tmp"):
            break
        if (ancestor / "conda-meta").is_dir():
            return Toolchain("conda", ancestor)
    return None


def _user_base(path: Path, host: Host) -> Toolchain | None:
    """``pip install --user``: scripts in ``~/.local/bin``, packages in ``~/.local/lib``."""
    for base in host.roots("PYTHONUSERBASE", ".local"):
        if _inside(path, base / "bin") and path != base / "bin":
            return Toolchain("pip-user", base / "bin")
    return None


def user_site(host: Host) -> list[Toolchain]:
    """The user site directory of ``pip install --user`` (``~/.local/lib/pythonX.Y``), when it has
    packages: a Python interpreter outside the sandbox imports them, so one inside must too."""
    found = []
    for base in host.roots("PYTHONUSERBASE", ".local"):
        lib = base / "lib"
        if lib.is_dir() and any((d / "site-packages").is_dir() for d in lib.glob("python*")):
            found.append(Toolchain("pip-user", lib, _env(host, "PYTHONUSERBASE", base)))
    return found[:1]


def _node(path: Path, host: Host) -> Toolchain | None:
    """nvm versions, volta, and npm prefixes (where ``npm install -g`` puts a CLI)."""
    for nvm in host.roots("NVM_DIR", ".nvm"):
        if (version := _child(path, nvm / "versions" / "node")) is not None:
            return Toolchain("nvm", version)
        if _inside(path, nvm) and path != nvm:
            return Toolchain("nvm", nvm, _env(host, "NVM_DIR", nvm))
    for volta in host.roots("VOLTA_HOME", ".volta"):
        if _inside(path, volta) and path != volta:
            return Toolchain("volta", volta, _env(host, "VOLTA_HOME", volta))
    text = str(path)
    if "/lib/node_modules/" in text:
        return Toolchain("npm-prefix", Path(text.split("/lib/node_modules/", 1)[0]) / "lib" / "node_modules")
    # A package installed elsewhere (``npm install --prefix DIR``, a project's own): its dependencies and
    # per-platform binaries (Codex's) are siblings in the outermost node_modules above it.
    modules = [parent for parent in path.parents if parent.name == "node_modules"]
    return Toolchain("npm-package", modules[-1]) if modules else None


def _rust_go(path: Path, host: Host) -> list[Toolchain]:
    """rustup and cargo, Go's GOPATH/bin and ``~/sdk`` toolchains."""
    for cargo in host.roots("CARGO_HOME", ".cargo"):
        if _inside(path, cargo / "bin") and path != cargo / "bin":
            proxies = [
                Toolchain("rustup", r, _env(host, "RUSTUP_HOME", r))
                for r in host.roots("RUSTUP_HOME", ".rustup")
                if r.is_dir()
            ]
            return [Toolchain("cargo", cargo / "bin"), *proxies[:1]]
    for rustup in host.roots("RUSTUP_HOME", ".rustup"):
        if _inside(path, rustup) and path != rustup:
            return [Toolchain("rustup", rustup, _env(host, "RUSTUP_HOME", rustup))]
    gopaths = [Path(p) for p in host.environ.get("GOPATH", "").split(":") if p] or [
        h / "go" for h in host.homes
    ]
    for gopath in gopaths:
        if _inside(path, gopath / "bin") and path != gopath / "bin":
            sdks = [h / "sdk" / path.name for h in host.homes if path.name.startswith("go1")]
            return [Toolchain("go", gopath / "bin"), *(_go_sdk(s) for s in sdks if s.is_dir())]
    for home in host.homes:
        if (sdk := _child(path, home / "sdk")) is not None:
            return [_go_sdk(sdk)]
    return []


def _go_sdk(sdk: Path) -> Toolchain:
    """A ``golang.org/dl`` toolchain: its wrapper (``go1.22.1``) looks for it under ``$HOME/sdk``, so it
    is shown there too."""
    return Toolchain("go-sdk", sdk, home_files=((sdk, f"sdk/{sdk.name}"),))


def _version_managers(path: Path, host: Host) -> list[Toolchain]:
    """asdf and mise: their data directories, and the global selection they read from ``$HOME``."""
    mirrored = tuple(
        (home / ".tool-versions", ".tool-versions")
        for home in host.homes[:1]
        if (home / ".tool-versions").is_file()
    )
    for asdf in host.roots("ASDF_DATA_DIR", ".asdf"):
        if _inside(path, asdf) and path != asdf:
            return [Toolchain("asdf", asdf, _env(host, "ASDF_DATA_DIR", asdf), mirrored)]
    for mise in host.roots("MISE_DATA_DIR") or host.data_dirs("mise"):
        if _inside(path, mise) and path != mise:
            found = [Toolchain("mise", mise, _env(host, "MISE_DATA_DIR", mise), mirrored)]
            # The global tool versions live in mise's config directory.
            configs = [c for c in host.roots("MISE_CONFIG_DIR", ".config/mise") if c.is_dir()]
            found += [Toolchain("mise-config", c, _env(host, "MISE_CONFIG_DIR", c)) for c in configs[:1]]
            return found
    return []


def _prefix(path: Path) -> Toolchain | None:
    """An interpreter outside any manager (a relocatable Python, a node tarball, a virtualenv's base
    under ``/tmp``): its installation prefix, ``X`` of ``X/bin/python3`` when ``X/lib`` exists."""
    if path.parent.name != "bin" or not (path.parent.parent / "lib").is_dir():
        return None
    if _PYTHON.fullmatch(path.name) or path.name == "node":
        return Toolchain("prefix", path.parent.parent)
    return None


def toolchain_of(path: Path, host: Host) -> list[Toolchain]:
    """The toolchains ``path`` belongs to (most specific manager first), else []."""
    if (found := _pyenv(path, host)) is not None:
        return [found]
    for rule in (_python_tools, _user_base, _node):
        if (hit := rule(path, host)) is not None:
            return [hit]
    if hits := _version_managers(path, host) or _rust_go(path, host):
        return hits
    prefix = _prefix(path)
    return [prefix] if prefix is not None else []


def find_toolchains(paths: Iterable[Path], host: Host, masked: Sequence[Path]) -> list[Toolchain]:
    """The toolchains of those ``paths`` that lie under one of the ``masked`` directories (elsewhere
    the sandbox shows everything anyway), without duplicates, in a stable order; plus pyenv's
    selected versions that live outside its root, and the user site of any Python interpreter."""
    found: dict[Path, Toolchain] = {}
    pythons = False
    for path in sorted(set(paths)):
        pythons = pythons or bool(_PYTHON.fullmatch(path.name))
        if not any(path != m and path.is_relative_to(m) for m in masked):
            continue
        for chain in toolchain_of(path, host):
            found.setdefault(chain.root, chain)
            if chain.kind == "pyenv":
                for extra in pyenv_extra_roots(chain.root, host):
                    found.setdefault(extra, Toolchain("pyenv-version", extra))
    if pythons:
        for chain in user_site(host):
            found.setdefault(chain.root, chain)
    return [found[root] for root in sorted(found)]


def shim_hints(program: Path, search_path: str) -> list[Path]:
    """What a shim script execs: the absolute paths it names that exist, and the program of an
    ``exec NAME`` line found on ``search_path``. [] for a binary or a script longer than a shim."""
    try:
        with open(program, "rb") as handle:
            head = handle.read(_SHIM_MAX + 1)
    except OSError:
        return []
    if not head.startswith(b"#!") or len(head) > _SHIM_MAX or b"exec" not in head:
        return []
    text = head.decode("utf-8", "replace")
    found = [Path(m) for m in _ABSOLUTE.findall(text) if "$" not in m and os.path.exists(m)]
    for name in _EXEC_WORD.findall(text):
        if (hit := shutil.which(name, path=search_path)) is not None and Path(hit) != program:
            found.append(Path(hit))
    return found

"""The bubblewrap sandbox for agent, validation and metric commands (docs/security.md).

A scrubbed environment does not hide secrets from code running as the same user: it can read the
controller's ``/proc/<pid>/environ``, ``~/.git-credentials``, or talk to an ssh-agent, gpg-agent or
database socket. Under bubblewrap a command sees a new PID namespace (only its own processes), an
empty tmpfs as ``$HOME``, ``/tmp`` and ``/run`` (where agent and database sockets live), the
workspace writable and the rest of the filesystem read-only, no capabilities (so it cannot unmount
the masks, even as root), and no network unless asked. The sandbox is an argv prefix, so
:func:`controller.workspace.process.run_command` runs and kills it like any command: killing the
outer ``bwrap`` process takes the whole PID namespace with it (``--die-with-parent``).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from controller.domain.errors import CrucibleError, SpecError
from controller.workspace.denylist import denied_paths, masks_inside
from controller.workspace.sandboxview import Exposure, expose
from controller.workspace.toolchains import Host

SANDBOX_MODES = ("auto", "bwrap", "none")
SELF_TEST_TIMEOUT_S = 10.0

# Kept visible under the tmpfs on /run: on systemd hosts /etc/resolv.conf points here.
_RUN_KEEP = ("/run/systemd/resolve",)


def _isolation_args(network: bool) -> list[str]:
    args = [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    if not network:
        args.append("--unshare-net")
    return args


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[str | None, str]:
    """(path of a working bwrap or None, why not). Runs bwrap once with the strictest options."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bwrap is not installed (no 'bwrap' on PATH)"
    argv = [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    argv += [*_isolation_args(network=False), "--", "true"]
    try:
        proc = subprocess.run(
            argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=SELF_TEST_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"{path} could not run: {error}"
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace").strip()
        return None, f"{path} failed its self-test (exit {proc.returncode}): {stderr}"
    return path, ""


def bwrap_path() -> str | None:
    """Path of a bwrap that can actually build our sandbox here (checked once per process), else None."""
    return _probe()[0]


def sandbox_unusable() -> str:
    """Why bubblewrap cannot build the sandbox here ("" when it can)."""
    return _probe()[1]


def resolve_sandbox(mode: str) -> bool:
    """Whether commands run sandboxed for ``sandbox.mode``.

    "none" -> False; "auto" -> whether bwrap works here; "bwrap" -> True, or CrucibleError saying
    why bwrap is unusable. Any other mode is a SpecError on ``sandbox.mode``.
    """
    if mode == "none":
        return False
    if mode == "auto":
        return bwrap_path() is not None
    if mode == "bwrap":
        path, reason = _probe()
        if path is None:
            raise CrucibleError(f"sandbox.mode = 'bwrap' but bubblewrap is unusable: {reason}")
        return True
    raise SpecError("sandbox.mode", f"must be one of {', '.join(SANDBOX_MODES)}, not {mode!r}")


def resolve_network(mode: str, network: bool) -> tuple[bool, str | None]:
    """Whether commands run sandboxed, and a warning for the user, for ``sandbox.mode``/``network``.

    ``network = false`` is a promise only a sandbox keeps: without one that works here it is a
    SpecError on ``sandbox.network`` (nothing starts), unless the spec says ``mode = "none"``
    explicitly, which gets a warning that the network is not blocked.
    """
    sandboxed = resolve_sandbox(mode)
    if network or sandboxed:
        return sandboxed, None
    if mode == "none":
        return False, 'sandbox.network = false with sandbox.mode = "none": the network is not blocked'
    raise SpecError(
        "sandbox.network",
        f"false needs a sandbox to enforce it, and bubblewrap is unusable here ({_probe()[1]}); "
        'install bubblewrap, or set sandbox.mode = "none" to run with the network on',
    )


class Sandbox:
    """One run's sandbox: the mounts every command shares, and each command's exposure, cached.

    ``home`` is the sandbox's own ``HOME`` (an empty tmpfs). ``homes`` are the user's home
    directories (``$HOME`` and the passwd one, ``denylist.home_dirs``): hidden, and where the deny
    list applies. ``hide`` are further directories to hide (``CRUCIBLE_HOME``); ``private`` ones are
    never shown again, even when a command names a path there. ``readonly`` are the spec's
    ``sandbox.readonly`` entries; ``secret_files`` the controller's own secret files (a GitHub App
    key, a kubeconfig), masked wherever they are. ``projects`` are the component repositories (where
    pyenv looks for ``.python-version``); ``environ`` the controller's environment, of which only the
    variables that move toolchain roots are kept (``toolchains.ROOT_VARIABLES``).
    """

    def __init__(
        self,
        *,
        network: bool,
        home: str,
        homes: Sequence[Path] = (),
        hide: Sequence[Path] = (),
        private: Sequence[Path] = (),
        readonly: Sequence[Path] = (),
        secret_files: Sequence[Path] = (),
        projects: Sequence[Path] = (),
        environ: Mapping[str, str] | None = None,
        tmpfs_bytes: int | None = None,
    ) -> None:
        self.network = network
        self.home = home
        self.homes = tuple(homes)
        # A home that does not exist (HOME=/nonexistent) has nothing to hide, and no mount point.
        self.hide = tuple(dict.fromkeys([*(h for h in self.homes if h.is_dir()), *hide]))
        self.private = tuple(private)
        self.readonly = tuple(readonly)
        self.secret_files = tuple(secret_files)
        self.denied = (*denied_paths(self.homes), *self.secret_files)
        self.host = Host.of(self.homes, environ or {}, projects)
        self.tmpfs_bytes = tmpfs_bytes
        self._exposures: dict[tuple[tuple[str, ...], str | None], Exposure] = {}
        self._lock = threading.Lock()

    @property
    def masks(self) -> list[Path]:
        """The directories hidden under an empty tmpfs."""
        return [Path("/tmp"), Path("/run"), Path(self.home), *self.hide]

    def exposure(self, argv: Sequence[str], search_path: str | None = None) -> Exposure:
        """What ``argv`` sees of the masked directories (``sandboxview.expose``), computed once per
        command and ``PATH`` for the life of this object (a run)."""
        key = (tuple(argv), search_path)
        with self._lock:
            cached = self._exposures.get(key)
        if cached is not None:
            return cached
        made = expose(
            argv,
            masks=self.masks,
            host=self.host,
            denied=self.denied,
            private=self.private,
            readonly=self.readonly,
            search_path=search_path,
        )
        with self._lock:
            self._exposures[key] = made
        return made

    def wrap(
        self,
        argv: Sequence[str],
        *,
        writable: Sequence[Path] = (),
        readonly: Sequence[Path] = (),
        search_path: str | None = None,
        cwd: Path | None = None,
        environ: Mapping[str, str] | None = None,
        expose_for: Sequence[str] | None = None,
        home_tree: Path | None = None,
    ) -> list[str]:
        """``argv`` prefixed with the bwrap invocation that sandboxes it.

        Mounts, in order (later ones win): the host ``/`` read-only; fresh ``/dev`` and ``/proc``;
        empty tmpfs on ``/tmp``, ``/run`` (``/run/systemd/resolve`` re-exposed for DNS), the sandbox's
        ``home``, the user's homes and each ``hide`` path; the controller's secret files masked; then,
        read-only, the exposure of ``argv`` (or ``expose_for``): toolchain roots, what it needs to
        start, ``sandbox.readonly``; ``private`` paths inside those hidden again; the mirrored
        dotfiles into ``home``; the folders and files of ``home_tree`` at the same places under ``home``
        (made there, and bound read-only: a preset's settings, ``turn.prepare``; the rest of ``home``
        stays the tmpfs, where a CLI's own state is fastest to write); each ``writable`` path bound
        read-write, then each ``readonly`` one
        read-only (so a checkout's ``.git`` is read-only again inside a writable checkout); last,
        every existing denied path inside any of those binds masked (an empty read-only tmpfs, or
        ``/dev/null`` for a file). Every tmpfs is capped at ``tmpfs_bytes`` when given (the run's
        disk budget: what a command writes to ``/tmp`` is memory, not the run directory the budget
        measures). ``HOME`` is set to ``home``, ``TMPDIR`` to ``/tmp``, and the toolchain variables
        the exposure names unless ``environ`` (the command's environment) has them. The working
        directory is ``cwd`` when given, else the caller's. Raises CrucibleError when bwrap is unusable.
        """
        path, reason = _probe()
        if path is None:
            raise CrucibleError(f"cannot sandbox: {reason}")
        shown = self.exposure(expose_for or argv, search_path)
        size = [] if self.tmpfs_bytes is None else ["--size", str(self.tmpfs_bytes)]
        args = [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *size, "--tmpfs", "/tmp"]
        if Path("/run").is_dir():
            args += [*size, "--tmpfs", "/run"]
            for keep in _RUN_KEEP:
                args += ["--ro-bind-try", keep, keep]
        for masked in (self.home, *self.hide):
            args += [*size, "--tmpfs", str(masked)]
        args += self._mask([p for p in self.secret_files if p.exists()])
        for bind in shown.binds:
            if bind.is_symlink():  # a bind would show the target's content at the link, not the link
                args += ["--symlink", os.readlink(bind), str(bind)]
            else:
                args += ["--ro-bind", str(bind), str(bind)]
        args += self._mask(
            sorted({p for p in self.private for b in shown.binds if p != b and p.is_relative_to(b)})
        )
        for real, rel in shown.home_files:
            args += ["--ro-bind", str(real), str(Path(self.home) / rel)]
        if home_tree is not None:
            args += _home_tree(home_tree, Path(self.home))
        for target in writable:
            args += ["--bind", str(target), str(target)]
        for target in readonly:
            args += ["--ro-bind", str(target), str(target)]
        binds = [*shown.binds, *writable, *readonly]
        args += self._mask(masks_inside(binds, self.denied, [c.root for c in shown.toolchains]))
        args += _isolation_args(self.network)
        args += ["--setenv", "HOME", self.home, "--setenv", "TMPDIR", "/tmp"]
        for name, value in shown.env:
            if environ is None or name not in environ:
                args += ["--setenv", name, value]
        if cwd is not None:
            args += ["--chdir", str(cwd)]
        return [*args, "--", *argv]

    def _mask(self, paths: Sequence[Path]) -> list[str]:
        size = [] if self.tmpfs_bytes is None else ["--size", str(self.tmpfs_bytes)]
        args: list[str] = []
        for target in paths:
            if target.is_dir():
                args += [*size, "--tmpfs", str(target), "--remount-ro", str(target)]
            else:
                args += ["--ro-bind", "/dev/null", str(target)]
        return args


def _home_tree(tree: Path, home: Path) -> list[str]:
    """``--dir`` for each folder under ``tree`` and ``--ro-bind`` for each file, at the same relative
    place under ``home`` (links and other kinds are left out)."""
    args: list[str] = []
    for folder, dirs, files in os.walk(tree):
        relative = Path(folder).relative_to(tree)
        args += [arg for name in sorted(dirs) for arg in ("--dir", str(home / relative / name))]
        for name in sorted(files):
            source = Path(folder) / name
            if source.is_file() and not source.is_symlink():
                args += ["--ro-bind", str(source), str(home / relative / name)]
    return args


def wrap_command(
    argv: Sequence[str],
    *,
    writable: Sequence[Path],
    readonly: Sequence[Path] = (),
    network: bool,
    home: str,
    hide: Sequence[Path] = (),
    cwd: Path | None = None,
    private: Sequence[Path] = (),
    search_path: str | None = None,
    expose_for: Sequence[str] | None = None,
    tmpfs_bytes: int | None = None,
    homes: Sequence[Path] = (),
    home_tree: Path | None = None,
) -> list[str]:
    """One command wrapped by a :class:`Sandbox` made for it alone (see ``Sandbox.wrap``); a run
    keeps one ``Sandbox`` so each command's exposure is computed once."""
    sandbox = Sandbox(
        network=network, home=home, homes=homes, hide=hide, private=private, tmpfs_bytes=tmpfs_bytes
    )
    return sandbox.wrap(
        argv,
        writable=writable,
        readonly=readonly,
        search_path=search_path,
        cwd=cwd,
        expose_for=expose_for,
        home_tree=home_tree,
    )


def preflight(
    command: str,
    *,
    network: bool,
    home: str,
    hide: Sequence[Path] = (),
    private: Sequence[Path] = (),
    search_path: str | None = None,
) -> list[str]:
    """``sandboxprobe.preflight`` in a sandbox made for this command alone (kept for callers that
    have no run's ``Sandbox``)."""
    from controller.workspace.sandboxprobe import preflight as probe  # it imports this module

    sandbox = Sandbox(network=network, home=home, hide=hide, private=private)
    return probe(command, sandbox, environ={"PATH": search_path or os.defpath})

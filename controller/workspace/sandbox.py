"""The bubblewrap sandbox for agent, validation and metric commands (DESIGN §4).

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
from collections.abc import Sequence
from pathlib import Path

from controller.domain.errors import CrucibleError, SpecError
from controller.workspace.sandboxpaths import needed_paths, program_words, under

SANDBOX_MODES = ("auto", "bwrap", "none")
_SELF_TEST_TIMEOUT_S = 10.0

# Kept visible under the tmpfs on /run: on systemd hosts /etc/resolv.conf points here.
_RUN_KEEP = ("/run/systemd/resolve",)
# Shell words that are no programs on PATH (``cd sub && make``).
_SHELL_BUILTINS = frozenset(
    {
        "cd",
        "exec",
        "export",
        "set",
        "test",
        "[",
        "echo",
        "printf",
        "true",
        "false",
        "if",
        "for",
        "while",
        "case",
        "read",
        "eval",
        ".",
        "source",
        "exit",
        "return",
        "unset",
        "ulimit",
        "umask",
        "wait",
        "time",
    }
)


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
            argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=_SELF_TEST_TIMEOUT_S, check=False
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


def visible_paths(
    argv: Sequence[str], masked: Sequence[Path], private: Sequence[Path] = (), search_path: str | None = None
) -> list[Path]:
    """What ``argv`` needs to start that lies under one of the ``masked`` directories and outside every
    ``private`` one: the paths the sandbox binds back, read-only (issue 13)."""
    needed = needed_paths(argv, search_path)
    hidden = [p for p in needed if not any(p == q or p.is_relative_to(q) for q in private)]
    return under(hidden, masked)


def preflight(
    command: str,
    *,
    network: bool,
    home: str,
    hide: Sequence[Path] = (),
    private: Sequence[Path] = (),
    search_path: str | None = None,
) -> list[str]:
    """Problems that would keep ``command`` (run as ``/bin/sh -c command``) from starting inside the
    sandbox, found before any turn (``crucible loop --dry-run``): a program found on ``PATH`` neither
    outside nor inside, and every path it needs that is missing inside. Runs one bwrap probe."""
    search = os.defpath if search_path is None else search_path  # no PATH: what exec searches
    problems = [
        f"{word}: not found on PATH (outside the sandbox either)"
        for word in program_words(command)
        if "/" not in word
        and "$" not in word
        and shutil.which(word, path=search) is None
        and word not in _SHELL_BUILTINS
    ]
    shell = ["/bin/sh", "-c", command]
    needed = [str(p) for p in needed_paths(shell, search)]
    probe = ["/bin/sh", "-c", 'for p in "$@"; do [ -e "$p" ] || echo "$p"; done', "probe", *needed]
    argv = wrap_command(
        probe,
        writable=[],
        network=network,
        home=home,
        hide=hide,
        private=private,
        search_path=search,
        expose_for=shell,
    )
    result = subprocess.run(argv, capture_output=True, text=True, timeout=_SELF_TEST_TIMEOUT_S, check=False)
    if result.returncode != 0:
        return [*problems, f"the sandbox probe failed: {result.stderr.strip()}"]
    where = "inside the sandbox (bubblewrap, sandbox.mode)"
    problems += [f"{missing} exists outside but is not visible {where}" for missing in result.stdout.split()]
    return problems


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
) -> list[str]:
    """``argv`` prefixed with the bwrap invocation that sandboxes it.

    Mounts, in order (later ones win): the host ``/`` read-only; fresh ``/dev`` and ``/proc``;
    empty tmpfs on ``/tmp``, ``/run`` (``/run/systemd/resolve`` re-exposed for DNS), ``home`` and
    each ``hide`` path (e.g. the user's real home when ``home`` differs, or CRUCIBLE_HOME: the
    database and other runs); then, read-only, what ``argv`` (or ``expose_for``) needs to start
    that those masks hid (``sandboxpaths.needed_paths``: programs after ``PATH`` lookup in
    ``search_path``, the command's PATH (without one ``os.defpath``, as exec searches), and
    symlinks, their ``#!`` interpreters and virtual environments, absolute paths it names),
    except anything inside ``private``; then each ``writable`` path bound read-write, then each
    ``readonly`` path bound read-only (so ``Checkout.sandbox_readonly_paths()`` can re-protect
    ``.git`` inside a writable checkout).
    Every tmpfs is capped at ``tmpfs_bytes`` when given (the run's disk budget: what a command writes
    to ``/tmp`` is memory, not the run directory the budget measures).
    ``HOME`` is set to ``home`` and ``TMPDIR`` to ``/tmp``. The working directory is ``cwd`` when
    given, else the caller's (bwrap keeps it when it is visible inside). All paths must exist.
    Raises CrucibleError when bwrap is unusable.
    """
    path, reason = _probe()
    if path is None:
        raise CrucibleError(f"cannot sandbox: {reason}")
    # Each tmpfs is capped (bwrap --size): uncapped, one is half the RAM, outside the disk budget.
    size = [] if tmpfs_bytes is None else ["--size", str(tmpfs_bytes)]
    args = [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *size, "--tmpfs", "/tmp"]
    if Path("/run").is_dir():
        args += [*size, "--tmpfs", "/run"]
        for keep in _RUN_KEEP:
            args += ["--ro-bind-try", keep, keep]
    for masked in (home, *hide):
        args += [*size, "--tmpfs", str(masked)]
    masks = [Path("/tmp"), Path("/run"), Path(home), *hide]
    for needed in visible_paths(expose_for or argv, masks, private, search_path):
        args += ["--ro-bind", str(needed), str(needed)]
    for target in writable:
        args += ["--bind", str(target), str(target)]
    for target in readonly:
        args += ["--ro-bind", str(target), str(target)]
    args += _isolation_args(network)
    args += ["--setenv", "HOME", home, "--setenv", "TMPDIR", "/tmp"]
    if cwd is not None:
        args += ["--chdir", str(cwd)]
    return [*args, "--", *argv]

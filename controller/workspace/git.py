"""The one place crucible runs git: a clean environment, readable errors, and a few read-only queries.

Git reads a surprising amount of state from the environment (``GIT_DIR``, ``GIT_INDEX_FILE``,
``GIT_WORK_TREE`` …), and a controller started from a git hook or a terminal with such variables
set would silently operate on the wrong repository. Every git call goes through :func:`run_git`,
which starts from :func:`git_env` unless the caller passes a complete environment, and turns a
failure into a :class:`~controller.domain.errors.GitError` carrying the command and its stderr
(the way pre-commit does it).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from controller.domain.errors import GitError
from controller.workspace.escapees import own_session, release_session

# Inherited GIT_* variables that configure *how* git talks to the world (transport, credentials
# helpers, one-off config), not *which* repository it works on. Same allow-list as pre-commit's
# ``no_git_env``, plus the variables that choose which config files are read.
_KEPT_GIT_VARS = frozenset(
    {
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSL_CAINFO",
        "GIT_SSL_NO_VERIFY",
        "GIT_CONFIG_COUNT",
        "GIT_HTTP_PROXY_AUTHMETHOD",
        "GIT_ALLOW_PROTOCOL",
        "GIT_ASKPASS",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
    }
)
_KEPT_GIT_PREFIXES = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")


def _keep(name: str) -> bool:
    return not name.startswith("GIT_") or name in _KEPT_GIT_VARS or name.startswith(_KEPT_GIT_PREFIXES)


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for crucible's own git commands.

    ``os.environ`` without the inherited ``GIT_*`` variables that point git at a repository, index
    or work tree (``GIT_DIR``, ``GIT_INDEX_FILE``, ``GIT_WORK_TREE``, ``GIT_OBJECT_DIRECTORY`` …);
    transport and config-selection variables (``GIT_SSH_COMMAND``, ``GIT_CONFIG_GLOBAL``,
    ``GIT_CONFIG_NOSYSTEM`` …, see ``_KEPT_GIT_VARS``) are kept because they are the user's choice
    of how git should reach remotes. System and global config are read as usual: they hold
    credential helpers, LFS filters and ``safe.directory`` that a clone needs; every option whose
    user value would change crucible's results is overridden on the command line instead.

    Added: ``GIT_TERMINAL_PROMPT=0`` (never hang waiting for a password) and ``LC_ALL=C`` (stable,
    English messages). ``extra`` is applied last.
    """
    env = dict(_base_env())
    if extra:
        env.update(extra)
    return env


_base: list[tuple[dict[bytes, bytes], dict[str, str]]] = []  # (the environment's bytes, git_env())
_base_lock = threading.Lock()


def _base_env() -> dict[str, str]:
    """``git_env()`` without ``extra``, filtered again only when the process's environment changed.

    Every git call asked for it, and decoding and filtering the whole environment was a tenth of a
    millisecond a call (ADR-0048). The check compares the environment's own bytes (``os.environ``'s
    backing dict, one C-level comparison), so a variable set, changed or removed since (a test's
    ``monkeypatch``, a caller's ``os.environ[...] = ...``) is seen at the next call exactly as before.
    Where that dict is not there (not CPython), the environment is filtered every time."""
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):
        return _filtered(os.environ.items())
    with _base_lock:
        if _base and _base[0][0] == raw:
            return _base[0][1]
        snapshot = dict(raw)  # filtered from this copy, so the pair stays one state of the environment
        decode, decode_value = os.environ.decodekey, os.environ.decodevalue
        env = _filtered((decode(k), decode_value(v)) for k, v in snapshot.items())
        _base[:] = [(snapshot, env)]
        return env


def _filtered(variables: Iterable[tuple[str, str]]) -> dict[str, str]:
    env = {name: value for name, value in variables if _keep(name)}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    return env


@functools.lru_cache(maxsize=1)
def _trusted_ssh_command() -> str:
    """``core.sshCommand`` as the user's system and global config set it (read outside any repository),
    else plain ``ssh``: the value pinned on every call, so a clone's own config cannot choose it."""
    proc = subprocess.run(
        ["git", "config", "--get", "core.sshCommand"],
        cwd="/",
        env=git_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    value = proc.stdout.decode("utf-8", "replace").strip()
    return value if proc.returncode == 0 and value else "ssh"


def pinned_config() -> list[str]:
    """``-c`` options that keep repository-configured programs out of crucible's git (issue 11 §2).

    An agent without a sandbox can write a clone's ``.git/config``; crucible's next ``git status`` would
    then run ``core.fsmonitor`` with the controller's environment. These options override every config
    level for the programs git would otherwise start on its own: fsmonitor, hooks, pager, external
    diff, editor, ssh, background maintenance. Filters, ``include.path`` and the rest of a clone's
    config are covered by ``controller.workspace.gitguard``, which restores a tampered ``.git`` before
    crucible's git runs there again.
    """
    return [
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.pager=cat",
        "-c",
        "core.editor=false",
        "-c",
        "sequence.editor=false",
        "-c",
        "diff.external=",
        "-c",
        f"core.sshCommand={_trusted_ssh_command()}",
        "-c",
        "gc.auto=0",
        "-c",
        "maintenance.auto=false",
    ]


def run_git_bytes(
    args: Sequence[str],
    cwd: Path,
    *,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
    timeout: float | None = None,
    cpu_s: int | None = None,
) -> tuple[int, bytes, str]:
    """Run ``git *args`` in ``cwd``; return (returncode, raw stdout, stderr text).

    Raises GitError on a non-zero exit when ``check`` (the default), and always when ``timeout``
    seconds pass first (the command is killed) or the command used ``cpu_s`` seconds of CPU (the
    kernel stops it: ``RLIMIT_CPU``, inherited by anything it starts): git over input a worker sent
    must not run for as long, nor burn as much of the controller's CPU, as the input makes it. The
    CPU limit is set before git starts (``_cpu_bounded``), not in a ``preexec_fn``, which is unsafe
    in a process with threads (the API server's). A bounded command runs in a session of its own, so
    a timeout kills what git started too: a process git forked holds its output pipes open.
    """
    argv = ["git", *pinned_config(), *args]
    bounded = timeout is not None or cpu_s is not None

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            _cpu_bounded(argv, cpu_s) if cpu_s is not None else argv,
            cwd=cwd,
            env=dict(env) if env is not None else git_env(),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=bounded,
        )

    # A bounded command's session is registered as ours: a command ending meanwhile in another thread
    # would take it for something it left behind (``escapees.own_session``).
    proc = own_session(start) if bounded else start()
    try:
        with proc:
            try:
                out, err = proc.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise GitError(list(args), -9, f"timed out after {timeout:g} s") from None
    finally:
        if bounded:
            release_session(proc.pid)
    stderr = err.decode("utf-8", "replace")
    if cpu_s is not None and _out_of_cpu(proc.returncode, stderr):
        raise GitError(list(args), proc.returncode, f"stopped after {cpu_s} s of CPU")
    if check and proc.returncode != 0:
        raise GitError(list(args), proc.returncode, stderr)
    return proc.returncode, out, stderr


def _out_of_cpu(code: int, stderr: str) -> bool:
    """Whether the limit stopped it: git itself by SIGXCPU (or SIGKILL at the hard limit), or a process
    git started, which git reports as its exit status or in a "died of signal" line."""
    xcpu, kill = int(signal.SIGXCPU), int(signal.SIGKILL)
    return code in (-xcpu, -kill, 128 + xcpu) or f"died of signal {xcpu}" in stderr


def _cpu_bounded(argv: list[str], seconds: int) -> list[str]:
    """``argv`` under ``RLIMIT_CPU``: SIGXCPU at ``seconds`` of CPU, SIGKILL a second later. ``sh``
    sets the limit on itself and execs the command, so git and everything it starts inherit it.
    Setting it on the started child (``prlimit`` on its pid) raced git's own forks: an alias's shell
    forked before the limit landed spun unbounded."""
    script = f'ulimit -S -t {seconds} && ulimit -H -t {seconds + 1} && exec "$@"'
    return ["/bin/sh", "-c", script, "sh", *argv]


def run_git(
    args: Sequence[str],
    cwd: Path,
    *,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
    timeout: float | None = None,
    cpu_s: int | None = None,
) -> str:
    """Run ``git *args`` in ``cwd`` and return stdout as text.

    stdout is decoded as UTF-8 with ``surrogateescape`` (so odd path bytes survive a round trip
    through ``os.fsencode``) and stripped of one trailing newline only. ``env`` is the *complete*
    environment (build it with ``git_env(extra)``); None means ``git_env()``. Raises GitError on
    a non-zero exit unless ``check=False``; ``timeout`` and ``cpu_s`` as for ``run_git_bytes``.
    """
    _, out, _ = run_git_bytes(args, cwd, env=env, input=input, check=check, timeout=timeout, cpu_s=cpu_s)
    text = out.decode("utf-8", "surrogateescape")
    return text[:-1] if text.endswith("\n") else text


def resolve_ref(repo: Path, ref: str) -> str:
    """The full sha of the commit ``ref`` names in ``repo``; GitError if there is none."""
    if not ref or ref.startswith("-"):
        raise GitError(["rev-parse", ref], 128, f"not a revision: {ref!r}")
    args = ["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"]
    code, out, _ = run_git_bytes(args, repo, check=False)
    if code != 0:
        raise GitError(args, code, f"unknown revision or not a commit: {ref!r}")
    return out.decode("ascii").strip()


def is_ancestor(repo: Path, a: str, b: str) -> bool:
    """True iff commit ``a`` is an ancestor of (or equal to) commit ``b``; GitError if either is unknown."""
    args = ["merge-base", "--is-ancestor", a, b]
    code, _, stderr = run_git_bytes(args, repo, check=False)
    if code in (0, 1):
        return code == 0
    raise GitError(args, code, stderr)

"""The wrapper a preset's turn runs: start the CLI headless, then print the agent protocol's lines.

``python -I -m controller.agents.run --preset NAME --cli PATH …`` (built by ``command.agent_command``)
runs as the turn's agent command, inside the sandbox. It reads the brief (``$CRUCIBLE_CANDIDATE``), gives
the CLI a ``HOME`` of its own (a fresh folder under ``$TMPDIR``, removed afterwards: the CLI's state never
reaches the user's real ``~/.claude`` or ``~/.codex``, and nothing from there reaches the CLI), runs it in
the workspace with stdin closed, and translates its output into ``HYPOTHESIS:`` and ``COST`` lines. A turn
the CLI did not do (it could not reach its model, was not allowed to edit, is not installed) exits
non-zero with one last line on stderr saying why: the turn's ``agent_failed`` detail.

The CLI's own output goes to stderr (the turn's log), never to stdout, so nothing it prints can pass for a
protocol line.

Its start-up is part of every turn (``bench/agents.py``, ADR-0033), so it is started with ``-S`` (no
``site``: crucible's code root is put on ``sys.path`` by the command itself) and imports only light
modules: no ``argparse``, ``subprocess``, ``threading``, ``tempfile``, ``shutil`` or ``dataclasses``,
whose imports together cost more CPU than the interpreter's own start. The CLI is started with
``os.posix_spawn`` and its two pipes are read in one ``select`` loop.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from controller.agents.base import Preset, Report, Settings, Usage
from controller.agents.registry import PRESETS

EXIT_FAILED = 3  # the CLI ran but did not do the turn (or could not start)
CONNECT_TIMEOUT_S = 10.0
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
DEFAULT_ENDPOINTS = {"claude-code": "https://api.anthropic.com", "codex": "https://api.openai.com/v1"}

PREAMBLE = """\
You are one turn of a measured optimisation loop. Make one focused change to the files in your working \
directory that you expect to improve the objective below; crucible then measures it and keeps it only if \
it is better.
Working directory: {workdir}

Rules: edit files in place; do not commit, stage, reset, switch branches or push (crucible commits a kept \
change itself); touch only what the brief allows.
End your final message with one line of the form
HYPOTHESIS: <what this change tries, in one line>

The brief (CANDIDATE.md) follows.

"""


class Price(NamedTuple):
    """USD per million tokens."""

    input: float
    output: float


class Options(NamedTuple):
    """The wrapper's arguments, as ``command.agent_command`` writes them."""

    preset: str  # --preset NAME
    cli: str  # --cli PATH: the CLI's path, or its program name when it was not found
    model: str | None = None  # --model
    base_url: str | None = None  # --base-url
    args: tuple[str, ...] = ()  # --arg=VALUE, repeated: extra CLI arguments
    prices: tuple[tuple[str, Price], ...] = ()  # --price=MODEL=INPUT:OUTPUT, repeated
    sandboxed: bool = False  # --sandboxed: crucible's sandbox is on
    needs: tuple[Path, ...] = ()  # --needs PATH, repeated: must be visible here


class UsageError(Exception):
    """The wrapper was started with arguments it does not take (exit 2)."""


USAGE = (
    "usage: crucible-agent --preset NAME --cli PATH [--model M] [--base-url URL] [--arg=VALUE]… "
    "[--price=MODEL=INPUT:OUTPUT]… [--sandboxed] [--needs PATH]…"
)
_VALUED = ("--preset", "--cli", "--model", "--base-url", "--arg", "--price", "--needs")


def _price(text: str) -> tuple[str, Price]:
    model, _, pair = text.rpartition("=")
    inputs, _, outputs = pair.partition(":")
    if model:
        try:
            return model, Price(float(inputs), float(outputs))
        except ValueError:
            pass
    raise UsageError(f"--price: expected MODEL=INPUT:OUTPUT, got {text!r}")


def parse(argv: Sequence[str]) -> Options:
    """Read the wrapper's arguments (``--name VALUE`` or ``--name=VALUE``). Not ``argparse``: the wrapper
    only ever reads what ``command.agent_command`` wrote, and importing ``argparse`` alone costs a
    quarter of its start-up."""
    values: dict[str, list[str]] = {name: [] for name in _VALUED}
    sandboxed = False
    words = list(argv)
    while words:
        word = words.pop(0)
        name, eq, value = word.partition("=")
        if word == "--sandboxed":
            sandboxed = True
            continue
        if name not in values:
            raise UsageError(f"unknown argument {word!r}")
        if not eq:
            if not words:
                raise UsageError(f"{name} expects a value")
            value = words.pop(0)
        values[name].append(value)
    for required in ("--preset", "--cli"):
        if len(values[required]) != 1:
            raise UsageError(f"{required} is required once")
    name = values["--preset"][0]
    if name not in PRESETS:
        raise UsageError(f"--preset: unknown preset {name!r} (choose from {', '.join(sorted(PRESETS))})")
    return Options(
        preset=name,
        cli=values["--cli"][0],
        model=values["--model"][-1] if values["--model"] else None,
        base_url=values["--base-url"][-1] if values["--base-url"] else None,
        args=tuple(values["--arg"]),
        prices=tuple(_price(text) for text in values["--price"]),
        sandboxed=sandboxed,
        needs=tuple(Path(path) for path in values["--needs"]),
    )


def say(line: str) -> None:
    """One line for the turn's log (stderr)."""
    print(f"crucible-agent: {line}", file=sys.stderr, flush=True)


def cost_line(usage: Sequence[Usage], prices: dict[str, Price], model: str | None) -> str | None:
    """``COST usd=… tokens=…``: a price given for the model wins over the CLI's own estimate; without
    either, only tokens. None when the CLI reported nothing."""
    if not usage:
        return None
    tokens = sum(u.tokens for u in usage)
    usd: float | None = 0.0
    for used in usage:
        price = next((prices[name] for name in (used.model, model) if name and name in prices), None)
        if price is not None:
            assert usd is not None
            usd += (used.input_tokens * price.input + used.output_tokens * price.output) / 1e6
        elif used.usd is not None and usd is not None:
            usd += used.usd
        else:
            usd = None
    return f"COST usd={usd:.6f} tokens={tokens}" if usd is not None else f"COST tokens={tokens}"


def hypothesis(message: str | None) -> str | None:
    """The final message's last ``HYPOTHESIS:`` line, else its first non-empty line."""
    if not message:
        return None
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("HYPOTHESIS:"):
            return line.removeprefix("HYPOTHESIS:").strip() or None
    return lines[0][:500] if lines else None


def unreachable(preset: str, base_url: str | None, environ: dict[str, str]) -> str | None:
    """Why the model endpoint cannot be reached, found with one TCP connect before the CLI starts (a CLI
    may retry a refused connection for minutes); None when it answers, or when a proxy stands between."""
    if any(environ.get(name) for name in PROXY_VARIABLES):
        return None
    url = base_url or DEFAULT_ENDPOINTS.get(preset)
    if not url:
        return None
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT_S):
            return None
    except OSError as error:
        reason = error.strerror or str(error)
        offline = isinstance(error, socket.gaierror)
        hint = " (sandbox.network = false gives the agent no network)" if offline else ""
        return f"cannot reach the model endpoint {url}: {reason}{hint}"


def run_cli(argv: list[str], env: dict[str, str], stdin: str | None) -> tuple[str, str, int]:
    """Run the CLI in the current directory; its stdout and stderr are kept and both copied, line by
    line, to our stderr as they come. Raises OSError when it cannot start."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    in_read, in_write = os.pipe() if stdin is not None else (-1, -1)
    actions: list[tuple[int | str, ...]] = [
        (os.POSIX_SPAWN_DUP2, out_write, 1),
        (os.POSIX_SPAWN_DUP2, err_write, 2),
    ]
    if stdin is not None:
        actions.append((os.POSIX_SPAWN_DUP2, in_read, 0))
    else:
        actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
    try:  # the pipes are close-on-exec: the CLI keeps only the ends dup'ed onto 0, 1 and 2
        # Python ignores SIGPIPE and SIGXFSZ; the CLI gets them back at their defaults, as subprocess does.
        restored = (signal.SIGPIPE, signal.SIGXFSZ)
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setsigdef=restored)
    except OSError:
        for fd in (out_read, err_read, in_write):
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in (out_write, err_write, in_read):
            if fd >= 0:
                os.close(fd)
    kept: dict[int, list[bytes]] = {out_read: [], err_read: []}
    _pump(kept, in_write, (stdin or "").encode("utf-8"))
    _, status = os.waitpid(pid, 0)
    out, err = (b"".join(kept[fd]).decode("utf-8", "replace") for fd in (out_read, err_read))
    return out, err, os.waitstatus_to_exitcode(status)


def _pump(kept: dict[int, list[bytes]], stdin_fd: int, stdin: bytes) -> None:
    """Read each pipe in ``kept`` to its end (and write ``stdin`` to ``stdin_fd`` unless it is -1, then
    close it), echoing whole lines to our stderr. One thread: no ``threading`` import, no GIL hand-offs
    per line."""
    reading = list(kept)
    writing = [stdin_fd] if stdin_fd >= 0 else []
    pending = memoryview(stdin)
    partial = {fd: b"" for fd in kept}
    if writing:
        os.set_blocking(stdin_fd, False)
    echo = sys.stderr.buffer
    while reading or writing:
        readable, writable, _ = select.select(reading, writing, [])
        if writable:
            try:
                pending = pending[os.write(stdin_fd, pending[:65536]) :]
            except BlockingIOError:
                pass
            except BrokenPipeError:  # the CLI does not read its stdin: nothing more to give it
                pending = pending[len(pending) :]
            if not pending:
                os.close(stdin_fd)
                writing = []
        for fd in readable:
            data = os.read(fd, 65536)
            if not data:
                reading.remove(fd)
                os.close(fd)
                lines, partial[fd] = partial[fd], b""
            else:
                kept[fd].append(data)
                head, newline, rest = (partial[fd] + data).rpartition(b"\n")
                lines, partial[fd] = head + newline, rest
            if lines:
                echo.write(lines)
                echo.flush()


def _fail(reason: str, code: int = EXIT_FAILED) -> int:
    print(reason, file=sys.stderr, flush=True)  # the last line of stderr: the turn's detail
    return code


def _resolve(chosen: Preset, cli: str, environ: dict[str, str]) -> str | None:
    if "/" in cli:
        return cli if os.access(cli, os.X_OK) else None
    import shutil  # only for a CLI the controller did not find: shutil's import is not light

    return shutil.which(cli, path=environ.get("PATH"))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
    except UsageError as error:
        print(f"{USAGE}\ncrucible-agent: error: {error}", file=sys.stderr, flush=True)
        return 2
    chosen = PRESETS[args.preset]
    environ = dict(os.environ)
    missing = [str(path) for path in args.needs if not path.exists()]
    if missing:
        return _fail(f"{', '.join(missing)} is not visible here (inside the sandbox: sandbox.readonly)")
    cli = _resolve(chosen, args.cli, environ)
    if cli is None:
        where = args.cli if "/" in args.cli else f"{args.cli!r} on PATH"
        return _fail(f"{chosen.title} is not installed ({where} not found); install it: {chosen.install}")
    candidate = environ.get("CRUCIBLE_CANDIDATE")
    brief = Path(candidate).read_text(encoding="utf-8") if candidate else ""
    workdir = Path.cwd()
    problem = unreachable(chosen.name, args.base_url, environ)
    if problem is not None:
        return _fail(f"{chosen.title}: {problem}")
    home = _fresh_home(_home_parent(args.sandboxed, environ), environ)
    try:
        settings = Settings(
            workdir=workdir,
            home=home,
            model=args.model,
            base_url=args.base_url,
            args=args.args,
            sandboxed=args.sandboxed,
        )
        invocation = chosen.invocation(cli, PREAMBLE.format(workdir=workdir) + brief, settings)
        for relative in invocation.dirs:
            (home / relative).mkdir(parents=True, exist_ok=True)
        for relative, text in invocation.files.items():
            target = home / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        env = {**environ, **_home_variables(home), **invocation.env}
        say(f"running {chosen.title}: {cli}")
        try:
            stdout, stderr, returncode = run_cli(invocation.argv, env, invocation.stdin)
        except OSError as error:
            return _fail(f"{chosen.title} could not start ({cli}): {error.strerror or error}")
        report: Report = chosen.report(stdout, stderr, returncode)
    finally:
        remove_tree(home)
    said = hypothesis(report.final_message)
    if said:
        print(f"HYPOTHESIS: {said}", flush=True)
    cost = cost_line(report.usage, dict(args.prices), args.model)
    if cost:
        print(cost, flush=True)
    if report.failure is not None:
        return _fail(report.failure, returncode or EXIT_FAILED)
    return 0


def _fresh_home(parent: str | None, environ: dict[str, str]) -> Path:
    """A new private folder (mode 0700) under ``parent``, else ``$TMPDIR`` or ``/tmp``: what
    ``tempfile.mkdtemp`` does, without importing ``tempfile`` (it pulls in ``random`` and ``hashlib``)."""
    where = parent or environ.get("TMPDIR") or "/tmp"
    while True:
        path = os.path.join(where, f"crucible-agent-home-{os.urandom(6).hex()}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return Path(path)


def remove_tree(root: Path) -> None:
    """Remove ``root`` and everything under it, ignoring what cannot be removed (``shutil.rmtree``'s
    ``ignore_errors``, without importing ``shutil``). Symbolic links are removed, never followed."""
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files:
            _ignore(os.unlink, os.path.join(folder, name))
        for name in dirs:
            path = os.path.join(folder, name)
            _ignore(os.unlink if os.path.islink(path) else os.rmdir, path)
    _ignore(os.rmdir, root)


def _ignore(remove: Callable[[str | Path], None], path: str | Path) -> None:
    with contextlib.suppress(OSError):
        remove(path)


def _home_parent(sandboxed: bool, environ: dict[str, str]) -> str | None:
    """Where the CLI's own HOME is made: ``$TMPDIR`` inside the sandbox (a private tmpfs); outside it,
    ``~/.cache/crucible/agent-homes`` (``$XDG_CACHE_HOME`` if set), because a CLI's own sandbox may refuse
    a home under ``/tmp`` (Codex does: its edits then fail)."""
    if sandboxed:
        return None
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".cache"
    )
    parent = os.path.join(cache, "crucible", "agent-homes")
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError:  # a read-only home (a container's): $TMPDIR after all
        return None
    return parent


def _home_variables(home: Path) -> dict[str, str]:
    """``HOME`` and the XDG folders inside it: a CLI that reads ``XDG_CONFIG_HOME`` must not find the
    user's real configuration either."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


if __name__ == "__main__":
    sys.exit(main())

"""The wrapper a preset's turn runs: start the CLI headless, then print the agent protocol's lines.

``python -I -m controller.agents.run --preset NAME --cli PATH …`` (built by ``command.agent_command``)
runs as the turn's agent command, inside the sandbox. It reads the brief (``$CRUCIBLE_CANDIDATE``), gives
the CLI a ``HOME`` of its own (a fresh folder under ``$TMPDIR``, removed afterwards: the CLI's state never
reaches the user's real ``~/.claude`` or ``~/.codex``, and nothing from there reaches the CLI), runs it in
the workspace with stdin closed, and translates its output into ``HYPOTHESIS:`` and ``COST`` lines. A turn
the CLI did not do (it could not reach its model, was not allowed to edit, is not installed) exits
non-zero with one last line on stderr saying why: the turn's ``agent_failed`` detail.

The CLI's own output goes to stderr (the turn's log), never to stdout, so nothing it prints can pass for a
protocol line. Only light modules are imported: the wrapper's start-up is part of every turn
(``bench/agents.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO
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


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float


def _price(text: str) -> tuple[str, Price]:
    model, _, pair = text.rpartition("=")
    inputs, _, outputs = pair.partition(":")
    if not model or not outputs:
        raise argparse.ArgumentTypeError(f"expected MODEL=INPUT:OUTPUT, got {text!r}")
    return model, Price(float(inputs), float(outputs))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crucible-agent", description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS))
    parser.add_argument("--cli", required=True, help="the CLI's path, or its program name when not found")
    parser.add_argument("--model")
    parser.add_argument("--base-url")
    parser.add_argument("--arg", action="append", default=[], help="an extra CLI argument (--arg=VALUE)")
    parser.add_argument("--price", action="append", default=[], type=_price, help="MODEL=INPUT:OUTPUT")
    parser.add_argument("--sandboxed", action="store_true", help="crucible's sandbox is on")
    parser.add_argument("--needs", action="append", default=[], type=Path, help="must be visible here")
    return parser


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


def _pump(stream: IO[bytes], sink: list[bytes], echo: bool) -> None:
    for chunk in iter(lambda: stream.readline(), b""):
        sink.append(chunk)
        if echo:
            sys.stderr.buffer.write(chunk)
            sys.stderr.buffer.flush()


def run_cli(argv: list[str], env: dict[str, str], stdin: str | None, cwd: Path) -> tuple[str, str, int]:
    """Run the CLI; its stdout and stderr are kept and both copied to our stderr as they come."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out: list[bytes] = []
    err: list[bytes] = []
    assert process.stdout is not None and process.stderr is not None
    pumps = [
        threading.Thread(target=_pump, args=(process.stdout, out, True), daemon=True),
        threading.Thread(target=_pump, args=(process.stderr, err, True), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    if stdin is not None:
        assert process.stdin is not None
        try:
            process.stdin.write(stdin.encode("utf-8"))
        except BrokenPipeError:
            pass
        finally:
            process.stdin.close()
    returncode = process.wait()
    for pump in pumps:
        pump.join()
    return b"".join(out).decode("utf-8", "replace"), b"".join(err).decode("utf-8", "replace"), returncode


def _fail(reason: str, code: int = EXIT_FAILED) -> int:
    print(reason, file=sys.stderr, flush=True)  # the last line of stderr: the turn's detail
    return code


def _resolve(chosen: Preset, cli: str, environ: dict[str, str]) -> str | None:
    if "/" in cli:
        return cli if os.access(cli, os.X_OK) else None
    return shutil.which(cli, path=environ.get("PATH"))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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
    home = Path(tempfile.mkdtemp(prefix="crucible-agent-home-", dir=_home_parent(args.sandboxed, environ)))
    try:
        settings = Settings(
            workdir=workdir,
            home=home,
            model=args.model,
            base_url=args.base_url,
            args=tuple(args.arg),
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
            stdout, stderr, returncode = run_cli(invocation.argv, env, invocation.stdin, workdir)
        except OSError as error:
            return _fail(f"{chosen.title} could not start ({cli}): {error.strerror or error}")
        report: Report = chosen.report(stdout, stderr, returncode)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    said = hypothesis(report.final_message)
    if said:
        print(f"HYPOTHESIS: {said}", flush=True)
    cost = cost_line(report.usage, dict(args.price), args.model)
    if cost:
        print(cost, flush=True)
    if report.failure is not None:
        return _fail(report.failure, returncode or EXIT_FAILED)
    return 0


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

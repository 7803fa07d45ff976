"""``crucible loop --dry-run``'s sandbox probe: start each command's programs inside the sandbox.

A command that cannot start inside the sandbox fails its first turn, or the baseline, after minutes of
setup. The probe finds that before anything runs, without running the command's work: one bubblewrap
process with the run's own mounts checks that every path the command needs to start is there
(``test -e``), that each program is found on ``PATH``, and starts each interpreter in the chain with a
no-op (``python3 -c pass``, ``node -e 0``), through the same shim the command would use, so a pyenv
shim whose manager is hidden fails here as it would in a turn.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from controller.workspace.sandbox import SELF_TEST_TIMEOUT_S, Sandbox
from controller.workspace.sandboxpaths import (
    hidden_problem,
    program_words,
    script_interpreters,
    start_problem,
)
from controller.workspace.toolchains import resolve_pyenv_shim

# Shell words that are no programs on PATH (``cd sub && make``).
SHELL_BUILTINS = frozenset(
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
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
_MARK = "@@crucible-probe"


def _noop(program: str) -> list[str] | None:
    """A command line that starts ``program`` and does nothing, when it is an interpreter we know."""
    name = Path(program).name
    if _PYTHON.fullmatch(name):
        return [program, "-c", "pass"]
    if name in ("node", "nodejs"):
        return [program, "-e", "0"]
    return None


def starters(command: str, search_path: str, sandbox: Sandbox) -> list[tuple[str, list[str]]]:
    """(program word, no-op command line) for each program of ``command`` that is an interpreter or
    runs on one: ``python3`` -> ``python3 -c pass``; a script with ``#!/usr/bin/env node`` -> ``node
    -e 0``; a pyenv shim of ``pytest`` -> the selected version's interpreter with ``-c pass``."""
    found: list[tuple[str, list[str]]] = []
    for word in program_words(command):
        if "$" in word or word in SHELL_BUILTINS:
            continue
        hit = word if os.path.isabs(word) else shutil.which(word, path=search_path)
        if hit is None:
            continue
        real = Path(os.path.realpath(hit))
        line = _noop(word) or (_noop(str(real)) and [word, *(_noop(str(real)) or [])[1:]])
        if not line:
            script = resolve_pyenv_shim(Path(hit), sandbox.host) or real
            for interpreter in reversed(script_interpreters(script, search_path)):
                if (line := _noop(str(interpreter))) is not None:
                    break
        if line:
            found.append((word, line))
    return found


def _probe_script(
    probes: Sequence[Path], words: Sequence[str], starts: Sequence[tuple[str, list[str]]]
) -> str:
    lines = [f'[ -e {shlex.quote(str(p))} ] || echo "{_MARK} missing {p}"' for p in probes]
    lines += [f'command -v {shlex.quote(w)} >/dev/null 2>&1 || echo "{_MARK} notfound {w}"' for w in words]
    for word, argv in starts:
        quoted = " ".join(shlex.quote(a) for a in argv)
        lines.append(
            f'{quoted} </dev/null >/dev/null 2>"$TMPDIR/probe.err" || '
            f'{{ echo "{_MARK} nostart {word}"; head -c 600 "$TMPDIR/probe.err"; echo; echo "{_MARK} end"; }}'
        )
    return "\n".join(lines) + "\n"


def preflight(
    command: str,
    sandbox: Sandbox,
    *,
    environ: Mapping[str, str],
    cwd: Path | None = None,
) -> list[str]:
    """Problems that would keep ``command`` (run as ``/bin/sh -c command``) from starting inside
    ``sandbox``, each a sentence naming the path and the fix: a program found on ``PATH`` neither
    outside nor inside, a path it needs that is hidden inside (or withheld by the deny list), an
    interpreter that does not start. ``environ`` is the command's environment (scrubbed, with
    ``PATH``); ``cwd`` the directory it would run in (a component repository), shown read-only."""
    search = environ.get("PATH") or os.defpath
    words = [w for w in program_words(command) if "/" not in w and "$" not in w and w not in SHELL_BUILTINS]
    problems = [
        f"{w}: not found on PATH (outside the sandbox either)"
        for w in words
        if not shutil.which(w, path=search)
    ]
    shell = ["/bin/sh", "-c", command]
    shown = sandbox.exposure(shell, search)
    problems += [hidden_problem(p, denied=True) for p in shown.withheld]
    script = _probe_script(
        shown.probes, [w for w in words if shutil.which(w, path=search)], starters(command, search, sandbox)
    )
    argv = sandbox.wrap(
        ["/bin/sh", "-c", script],
        readonly=[cwd] if cwd is not None else [],
        search_path=search,
        cwd=cwd,
        environ=environ,
        expose_for=shell,
    )
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=dict(environ),
            timeout=SELF_TEST_TIMEOUT_S * 3,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [*problems, "the sandbox probe did not finish in time"]
    if result.returncode != 0:
        return [*problems, f"the sandbox probe failed: {result.stderr.strip()}"]
    return problems + _read_probe(result.stdout, search, sandbox)


def _read_probe(stdout: str, search: str, sandbox: Sandbox) -> list[str]:
    problems: list[str] = []
    lines = stdout.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.startswith(_MARK + " "):
            continue
        kind, _, what = line[len(_MARK) + 1 :].partition(" ")
        if kind == "missing":
            problems.append(hidden_problem(what))
        elif kind == "notfound":
            problems.append(
                f"{what}: found on PATH outside but not inside the sandbox (bubblewrap, sandbox.mode)"
            )
        elif kind == "nostart":
            err: list[str] = []
            while index < len(lines) and lines[index] != f"{_MARK} end":
                err.append(lines[index])
                index += 1
            index += 1
            text = "\n".join(err).strip()
            why = start_problem(text, search, sandbox.denied) or (text.splitlines() or ["no output"])[-1]
            problems.append(f"{what} does not start inside the sandbox: {why}")
    return problems

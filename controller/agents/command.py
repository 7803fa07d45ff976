"""The command a turn runs for ``[agent] preset = …``: the CLI itself, with its output going to files.

The executor runs every agent command as ``/bin/sh -c COMMAND``; for a preset that command is the CLI's
own argv, ``exec``'d by the shell (no process in between), with stdin from ``/dev/null`` (or from the
prompt's file when the prompt is too long for the command line) and stdout and stderr going to files in
the turn's folder: the executor keeps only the head and tail of a command's output, and the preset's
parser (``turn.finish``) reads the whole of it after the exit (ADR-0038).

The sandbox binds back, read-only, what a command *names* that its masks (``$HOME``, ``/tmp``) would
hide; so the command names the CLI by its real path (not npm's symlink: bubblewrap binds a symlink's
target in its place, and node then resolves modules beside the link), and the sandbox finds the
``node_modules`` folder holding an npm package's files itself (``workspace.toolchains``).

A CLI that is not found is still named (by its program name) in a dry run; a turn fails before the
spawn saying how to install it.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path

from controller.agents.base import Settings
from controller.agents.registry import preset
from controller.config.agent import AgentSpec

STDOUT = "stdout"
STDERR = "stderr"
PROMPT = "prompt"
PREVIEW_PROMPT = "<crucible's preamble, then CANDIDATE.md>"


def find_cli(agent: AgentSpec, spec_dir: Path | None, search_path: str | None) -> str | None:
    """The CLI's path: ``agent.cli`` (``~`` expanded, relative to the spec's folder) when set, whether it
    exists or not; else the preset's program on ``search_path``; None when it is not there."""
    assert agent.preset is not None
    if agent.cli is not None:
        path = Path(agent.cli).expanduser()
        if not path.is_absolute() and "/" not in agent.cli:
            return shutil.which(agent.cli, path=search_path)
        if not path.is_absolute() and spec_dir is not None:
            path = spec_dir / path
        return str(path)
    return shutil.which(preset(agent.preset).program, path=search_path)


def real_cli(cli: str) -> str:
    """The file itself, not a symlink to it (npm's ``.bin/codex``): the sandbox binds a symlink's target
    in its place, and node then looks for the package's modules beside the link."""
    return os.path.realpath(cli) if os.path.exists(cli) else cli


def shell_command(argv: Sequence[str], folder: Path, *, stdin: bool) -> str:
    """``exec ARGV <IN >FOLDER/stdout 2>FOLDER/stderr``: IN is ``FOLDER/prompt`` when the prompt goes
    through stdin, else ``/dev/null`` (a CLI that waits for input never does here)."""
    source = folder / PROMPT if stdin else Path(os.devnull)
    words = " ".join(shlex.quote(word) for word in argv)
    out, err = (shlex.quote(str(folder / name)) for name in (STDOUT, STDERR))
    return f"exec {words} <{shlex.quote(str(source))} >{out} 2>{err}"


def preview_command(
    agent: AgentSpec, spec_dir: Path | None, *, sandboxed: bool, search_path: str | None, workdir: Path
) -> str:
    """The command a turn would run, for ``crucible loop --dry-run``, with the variables the preset adds:
    the prompt stands as ``PREVIEW_PROMPT``, the CLI's ``HOME`` as ``$HOME`` and the turn's folder as
    ``$TURN``."""
    assert agent.preset is not None
    chosen = preset(agent.preset)
    cli = find_cli(agent, spec_dir, search_path)
    settings = Settings(
        workdir=workdir,
        home=Path("$HOME"),
        model=agent.model,
        base_url=agent.base_url,
        args=tuple(agent.args),
        sandboxed=sandboxed,
        folder=Path("$TURN"),
    )
    call = chosen.invocation(real_cli(cli) if cli else chosen.program, PREVIEW_PROMPT, settings)
    env = " ".join(f"{name}={shlex.quote(value)}" for name, value in sorted(call.env.items()))
    command = shell_command(call.argv, Path("$TURN"), stdin=call.stdin is not None)
    return f"{env} {command}" if env else command

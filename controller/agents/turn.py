"""A preset's turn, run by the controller itself: everything before the CLI's spawn and after its exit.

The CLI is the turn's agent command (``command.shell_command``); no process of crucible's runs between
the executor and the CLI (ADR-0038, superseding the wrapper of ADR-0023 and ADR-0033). So the controller:

- **before the spawn** (``prepare``) finds the CLI (a missing one fails the turn naming its install
  command), checks the model endpoint with one TCP connection, and makes the turn's folder: the files
  and folders the preset wants under the CLI's ``HOME``, the prompt when it goes through stdin, and the
  files the CLI's stdout and stderr go to;
- **after the exit** (``finish``) reads those two files whole (and the preset's ``outputs``) and hands
  them to the preset's parser, which gives the ``HYPOTHESIS:`` and ``COST`` lines (the agent protocol's,
  read as any agent's are) or why the CLI did not do the turn; ``clean`` removes the folder, and what
  the CLI left in the workspace that the preset names as its ``litter``.

A preset whose CLI ``git add``\\ s (``git_scratch``: aider) gets git's index and new objects sent to a copy in
the turn's folder, made here before the spawn (``gitscratch``, ADR-0039).

Where the CLI's ``HOME`` is: inside bubblewrap, the sandbox's own ``HOME`` (a fresh tmpfs per command:
Codex alone writes some sixty files there at each start, twice as fast on a tmpfs as on a disk), with
the prepared files bound into it (``Sandbox.wrap``'s ``home_tree``); in a loop pod (no bubblewrap), the
``home`` folder of the turn's folder; without any sandbox, a folder under
``~/.cache/crucible/agent-homes`` (a CLI's own sandbox may refuse a home under ``/tmp``: Codex does).
Either way the CLI never reads the user's configuration or login and never writes to ``~/.claude`` or
``~/.codex``.

The CLI may write anything into the turn's folder (it is the sandbox's only writable place besides the
workspace): the controller opens the output files without following a link and reads regular files only,
so a link planted there cannot make it read a file the agent cannot see.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, NamedTuple

from controller.agents.base import Settings
from controller.agents.command import PROMPT, STDERR, STDOUT, find_cli, real_cli, shell_command
from controller.agents.gitscratch import git_scratch
from controller.agents.outcome import (
    EXIT_FAILED,
    PREAMBLE,
    Price,
    cost_line,
    home_variables,
    hypothesis,
    remove_tree,
    unreachable,
)
from controller.agents.registry import preset
from controller.config.agent import AgentSpec

Boundary = Literal["bwrap", "pod", "none"]  # what contains the CLI: crucible's sandbox, a pod, nothing
HOME_TREE = "home"
GIT_SCRATCH = "git-scratch"
READ_LIMIT = 64 << 20  # bytes of each output file the parser reads; the rest is counted, not kept


class PresetTurn(NamedTuple):
    """One turn of a preset, prepared. ``failure``: why it fails before any spawn (then nothing else is
    set). ``home_tree``: inside bubblewrap, the folder whose files and folders appear in the sandbox's
    ``HOME``. ``home``: a folder made for the CLI's ``HOME`` outside the turn's folder, removed with it.
    ``litter``: the preset's ``litter`` globs; ``litter_before``: the workspace root's entries that
    matched them before the spawn (those are left alone afterwards)."""

    command: str = ""
    env: Mapping[str, str] = {}
    folder: Path | None = None
    home_tree: Path | None = None
    home: Path | None = None
    failure: str | None = None
    workdir: Path | None = None
    litter: tuple[str, ...] = ()
    litter_before: frozenset[str] = frozenset()


class Finished(NamedTuple):
    """What the CLI's run says: the protocol's lines (``HYPOTHESIS:``, ``COST``) and, when the CLI did
    not do the turn, the exit status to report and why."""

    lines: tuple[str, ...]
    returncode: int
    failure: str | None
    stdout: str
    stderr: str


def prepare(
    agent: AgentSpec,
    spec_dir: Path | None,
    *,
    folder: Path,
    workdir: Path,
    brief: str,
    boundary: Boundary,
    network: bool,
    sandbox_home: str,
    environ: Mapping[str, str],
) -> PresetTurn:
    """The turn's command and environment, with the turn's ``folder`` made afresh (see the module
    docstring). ``environ`` is the agent command's environment (scrubbed; its ``PATH`` finds the CLI)."""
    assert agent.preset is not None
    chosen = preset(agent.preset)
    cli = find_cli(agent, spec_dir, environ.get("PATH"))
    if cli is None or not os.access(cli, os.X_OK):
        where = cli or f"{agent.cli or chosen.program!r} on PATH"
        return PresetTurn(
            failure=f"{chosen.title} is not installed ({where} not found); install it: {chosen.install}"
        )
    problem = unreachable(chosen.name, agent.base_url, environ, offline=boundary == "bwrap" and not network)
    if problem is not None:
        return PresetTurn(failure=f"{chosen.title}: {problem}")
    remove_tree(folder)  # what an earlier turn that was cut off left
    folder.mkdir(mode=0o700, parents=True)
    tree = folder / HOME_TREE
    home: Path | None = None
    if boundary == "bwrap":
        cli_home = Path(sandbox_home)
    elif boundary == "pod":
        cli_home = tree
    else:
        cli_home = home = tree = _fresh_home(_home_parent(environ) or str(folder))
    tree.mkdir(mode=0o700, exist_ok=True)
    settings = Settings(
        workdir=workdir,
        home=cli_home,
        model=agent.model,
        base_url=agent.base_url,
        args=tuple(agent.args),
        sandboxed=boundary != "none",
        folder=folder,
    )
    call = chosen.invocation(real_cli(cli), PREAMBLE.format(workdir=workdir) + brief, settings)
    for relative in call.dirs:
        (tree / relative).mkdir(parents=True, exist_ok=True)
    for relative, text in call.files.items():
        (tree / relative).parent.mkdir(parents=True, exist_ok=True)
        (tree / relative).write_text(text, encoding="utf-8")
    if call.stdin is not None:
        (folder / PROMPT).write_text(call.stdin, encoding="utf-8")
    scratch = git_scratch(workdir, folder / GIT_SCRATCH, environ) if chosen.git_scratch else {}
    return PresetTurn(
        command=shell_command(call.argv, folder, stdin=call.stdin is not None),
        env={**home_variables(cli_home), **call.env, **scratch},
        folder=folder,
        home_tree=tree if boundary == "bwrap" else None,
        home=home,
        workdir=workdir,
        litter=chosen.litter,
        litter_before=frozenset(_litter(workdir, chosen.litter)),
    )


def finish(agent: AgentSpec, turn: PresetTurn, returncode: int) -> Finished:
    """Read the CLI's output files whole and let the preset's parser say what the turn did."""
    assert agent.preset is not None and turn.folder is not None
    chosen = preset(agent.preset)
    stdout, stderr = (read_output(turn.folder / name) for name in (STDOUT, STDERR))
    files = {name: read_output(turn.folder / name) for name in chosen.outputs}
    report = chosen.report(stdout, stderr, returncode, files)
    lines: list[str] = []
    said = hypothesis(report.final_message)
    if said:
        lines.append(f"HYPOTHESIS: {said}")
    prices = {model: Price(price.input, price.output) for model, price in agent.prices.items()}
    cost = cost_line(report.usage, prices, agent.model)
    if cost:
        lines.append(cost)
    code = (returncode or EXIT_FAILED) if report.failure is not None else returncode
    return Finished(tuple(lines), code, report.failure, stdout, stderr)


def clean(turn: PresetTurn) -> None:
    """Remove the turn's folder, the CLI's ``HOME`` made outside it and the litter the CLI left in the
    workspace (never through a link: one is removed itself)."""
    for made in (turn.folder, turn.home):
        if made is not None:
            remove_tree(made)
    if turn.workdir is None:
        return
    for name in _litter(turn.workdir, turn.litter) - turn.litter_before:
        path = turn.workdir / name
        if path.is_dir() and not path.is_symlink():
            remove_tree(path)
        else:
            with contextlib.suppress(OSError):
                path.unlink()


def _litter(workdir: Path, globs: tuple[str, ...]) -> set[str]:
    """The names in ``workdir`` that match one of ``globs``."""
    return {path.name for pattern in globs for path in workdir.glob(pattern)}


def read_output(path: Path, limit: int = READ_LIMIT) -> str:
    """The text of ``path`` (at most ``limit`` bytes), "" unless it is a regular file: never through a
    link the agent may have put in its place, never blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        chunks: list[bytes] = []
        left = limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _fresh_home(parent: str) -> Path:
    """A new private folder (mode 0700) under ``parent``."""
    while True:
        path = Path(parent) / f"crucible-agent-home-{os.urandom(6).hex()}"
        try:
            path.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            continue
        return path


def _home_parent(environ: Mapping[str, str]) -> str | None:
    """``~/.cache/crucible/agent-homes`` (``$XDG_CACHE_HOME`` if set): without crucible's sandbox a
    CLI's own sandbox may refuse a home under ``/tmp`` (Codex does: its edits then fail). None when it
    cannot be made (a read-only home: the turn's folder after all)."""
    cache = environ.get("XDG_CACHE_HOME") or (
        os.path.join(environ["HOME"], ".cache") if environ.get("HOME") else None
    )
    if cache is None:
        return None
    parent = os.path.join(cache, "crucible", "agent-homes")
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError:
        return None
    return parent

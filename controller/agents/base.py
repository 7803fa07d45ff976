"""What a preset is: how to run one coding-agent CLI headless, and how to read what it printed.

A preset is pure: given the prompt and the run's settings it returns the argv, the environment and the
files (under the CLI's own ``HOME``) that make the CLI edit without prompts, never commit and send
nothing but model calls; given the CLI's output it returns the hypothesis, the tokens (and dollars, where
the CLI counts them) and, when the CLI exited 0 without doing its job (an edit it was not allowed to make,
a model it could not reach), why the turn failed. ``controller.agents.turn`` performs it in the controller;
tests feed each preset the real CLI's output.

Three things a CLI may need around it that no flag of its own does are the controller's, declared here
and performed by ``turn`` (aider needs all three, ADR-0039): files the CLI writes into the turn's folder
that the parser reads (``outputs``), git's writes in the workspace sent to a scratch index and object
folder (``git_scratch``: the sandbox shows ``.git`` read-only), and folders the CLI leaves in the
workspace that are removed after it (``litter``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

NOTHING: Mapping[str, str] = MappingProxyType({})


class Settings(NamedTuple):
    """What a preset is run with: the spec's ``agent.*`` keys and where the CLI runs."""

    workdir: Path  # the workspace root, the CLI's working directory
    home: Path  # the CLI's own HOME, empty when the turn starts
    model: str | None = None
    base_url: str | None = None
    args: tuple[str, ...] = ()
    sandboxed: bool = True  # crucible's sandbox is on: the CLI's own sandbox stays off
    # The turn's folder: writable by the CLI, read by the controller after its exit (``Preset.outputs``);
    # None where no turn is prepared (then such files go under ``home``).
    folder: Path | None = None


class Invocation(NamedTuple):
    """How to start the CLI: ``argv``, variables added to the environment, folders made and files
    written under ``HOME`` (relative path -> text) and what stdin carries (None: closed at once)."""

    argv: list[str]
    env: Mapping[str, str] = NOTHING
    dirs: tuple[str, ...] = ()
    files: Mapping[str, str] = NOTHING
    stdin: str | None = None


class Usage(NamedTuple):
    """What one model spent in a turn; ``usd`` is None where the CLI reports no money."""

    model: str | None
    input_tokens: int
    output_tokens: int
    usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Report(NamedTuple):
    """What the CLI's output says about the turn. ``failure``: why the turn failed although the CLI may
    have exited 0 (None: it did its job)."""

    final_message: str | None
    usage: tuple[Usage, ...] = ()
    failure: str | None = None


class Preset(ABC):
    """One coding-agent CLI. Subclasses set the class attributes and implement the two methods."""

    name: str  # the spec's agent.preset
    title: str  # the product's name, for messages
    program: str  # the executable looked up on PATH
    install: str  # the command that installs it
    keys: tuple[str, ...]  # the variables that carry its credential: the only secrets it is given
    wire: str  # what it speaks to its endpoint, for the docs and the dry run
    example_model: str  # for ``crucible init --agent``
    example_base_url: str
    # Files (names in the turn's folder) the CLI writes that ``report`` is given after the exit.
    outputs: tuple[str, ...] = ()
    # git's index and new objects in the workspace go to a copy in the turn's folder: a CLI that
    # ``git add``s would otherwise fail on the sandbox's read-only ``.git``.
    git_scratch: bool = False
    # Globs, in the workspace root, of what the CLI leaves there that is no part of a change: what a turn
    # created is removed after it.
    litter: tuple[str, ...] = ()

    # Longer prompts go through stdin: one argv string may hold at most 128 KiB on Linux.
    ARG_PROMPT_LIMIT = 100_000

    @abstractmethod
    def invocation(self, cli: str, prompt: str, settings: Settings) -> Invocation:
        """The CLI ``cli`` run on ``prompt`` (on the command line, or on stdin when it is long)."""

    @abstractmethod
    def report(self, stdout: str, stderr: str, returncode: int, files: Mapping[str, str] = NOTHING) -> Report:
        """Read the CLI's output; a non-zero ``returncode`` is a failure whatever else it says. ``files``:
        the text of each of ``outputs`` ("" when the CLI wrote none)."""

    def version_args(self) -> list[str]:
        return ["--version"]

    @classmethod
    def prompt_fits_argv(cls, prompt: str) -> bool:
        return len(prompt.encode("utf-8")) <= cls.ARG_PROMPT_LIMIT


def last_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of ``text``, cut to ``limit`` characters ("" when there is none)."""
    for line in reversed(text.splitlines()):
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def telling_line(text: str, limit: int = 300) -> str:
    """The line of ``text`` that best says what went wrong: the last one naming an error (a stack trace
    ends with the runtime's version, not the error), else the last non-empty one."""
    errors = [line for line in text.splitlines() if "error" in line.lower()]
    return last_line(errors[-1], limit) if errors else last_line(text, limit)


def exit_failure(title: str, returncode: int, *texts: str) -> str:
    """``Claude Code exited 1: <what it said went wrong>``."""
    said = next((line for line in (telling_line(t) for t in texts) if line), "")
    return f"{title} exited {returncode}" + (f": {said}" if said else "")

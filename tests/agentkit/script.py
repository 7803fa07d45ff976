"""What the scripted model does in a conversation: one planned edit, then a final message.

A coding agent's conversation is a loop: the model answers with tool calls, the CLI runs them and sends
the results back, until the model answers with text only. The scripted model decides its next answer
from how many tool calls it has already made in the conversation it is sent (so a retried request gets
the same answer), and each wire format (``anthropic``, ``responses``, …) turns these abstract steps into
its own tool calls. The edit's file is named relative to the checkout; the absolute path, which some
CLIs' tools insist on, is read from the prompt's ``Working directory:`` line (the preset's preamble
writes it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WORKDIR_LINE = re.compile(r"Working directory: (/\S+)")


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` with ``new`` in ``path`` (relative to the checkout), then say ``hypothesis``."""

    path: str
    old: str
    new: str
    hypothesis: str = "lower the value"


@dataclass(frozen=True)
class Read:
    path: str


@dataclass(frozen=True)
class Replace:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Finish:
    text: str


Step = Read | Replace | Finish


def steps(edit: Edit, *, read_first: bool) -> list[Step]:
    """The conversation's steps: (read,) replace, finish. ``read_first`` for CLIs whose edit tool
    refuses a file the model has not read (Claude Code)."""
    out: list[Step] = [Read(edit.path)] if read_first else []
    out += [Replace(edit.path, edit.old, edit.new), Finish(f"Done.\nHYPOTHESIS: {edit.hypothesis}")]
    return out


def next_step(edit: Edit, calls_made: int, *, read_first: bool) -> Step:
    """The step after ``calls_made`` tool calls; the last step (finish) once they are all made."""
    plan = steps(edit, read_first=read_first)
    return plan[min(calls_made, len(plan) - 1)]


def workdir(text: str) -> str | None:
    """The checkout's absolute path from the prompt text, if it names one."""
    found = WORKDIR_LINE.search(text)
    return found.group(1) if found else None

"""``ScriptedExecutor``: the run's ``Executor`` with its commands played by Python functions instead of
processes, so the round engine's unit tests decide a turn in milliseconds and can end one with any
reason (a timeout without waiting for it, a cancel at an exact point) without a shell script per case.

Only the process is fake. Everything else a command's run does is the real ``Executor``'s, inherited:
the environment (scrubbed, plus the protocol variables), the guard of the checkouts' ``.git`` (a
change is undone and reported through ``take_violations``), the redacted log, ``last_start_problem``
and ``command_seconds``. ``tests/services/test_executor_contract.py`` holds it and the real one to
the same contract, one program at a time written both as a shell command and as a function.

A script maps each command string the spec names (agent, validation, metric) to a ``Program``: it
gets the ``Call`` (command, working directory, environment, timeout), may change files under the
working directory as the command would, and returns a ``Reply``. A command nobody scripted fails the
test, naming it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from controller.engine.protocol import CAPTURE_PREFIXES
from controller.services.execution.execute import Executor
from controller.workspace.process import CommandResult


@dataclass(frozen=True)
class Call:
    """One command as the executor would start it."""

    command: str
    cwd: Path
    env: Mapping[str, str]
    timeout: float | None


@dataclass(frozen=True)
class Reply:
    """What the command did: its exit status and output, or that it ran past its timeout
    (``overruns``: reported as timed out at once, with no wait) or until the run was cancelled
    (``blocks``: returns when the run's cancel event is set, or times out after ``timeout``)."""

    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    overruns: bool = False
    blocks: bool = False


Program = Callable[[Call], Reply]


def prints(*lines: str) -> Program:
    """A program that prints ``lines`` and exits 0."""
    return lambda _call: Reply(stdout="".join(f"{line}\n" for line in lines))


@dataclass
class ScriptedExecutor(Executor):
    """An ``Executor`` whose commands are ``script[command](call)``; ``calls`` lists them in order."""

    script: dict[str, Program] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)

    @classmethod
    def replacing(cls, real: Executor, script: Mapping[str, Program]) -> ScriptedExecutor:
        """The scripted twin of ``real``, sharing its state (the guarded ``.git`` directories, the
        read-only paths, the cancel event), so checkouts created later are guarded by both."""
        shared = {f.name: getattr(real, f.name) for f in dataclasses.fields(real) if f.init}
        return cls(**shared, script=dict(script))

    def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float | None,
        writable: Sequence[Path],
        protocol: Mapping[str, str],
        log: Path | None = None,
    ) -> CommandResult:
        program = self.script.get(command)
        if program is None:
            raise AssertionError(f"the test scripted no program for the command {command!r}")
        env = {**self.scrubbed.env, **protocol}
        call = Call(command, cwd, env, timeout)
        self.calls.append(call)
        self.commands_run += 1
        guarded = {git_dir: self._control_state(git_dir) for git_dir in self.guarded}
        started = time.monotonic()
        try:
            reply = program(call)
            timed_out = reply.overruns and timeout is not None
            cancelled = self.cancel.is_set()
            if reply.blocks and not cancelled:
                cancelled = self.cancel.wait(timeout)
                timed_out = not cancelled
        finally:
            self._undo_git_changes(guarded)
        stopped = timed_out or cancelled
        lines = reply.stdout.splitlines()
        result = CommandResult(
            returncode=None if stopped else reply.returncode,
            stdout=reply.stdout,
            stderr=reply.stderr,
            stdout_truncated=False,
            matched_lines=tuple(line for line in lines if line.startswith(CAPTURE_PREFIXES)),
            timed_out=timed_out and not cancelled,
            cancelled=cancelled,
            duration_s=(timeout or 0.0) if timed_out else time.monotonic() - started,
        )
        self.last_start_problem = None
        self.command_seconds += result.duration_s
        if log is not None:
            self._write_log(log, command, result)
        return result

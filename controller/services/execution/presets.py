"""The agent step of a turn for ``[agent] preset = …``: the controller runs the CLI itself (ADR-0038).

``agents.turn`` prepares the turn (the CLI found, the model endpoint checked, the CLI's settings and the
files its output goes to made in the turn's folder) and reads the CLI's output after its exit; the
executor runs the CLI as it runs any agent command (process group, timeout, sandbox, redaction, the
``.git`` guard), with the prepared settings shown in the sandbox's ``HOME``. The same code runs on the
local path and in a loop pod, where the pod is the boundary (``RunContext.contained``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from controller.agents.command import STDERR, STDOUT
from controller.agents.outcome import EXIT_FAILED
from controller.agents.turn import Boundary, Finished, PresetTurn, clean, finish, prepare, read_output
from controller.services.execution.context import RunContext
from controller.workspace.process import CommandResult
from controller.workspace.sandboxpaths import start_problem

LOG_LIMIT = 1 << 20  # bytes of each of the CLI's outputs copied into the turn's log (head and tail)


class PresetRun:
    """What the agent step needs from a preset's run: the executor's result (its ``matched_lines`` are
    the protocol lines the parser gave) and the failure detail, if the turn failed."""

    def __init__(self, result: CommandResult, detail: str | None) -> None:
        self.result = result
        self.detail = detail


def boundary(ctx: RunContext) -> Boundary:
    if ctx.executor.sandbox:
        return "bwrap"
    return "pod" if ctx.contained else "none"


def run_preset(ctx: RunContext, root: Path, protocol: Mapping[str, str], log: Path) -> PresetRun:
    """Run the preset's CLI for one turn in ``root``; a turn it did not do has a ``detail``."""
    agent = ctx.spec.agent
    environ = {**ctx.executor.scrubbed.env, **protocol}
    brief = ctx.layout.candidate_file
    turn = prepare(
        agent,
        ctx.spec.spec_dir,
        folder=ctx.layout.preset_turn,
        workdir=root,
        brief=brief.read_text(encoding="utf-8") if brief.is_file() else "",
        boundary=boundary(ctx),
        network=ctx.spec.sandbox.network,
        sandbox_home=ctx.executor.sandbox_home,
        environ=environ,
    )
    try:
        if turn.failure is not None:
            return _before_spawn(turn, log)
        assert turn.folder is not None
        result = ctx.executor.run(
            turn.command,
            cwd=root,
            timeout=agent.timeout,
            writable=[ctx.layout.arm_dir("candidate"), turn.folder],
            protocol={**protocol, **turn.env},
            log=log,
            home_tree=turn.home_tree,
        )
        if result.timed_out or result.cancelled or result.returncode is None:
            _append_log(ctx, log, turn, None)
            return PresetRun(result, None)
        done = finish(agent, turn, result.returncode)
        _append_log(ctx, log, turn, done)
        return PresetRun(_with_lines(result, done), _detail(ctx, result, done))
    finally:
        clean(turn)


def _detail(ctx: RunContext, result: CommandResult, done: Finished) -> str | None:
    if result.returncode in (126, 127) and ctx.executor.sandbox:
        # The CLI could not start inside the sandbox: the shell said so into the stderr file.
        denied = ctx.executor.box.denied if ctx.executor.box is not None else ()
        problem = start_problem(done.stderr, ctx.executor.scrubbed.env.get("PATH"), denied)
        if problem:
            return f"the agent exited {result.returncode}: {problem}"
    if done.failure is not None:
        return f"the agent exited {done.returncode}: {done.failure}"
    return None


def _with_lines(result: CommandResult, done: Finished) -> CommandResult:
    """The result as the agent step reads any agent's: the protocol lines, the exit status to report."""
    return replace(result, matched_lines=done.lines, returncode=done.returncode)


def _before_spawn(turn: PresetTurn, log: Path) -> PresetRun:
    """A turn that fails before the CLI starts (not installed, endpoint down), as a command that exited
    with the failure on its last stderr line."""
    assert turn.failure is not None
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"# the preset's CLI was not started\n{turn.failure}\n", encoding="utf-8")
    result = CommandResult(
        returncode=EXIT_FAILED,
        stdout="",
        stderr=turn.failure,
        stdout_truncated=False,
        matched_lines=(),
        timed_out=False,
        cancelled=False,
        duration_s=0.0,
    )
    return PresetRun(result, f"the agent exited {EXIT_FAILED}: {turn.failure}")


def _append_log(ctx: RunContext, log: Path, turn: PresetTurn, done: Finished | None) -> None:
    """The CLI's whole output (capped, redacted) after the executor's part of the turn's log."""
    assert turn.folder is not None
    if done is not None:
        outputs = (done.stdout, done.stderr)
    else:
        outputs = (read_output(turn.folder / STDOUT), read_output(turn.folder / STDERR))
    parts = [
        f"--- the CLI's {name} ---\n{_capped(text)}"
        for name, text in zip((STDOUT, STDERR), outputs, strict=True)
    ]
    if done is not None:
        parts.append("--- what crucible read from it ---\n" + "\n".join(done.lines))
        if done.failure is not None:
            parts.append(done.failure)
    with log.open("a", encoding="utf-8", errors="replace") as handle:
        handle.write(ctx.executor.redact("\n".join(parts) + "\n"))


def _capped(text: str) -> str:
    if len(text) <= LOG_LIMIT:
        return text
    half = LOG_LIMIT // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"

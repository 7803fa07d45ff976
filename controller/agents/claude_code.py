"""Claude Code (npm ``@anthropic-ai/claude-code``), run as ``claude -p`` with JSON output.

Measured with the real CLI against a scripted endpoint: in ``acceptEdits`` mode it edits files inside its
working directory without asking; in the default mode it exits 0 *without* editing and lists the edit
under ``permission_denials``, which is why a denied edit fails the turn here. As root it refuses
``--dangerously-skip-permissions``, so that flag is never used. A model it cannot reach gives
``is_error: true`` and an ``API Error: …`` result. It reports dollars (``total_cost_usd``, per model under
``modelUsage``) as well as tokens.

With crucible's sandbox on, shell commands are allowed too (the agent can run the tests), except git's
commands that move HEAD or talk to a remote; without the sandbox it may only edit files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TypedDict, cast

from controller.agents.base import NOTHING, Invocation, Preset, Report, Settings, Usage, exit_failure

EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no update checks, error reports or feedback
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
# Shell commands the agent must not run even with crucible's sandbox on: crucible commits, not the agent.
GIT_WRITES = ("commit", "push", "reset", "checkout", "switch", "rebase", "merge", "tag", "stash")


class ModelUsage(TypedDict, total=False):
    inputTokens: int | None
    cacheReadInputTokens: int | None
    cacheCreationInputTokens: int | None
    outputTokens: int | None
    costUSD: float | None


class TokenUsage(TypedDict, total=False):
    input_tokens: int | None
    cache_read_input_tokens: int | None
    cache_creation_input_tokens: int | None
    output_tokens: int | None


class Denial(TypedDict, total=False):
    tool_name: str
    tool_input: dict[str, str]


class ClaudeResult(TypedDict, total=False):
    """The ``--output-format json`` object: the fields ``report`` reads (each is still checked there,
    since another version of the CLI may send another shape)."""

    result: str
    is_error: bool
    subtype: str
    modelUsage: dict[str, ModelUsage]
    usage: TokenUsage
    total_cost_usd: float | None
    permission_denials: list[Denial]


def _json_result(stdout: str) -> ClaudeResult | None:
    """The ``--output-format json`` object: the last line of stdout that parses as one."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(found, dict):
                return cast(ClaudeResult, found)
    return None


def _usage(result: ClaudeResult) -> tuple[Usage, ...]:
    per_model = result.get("modelUsage")
    if isinstance(per_model, dict) and per_model:
        out = []
        for model, used in per_model.items():
            if not isinstance(used, dict):
                continue
            inputs = (
                int(used.get("inputTokens") or 0)
                + int(used.get("cacheReadInputTokens") or 0)
                + int(used.get("cacheCreationInputTokens") or 0)
            )
            usd = used.get("costUSD")
            outputs = int(used.get("outputTokens") or 0)
            out.append(Usage(str(model), inputs, outputs, float(usd) if usd is not None else None))
        return tuple(out)
    usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    assert isinstance(usage, dict)
    inputs = (
        int(usage.get("input_tokens") or 0)
        + int(usage.get("cache_read_input_tokens") or 0)
        + int(usage.get("cache_creation_input_tokens") or 0)
    )
    outputs = int(usage.get("output_tokens") or 0)
    usd = result.get("total_cost_usd")
    if not inputs and not outputs and not usd:
        return ()
    return (Usage(None, inputs, outputs, float(usd) if usd is not None else None),)


def _denied_edits(result: ClaudeResult) -> list[str]:
    denied = []
    for denial in result.get("permission_denials") or []:
        if isinstance(denial, dict) and denial.get("tool_name") in EDIT_TOOLS:
            target = (denial.get("tool_input") or {}).get("file_path", "")
            denied.append(f"{denial['tool_name']} {target}".strip())
    return denied


class ClaudeCode(Preset):
    name = "claude-code"
    title = "Claude Code"
    program = "claude"
    install = "npm install -g @anthropic-ai/claude-code"
    keys = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
    wire = "Anthropic Messages (POST /v1/messages, streamed)"
    example_model = "claude-sonnet-4-5"
    example_base_url = "http://127.0.0.1:4000"  # without /v1

    def invocation(self, cli: str, prompt: str, settings: Settings) -> Invocation:
        argv = [cli, "-p"]
        stdin = None
        if self.prompt_fits_argv(prompt):
            argv.append(prompt)
        else:
            stdin = prompt  # ``claude -p`` without a prompt reads it from stdin
        argv += ["--output-format", "json", "--permission-mode", "acceptEdits"]
        if settings.sandboxed:
            argv += ["--allowedTools", "Bash", "--disallowedTools"]
            argv += [f"Bash(git {verb}:*)" for verb in GIT_WRITES]
        if settings.model:
            argv += ["--model", settings.model]
        argv += list(settings.args)
        env = dict(QUIET)
        env["CLAUDE_CONFIG_DIR"] = str(settings.home / ".claude")
        if settings.base_url:
            env["ANTHROPIC_BASE_URL"] = settings.base_url
        return Invocation(argv=argv, env=env, stdin=stdin)

    def report(self, stdout: str, stderr: str, returncode: int, files: Mapping[str, str] = NOTHING) -> Report:
        result = _json_result(stdout)
        if result is None:
            failure = exit_failure(self.title, returncode, stderr, stdout) if returncode else None
            return Report(None, (), failure or f"{self.title} printed no JSON result (--output-format json)")
        message = result.get("result") if isinstance(result.get("result"), str) else None
        usage = _usage(result)
        if result.get("is_error"):
            said = (message or str(result.get("subtype") or "")).strip()
            return Report(message, usage, f"{self.title} failed: {said or 'is_error'}")
        denied = _denied_edits(result)
        if denied:
            listed = ", ".join(denied[:5]) + (" …" if len(denied) > 5 else "")
            reason = (
                f"{self.title} was not allowed to edit ({listed}): its permission mode let the edit wait "
                "for a prompt nobody answers (the preset's acceptEdits allows edits inside the workspace)"
            )
            return Report(message, usage, reason)
        if returncode != 0:
            return Report(message, usage, exit_failure(self.title, returncode, stderr))
        return Report(message, usage, None)

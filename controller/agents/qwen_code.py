"""qwen-code (npm ``@qwen-code/qwen-code``), run as ``qwen -p`` with JSON output against an OpenAI endpoint.

Measured with the real CLI (0.15) against a scripted endpoint: ``--auth-type openai`` takes the key, the
endpoint and the model from ``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` and ``--model``, and it speaks OpenAI
chat completions (``POST …/chat/completions``, streamed, with tool calls). Its ``edit`` tool refuses a file
the model has not read in the session, and takes absolute paths only. Left alone it also sends usage
statistics to Alibaba's RUM endpoint (retried for seconds when that host cannot be reached) and runs a
second model call after each session to extract "managed memory" into ``~/.qwen``; the settings written
to its private ``HOME`` turn both off, and the update check (interactive only) too.

What it reports: ``--output-format json`` prints one JSON array of events ending in a ``result`` event
with the final text, tokens per model (``stats.models``; no dollars) and ``permission_denials``. It
**exits 0 reporting ``success`` even when every model call failed**: the result is then the text
``[API Error: …]`` and ``stats.models.*.api`` counts as many errors as requests; both fail the turn here,
as does an approval mode that offers no edit tool (its ``init`` event lists the tools) and an edit it
was not allowed to make (``permission_denials``).

With crucible's sandbox on it runs in ``yolo`` mode (shell commands too: the agent can run the tests);
without it, ``auto-edit`` (edits only; a shell command would wait for a prompt nobody answers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from controller.agents.base import NOTHING, Invocation, Preset, Report, Settings, Usage, exit_failure
from controller.agents.cliargs import sets_flag

EDIT_TOOLS = frozenset({"edit", "write_file", "replace"})
API_ERROR_PREFIX = "[API Error"
SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
    "general": {"enableAutoUpdate": False},
    "tools": {"sandbox": False},
}
# Where a brief that is too long for the command line goes: stdin, which qwen reads before ``-p``.
STDIN_PROMPT = "Follow the brief given on standard input above."


def _events(stdout: str) -> list[dict[str, Any]]:
    """The events of ``--output-format json``: the JSON array on stdout (its last line that is one)."""
    candidates = [stdout.strip(), *reversed(stdout.splitlines())]
    for text in candidates:
        text = text.strip()
        if not text.startswith("["):
            continue
        try:
            found = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(found, list):
            return [event for event in found if isinstance(event, dict)]
    return []


def _as_int(value: object) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _models(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    stats = result.get("stats")
    models = stats.get("models") if isinstance(stats, dict) else None
    if not isinstance(models, dict):
        return {}
    return {str(name): used for name, used in models.items() if isinstance(used, dict)}


def usage_of(result: dict[str, Any]) -> tuple[Usage, ...]:
    """Tokens per model from ``stats.models`` (thoughts count as output), else the result's ``usage``."""
    out = []
    for name, used in _models(result).items():
        tokens = used.get("tokens") if isinstance(used.get("tokens"), dict) else {}
        assert isinstance(tokens, dict)
        inputs = _as_int(tokens.get("prompt"))
        outputs = _as_int(tokens.get("candidates")) + _as_int(tokens.get("thoughts"))
        if inputs or outputs:
            out.append(Usage(name, inputs, outputs))
    if out:
        return tuple(out)
    usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    assert isinstance(usage, dict)
    inputs, outputs = _as_int(usage.get("input_tokens")), _as_int(usage.get("output_tokens"))
    return (Usage(None, inputs, outputs),) if inputs or outputs else ()


def _requests(result: dict[str, Any]) -> tuple[int, int]:
    """(model requests, failed ones) over every model."""
    made = failed = 0
    for used in _models(result).values():
        api = used.get("api") if isinstance(used.get("api"), dict) else {}
        assert isinstance(api, dict)
        made += _as_int(api.get("totalRequests"))
        failed += _as_int(api.get("totalErrors"))
    return made, failed


def denied_edits(result: dict[str, Any]) -> list[str]:
    """``tool path`` of each edit the CLI was not allowed to make."""
    denied = []
    for denial in result.get("permission_denials") or []:
        if isinstance(denial, dict) and denial.get("tool_name") in EDIT_TOOLS:
            tool_input = denial.get("tool_input") if isinstance(denial.get("tool_input"), dict) else {}
            assert isinstance(tool_input, dict)
            denied.append(f"{denial['tool_name']} {tool_input.get('file_path', '')}".strip())
    return denied


class QwenCode(Preset):
    name = "qwen-code"
    title = "qwen-code"
    program = "qwen"
    install = "npm install -g @qwen-code/qwen-code"
    keys = ("OPENAI_API_KEY",)
    wire = "OpenAI chat completions (POST /chat/completions, streamed)"
    example_model = "qwen3-coder-plus"  # for ``crucible init --agent``
    example_base_url = "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"

    def invocation(self, cli: str, prompt: str, settings: Settings) -> Invocation:
        argv = [cli, "--auth-type", "openai", "--output-format", "json"]
        if not sets_flag(settings.args, "--approval-mode"):  # the user's own mode wins
            argv += ["--approval-mode", "yolo" if settings.sandboxed else "auto-edit"]
        stdin = None
        if self.prompt_fits_argv(prompt):
            argv += ["-p", prompt]
        else:
            stdin = prompt
            argv += ["-p", STDIN_PROMPT]
        if settings.model and not sets_flag(settings.args, "--model", "-m"):
            argv += ["--model", settings.model]
        argv += list(settings.args)
        env = {"QWEN_SANDBOX": "false"}
        if settings.base_url:
            env["OPENAI_BASE_URL"] = settings.base_url
        files = {".qwen/settings.json": json.dumps(SETTINGS, indent=2) + "\n"}
        return Invocation(argv=argv, env=env, files=files, stdin=stdin)

    def report(self, stdout: str, stderr: str, returncode: int, files: Mapping[str, str] = NOTHING) -> Report:
        events = _events(stdout)
        result = next((e for e in reversed(events) if e.get("type") == "result"), None)
        if result is None:
            failure = exit_failure(self.title, returncode, stderr, stdout) if returncode else None
            return Report(None, (), failure or f"{self.title} printed no JSON result (--output-format json)")
        message = result.get("result") if isinstance(result.get("result"), str) else None
        usage = usage_of(result)
        made, failed = _requests(result)
        if message is not None and message.lstrip().startswith(API_ERROR_PREFIX):
            return Report(
                None, usage, f"{self.title} could not get an answer from its model: {message.strip()}"
            )
        if made and failed >= made:
            said = (message or "").strip()
            return Report(
                None, usage, f"{self.title}: all {made} model calls failed" + (f": {said}" if said else "")
            )
        if result.get("is_error"):
            said = (message or str(result.get("subtype") or "")).strip()
            return Report(message, usage, f"{self.title} failed: {said or 'is_error'}")
        init = next((e for e in events if e.get("type") == "system" and e.get("subtype") == "init"), {})
        offered = init.get("tools")
        if isinstance(offered, list) and not EDIT_TOOLS.intersection(map(str, offered)):
            mode = init.get("permission_mode") or "?"
            reason = (
                f"{self.title} was not allowed to edit: in its approval mode {mode!r} it offers the model "
                "no edit tool (the preset runs it in yolo or auto-edit mode unless agent.args sets "
                "--approval-mode)"
            )
            return Report(message, usage, reason)
        denied = denied_edits(result)
        if denied:
            listed = ", ".join(denied[:5]) + (" …" if len(denied) > 5 else "")
            reason = (
                f"{self.title} was not allowed to edit ({listed}): its approval mode let the edit wait for a "
                "prompt nobody answers (the preset runs it in yolo or auto-edit mode)"
            )
            return Report(message, usage, reason)
        if returncode != 0:
            return Report(message, usage, exit_failure(self.title, returncode, stderr))
        return Report(message, usage, None)

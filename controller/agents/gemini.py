"""Gemini CLI (npm ``@google/gemini-cli``), run as ``gemini -p`` with streamed JSON events.

Measured with the real CLI (0.61) against a scripted endpoint: it calls ``POST
/v1beta/models/MODEL:streamGenerateContent?alt=sse`` at ``GOOGLE_GEMINI_BASE_URL`` with the key of
``GEMINI_API_KEY`` (``x-goog-api-key``), and edits with its ``replace`` and ``write_file`` tools. Three
things keep it from running headless when left alone, and the settings written to its private ``HOME``
fix each:

- With ``GOOGLE_GEMINI_BASE_URL`` set and no auth type chosen it picks the ``gateway`` type, which the
  non-interactive mode rejects ("Invalid auth method selected", exit 41); ``GEMINI_DEFAULT_AUTH_TYPE`` is
  read by the interactive mode only. ``security.auth.selectedType = "gemini-api-key"`` works in both.
- A folder it has not been told to trust silently turns ``--approval-mode yolo`` back into ``default``,
  in which the edit tools are not even offered: it exits 0 without editing. ``GEMINI_CLI_TRUST_WORKSPACE``
  trusts the workspace.
- It sends usage statistics (Clearcut) unless ``privacy.usageStatisticsEnabled`` is false.

(Its *system* settings file, which would win over a repository's ``.gemini/settings.json``, is not used:
Gemini CLI ignores it when any parent folder is writable by others, as ``/tmp`` is.)

Without a model it asks a classifier model (``gemini-*-flash-lite``, a JSON-schema call) which model to
use for every request; ``agent.model`` skips that. What it reports: ``--output-format stream-json`` prints
one event per line (``message``, ``tool_use``, ``tool_result``, ``result``); the ``result`` has the tokens
per model (no dollars) and ``status: error`` when the model could not be reached (exit 1, after about four
minutes of retries for a refused connection). An edit tool it refused (not registered in the approval mode,
denied by a policy, outside the workspace) fails the turn.

With crucible's sandbox on it runs in ``yolo`` mode (shell commands too); without it, ``auto_edit``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from controller.agents.base import NOTHING, Invocation, Preset, Report, Settings, Usage, exit_failure
from controller.agents.cliargs import sets_flag

EDIT_TOOLS = frozenset({"replace", "write_file"})  # the edit tools Gemini CLI offers
# ``tool_result`` error types that mean the edit was not allowed, as opposed to an edit that did not apply.
REFUSALS = frozenset(
    {
        "tool_not_registered",
        "policy_violation",
        "permission_denied",
        "path_not_in_workspace",
        "file_write_failure",
    }
)
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "tools": {"sandbox": False},
}
# What it says on stderr when it turned the approval mode back to ``default`` (an untrusted folder).
DOWNGRADED = "Approval mode overridden to"
STDIN_PROMPT = "Follow the brief given on standard input above."


def events_of(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of ``--output-format stream-json``, one per line; other lines are skipped."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out


def final_message(events: list[dict[str, Any]]) -> str | None:
    """The assistant's text after its last tool call (its deltas joined)."""
    parts: list[str] = []
    for event in events:
        kind = event.get("type")
        if kind in ("tool_use", "tool_result"):
            parts = []
        elif kind == "message" and event.get("role") == "assistant" and isinstance(event.get("content"), str):
            parts.append(event["content"])
    text = "".join(parts).strip()
    return text or None


def _as_int(value: object) -> int:
    return int(value) if isinstance(value, int | float) else 0


def usage_of(result: dict[str, Any]) -> tuple[Usage, ...]:
    """Tokens per model of the ``result`` event; output is what the total holds beyond the input (thoughts
    included)."""
    stats = result.get("stats") if isinstance(result.get("stats"), dict) else {}
    assert isinstance(stats, dict)
    models = stats.get("models") if isinstance(stats.get("models"), dict) else {}
    assert isinstance(models, dict)
    rows: list[tuple[str | None, dict[str, Any]]] = [
        (str(name), used) for name, used in models.items() if isinstance(used, dict)
    ] or [(None, stats)]
    out = []
    for name, used in rows:
        inputs = _as_int(used.get("input_tokens"))
        outputs = max(_as_int(used.get("output_tokens")), _as_int(used.get("total_tokens")) - inputs)
        if inputs or outputs:
            out.append(Usage(name, inputs, outputs))
    return tuple(out)


def refused_edits(events: list[dict[str, Any]]) -> list[str]:
    """``tool path: why`` for each edit tool call the CLI refused to run."""
    calls: dict[str, dict[str, Any]] = {}
    refused = []
    for event in events:
        if event.get("type") == "tool_use" and event.get("tool_name") in EDIT_TOOLS:
            calls[str(event.get("tool_id"))] = event
        elif event.get("type") == "tool_result" and event.get("status") == "error":
            call = calls.get(str(event.get("tool_id")))
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            assert isinstance(error, dict)
            if call is None or error.get("type") not in REFUSALS:
                continue
            parameters = call.get("parameters") if isinstance(call.get("parameters"), dict) else {}
            assert isinstance(parameters, dict)
            target = f"{call.get('tool_name')} {parameters.get('file_path', '')}".strip()
            refused.append(f"{target}: {str(error.get('message') or error.get('type')).strip()}")
    return refused


class GeminiCli(Preset):
    name = "gemini"
    title = "Gemini CLI"
    program = "gemini"
    install = "npm install -g @google/gemini-cli"
    keys = ("GEMINI_API_KEY",)
    wire = "Gemini API (POST /v1beta/models/MODEL:streamGenerateContent, streamed)"
    example_model = "gemini-2.5-pro"  # for ``crucible init --agent``
    example_base_url = "https://generativelanguage.googleapis.com"

    def invocation(self, cli: str, prompt: str, settings: Settings) -> Invocation:
        argv = [cli, "--output-format", "stream-json"]
        if not sets_flag(settings.args, "--approval-mode"):  # the user's own mode wins
            argv += ["--approval-mode", "yolo" if settings.sandboxed else "auto_edit"]
        stdin = None
        if self.prompt_fits_argv(prompt):
            argv += ["-p", prompt]
        else:
            stdin = prompt  # Gemini CLI puts what stdin holds before the -p text
            argv += ["-p", STDIN_PROMPT]
        if settings.model and not sets_flag(settings.args, "--model", "-m"):
            argv += ["--model", settings.model]
        argv += list(settings.args)
        env = {
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_DEFAULT_AUTH_TYPE": "gemini-api-key",
            "GEMINI_SANDBOX": "false",
        }
        if settings.base_url:
            env["GOOGLE_GEMINI_BASE_URL"] = settings.base_url
        files = {".gemini/settings.json": json.dumps(SETTINGS, indent=2) + "\n"}
        return Invocation(argv=argv, env=env, files=files, stdin=stdin)

    def report(self, stdout: str, stderr: str, returncode: int, files: Mapping[str, str] = NOTHING) -> Report:
        events = events_of(stdout)
        result = next((e for e in reversed(events) if e.get("type") == "result"), None)
        message = final_message(events)
        if result is None:
            failure = exit_failure(self.title, returncode, stderr, stdout) if returncode else None
            return Report(
                message, (), failure or f"{self.title} printed no result (--output-format stream-json)"
            )
        usage = usage_of(result)
        if result.get("status") == "error":
            error = result.get("error") if isinstance(result.get("error"), dict) else {}
            assert isinstance(error, dict)
            said = str(error.get("message") or error.get("type") or "status error").strip()
            return Report(message, usage, f"{self.title} failed: {said}")
        downgraded = next((line.strip() for line in stderr.splitlines() if DOWNGRADED in line), None)
        if downgraded:
            return Report(message, usage, f"{self.title} was not allowed to edit: {downgraded}")
        refused = refused_edits(events)
        if refused:
            listed = "; ".join(refused[:3]) + (" …" if len(refused) > 3 else "")
            reason = f"{self.title} was not allowed to edit ({listed})"
            return Report(message, usage, reason)
        if returncode != 0:
            return Report(message, usage, exit_failure(self.title, returncode, stderr))
        return Report(message, usage, None)

"""Codex CLI (npm ``@openai/codex``), run as ``codex exec --json``.

Measured with the real CLI against a scripted endpoint: it speaks only the Responses API now
(``POST …/responses``, streamed), so the endpoint is configured as a model provider of its own
(``base_url`` including ``/v1``, the key from ``OPENAI_API_KEY``). Without ``--disable plugins`` it calls
out to github.com and chatgpt.com; without stdin closed it waits for more input; its own sandbox cannot
start inside bubblewrap, so with crucible's sandbox on it runs with ``--dangerously-bypass-approvals-and-
sandbox`` (crucible is the sandbox) and without it in its ``workspace-write`` sandbox. It prints JSON events
(JSONL): the final ``agent_message``, ``turn.completed`` with tokens (no dollars), or ``turn.failed``.

An edit it could not make exits 0 with "Done" all the same. Read from the real CLI (0.171): an edit the
file system refused (a read-only file) is a ``file_change`` item with status ``failed`` in the events, and
the reason only on stderr (``ERROR codex_core::tools::router: error=Exit code: 1 … Failed to write file
…``); an edit its own sandbox or approval policy refused (``--sandbox read-only``, a path outside its
writable roots) leaves *no* event at all: the only signal is that stderr line (``error=patch rejected:
writing is blocked by read-only sandbox; rejected by user approval settings``). Both fail the turn, with
that reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TypedDict, cast

from controller.agents.base import NOTHING, Invocation, Preset, Report, Settings, Usage, exit_failure

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PROVIDER = "crucible"
QUIET = (
    "analytics.enabled=false",
    "check_for_update_on_startup=false",
    'web_search="disabled"',
)


ROUTER_ERROR = "codex_core::tools::router: error="
PATCH_REJECTED = "patch rejected:"
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT")  # a line of Codex's own log: 2026-12-04T16:30:11.767388Z ERROR …


def tool_errors(stderr: str) -> list[list[str]]:
    """The tool calls that failed, as Codex logged them on stderr (``… ERROR codex_core::tools::router:
    error=MESSAGE``, the message running on over the lines up to its next log line), oldest first, each
    as its non-empty lines."""
    errors: list[list[str]] = []
    inside = False
    for line in stderr.splitlines():
        if ROUTER_ERROR in line:
            errors.append([line.split(ROUTER_ERROR, 1)[1].strip()])
            inside = True
        elif _LOG_LINE.match(line):
            inside = False
        elif inside and line.strip():
            errors[-1].append(line.strip())
    return errors


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


class CodexChange(TypedDict, total=False):
    path: str


class CodexItem(TypedDict, total=False):
    type: str
    text: str | None
    status: str
    changes: list[CodexChange]


class CodexUsage(TypedDict, total=False):
    input_tokens: int | None
    output_tokens: int | None


class CodexError(TypedDict, total=False):
    message: str | None


class CodexEvent(TypedDict, total=False):
    """A line of ``codex exec --json``: the fields ``report`` reads (each is still checked there, since
    another version of the CLI may send another shape)."""

    type: str
    item: CodexItem
    usage: CodexUsage
    error: CodexError
    message: str | None


def _events(stdout: str) -> list[CodexEvent]:
    events: list[CodexEvent] = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(cast(CodexEvent, event))
    return events


class Codex(Preset):
    name = "codex"
    title = "Codex"
    program = "codex"
    install = "npm install -g @openai/codex"
    keys = ("OPENAI_API_KEY",)
    wire = "OpenAI Responses (POST /v1/responses, streamed)"
    example_model = "gpt-5"
    example_base_url = "http://127.0.0.1:4000/v1"  # with /v1

    def invocation(self, cli: str, prompt: str, settings: Settings) -> Invocation:
        base_url = settings.base_url or DEFAULT_BASE_URL
        provider = (
            f"model_providers.{PROVIDER}={{name={_toml_string(PROVIDER)}, base_url={_toml_string(base_url)}, "
            'wire_api="responses", env_key="OPENAI_API_KEY"}'
        )
        argv = [cli, "exec", "--json", "--ephemeral", "--skip-git-repo-check", "--disable", "plugins"]
        if settings.sandboxed:
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        else:
            argv += ["--sandbox", "workspace-write", "-c", 'approval_policy="never"']
        for setting in QUIET:
            argv += ["-c", setting]
        argv += ["-c", f"model_provider={_toml_string(PROVIDER)}", "-c", provider]
        if settings.model:
            argv += ["--model", settings.model]
        argv += list(settings.args)
        stdin = None
        if self.prompt_fits_argv(prompt):
            argv.append(prompt)
        else:
            argv.append("-")  # read the prompt from stdin
            stdin = prompt
        env = {"CODEX_HOME": str(settings.home / ".codex")}
        return Invocation(argv=argv, env=env, dirs=(".codex",), stdin=stdin)

    def report(self, stdout: str, stderr: str, returncode: int, files: Mapping[str, str] = NOTHING) -> Report:
        message: str | None = None
        usage: list[Usage] = []
        failed: str | None = None
        last_error: str | None = None
        completed = edited = False
        failed_edits: list[str] = []
        for event in _events(stdout):
            kind = event.get("type")
            item = event.get("item") if isinstance(event.get("item"), dict) else {}
            assert isinstance(item, dict)
            if kind == "item.completed" and item.get("type") == "agent_message":
                message = str(item.get("text") or "")
            elif (
                kind == "item.completed"
                and item.get("type") == "file_change"
                and item.get("status") != "failed"
            ):
                edited = True
            elif kind == "item.completed" and item.get("type") == "file_change":
                changes = item.get("changes") if isinstance(item.get("changes"), list) else []
                assert isinstance(changes, list)
                failed_edits += [str(c.get("path")) for c in changes if isinstance(c, dict)] or ["a file"]
            elif kind == "turn.completed":
                completed = True
                used = event.get("usage") if isinstance(event.get("usage"), dict) else {}
                assert isinstance(used, dict)
                inputs, outputs = int(used.get("input_tokens") or 0), int(used.get("output_tokens") or 0)
                usage.append(Usage(None, inputs, outputs))
            elif kind == "turn.failed":
                error = event.get("error") if isinstance(event.get("error"), dict) else {}
                assert isinstance(error, dict)
                failed = str(error.get("message") or "turn.failed")
            elif kind == "error":
                last_error = str(event.get("message") or "")
        if failed is not None:
            return Report(message, tuple(usage), f"{self.title} failed: {failed}")
        if returncode != 0:
            said = f": {last_error}" if last_error else ""
            return Report(message, tuple(usage), exit_failure(self.title, returncode, stderr) + said)
        errors = tool_errors(stderr)
        if failed_edits:
            listed = ", ".join(failed_edits[:5]) + (" …" if len(failed_edits) > 5 else "")
            why = f": {errors[-1][-1]}" if errors else " (see the agent log for why)"
            return Report(message, tuple(usage), f"{self.title} could not apply its edit to {listed}{why}")
        rejected = [error[0] for error in errors if error[0].startswith(PATCH_REJECTED)]
        if rejected and not edited:
            reason = f"{self.title} was not allowed to edit: {rejected[-1]}"
            return Report(message, tuple(usage), reason)
        if not completed:
            said = f" (last error: {last_error})" if last_error else ""
            return Report(message, tuple(usage), f"{self.title} ended without completing its turn{said}")
        return Report(message, tuple(usage), None)

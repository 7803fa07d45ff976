"""Each preset's two pure halves: the invocation it builds and how it reads the CLI's output (recorded
from the real CLIs against the scripted endpoint), plus the wrapper's cost and hypothesis lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.agents.base import Settings, Usage
from controller.agents.claude_code import ClaudeCode
from controller.agents.codex import Codex
from controller.agents.outcome import Price, cost_line, hypothesis
from controller.agents.registry import PRESETS, preset
from controller.config.agent import PRESET_NAMES
from controller.domain.errors import SpecError

SETTINGS = Settings(workdir=Path("/w"), home=Path("/h"), model="m1", base_url="http://127.0.0.1:9/v1")

# Recorded from Claude Code 2.1.332 (trimmed to the fields the preset reads, plus a few it ignores).
CLAUDE_OK = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "result": "Done.\nHYPOTHESIS: lower the value",
    "total_cost_usd": 0.0144,
    "usage": {"input_tokens": 3600, "output_tokens": 240},
    "modelUsage": {
        "claude-sonnet-4-5": {
            "inputTokens": 3600,
            "outputTokens": 240,
            "cacheReadInputTokens": 0,
            "cacheCreationInputTokens": 0,
            "costUSD": 0.0144,
        }
    },
    "permission_denials": [],
}
CLAUDE_DOWN = {
    "type": "result",
    "subtype": "success",
    "is_error": True,
    "api_error": "connection_failed",
    "result": "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",
    "total_cost_usd": 0,
    "usage": {"input_tokens": 0, "output_tokens": 0},
    "modelUsage": {},
    "permission_denials": [],
}
CLAUDE_DENIED = {
    **CLAUDE_OK,
    "permission_denials": [
        {
            "tool_name": "Edit",
            "tool_use_id": "t1",
            "tool_input": {"file_path": "/w/app.py", "old_string": "1"},
        },
        {"tool_name": "Bash", "tool_use_id": "t2", "tool_input": {"command": "pytest"}},
    ],
}
# Recorded from Codex 0.171.0.
CODEX_OK = "\n".join(
    json.dumps(event)
    for event in [
        {"type": "thread.started", "thread_id": "t"},
        {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "error", "message": "Model metadata not found"},
        },
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"type": "file_change", "status": "completed"}},
        {
            "type": "item.completed",
            "item": {"id": "item_2", "type": "agent_message", "text": "HYPOTHESIS: x"},
        },
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 2400, "cached_input_tokens": 0, "output_tokens": 160},
        },
    ]
)
CODEX_FAILED = "\n".join(
    json.dumps(event)
    for event in [
        {"type": "turn.started"},
        {"type": "error", "message": "We’re currently experiencing high demand"},
        {"type": "turn.failed", "error": {"message": "We’re currently experiencing high demand"}},
    ]
)


def test_every_preset_name_the_spec_accepts_has_a_preset() -> None:
    assert tuple(PRESETS) == PRESET_NAMES
    with pytest.raises(SpecError, match=r"agent.preset: unknown preset 'x'; the presets are claude-code"):
        preset("x")


def test_claude_code_runs_headless_accepting_edits_and_quiet() -> None:
    run = ClaudeCode().invocation("/bin/claude", "the brief", SETTINGS)
    assert run.argv[:3] == ["/bin/claude", "-p", "the brief"]
    assert run.argv[run.argv.index("--permission-mode") + 1] == "acceptEdits"
    assert run.argv[run.argv.index("--output-format") + 1] == "json"
    assert run.argv[run.argv.index("--model") + 1] == "m1"
    assert "--dangerously-skip-permissions" not in run.argv  # refused as root
    assert "Bash(git commit:*)" in run.argv
    assert run.stdin is None  # closed
    assert run.env["ANTHROPIC_BASE_URL"] == SETTINGS.base_url
    for quiet in ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER"):
        assert run.env[quiet] == "1"


def test_without_crucibles_sandbox_claude_code_may_only_edit() -> None:
    unsandboxed = Settings(workdir=Path("/w"), home=Path("/h"), sandboxed=False)
    run = ClaudeCode().invocation("claude", "brief", unsandboxed)
    assert "--allowedTools" not in run.argv
    assert "ANTHROPIC_BASE_URL" not in run.env


def test_codex_is_crucibles_to_sandbox_and_talks_only_to_its_endpoint() -> None:
    run = Codex().invocation("/bin/codex", "the brief", SETTINGS)
    assert run.argv[:3] == ["/bin/codex", "exec", "--json"]
    assert run.argv[-1] == "the brief"
    for flag in ("--ephemeral", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"):
        assert flag in run.argv
    assert run.argv[run.argv.index("--disable") + 1] == "plugins"
    settings = [run.argv[i + 1] for i, word in enumerate(run.argv) if word == "-c"]
    assert "analytics.enabled=false" in settings
    provider = next(s for s in settings if s.startswith("model_providers.crucible="))
    assert 'base_url="http://127.0.0.1:9/v1"' in provider and 'wire_api="responses"' in provider
    assert run.stdin is None
    assert run.env["CODEX_HOME"] == "/h/.codex" and ".codex" in run.dirs


def test_without_crucibles_sandbox_codex_keeps_its_own() -> None:
    run = Codex().invocation("codex", "brief", Settings(workdir=Path("/w"), home=Path("/h"), sandboxed=False))
    assert "--dangerously-bypass-approvals-and-sandbox" not in run.argv
    assert run.argv[run.argv.index("--sandbox") + 1] == "workspace-write"


@pytest.mark.parametrize("chosen", [ClaudeCode(), Codex()], ids=lambda p: p.name)
def test_a_long_brief_goes_through_stdin(chosen: ClaudeCode | Codex) -> None:
    brief = "x" * 200_000  # more than one argv string may hold
    run = chosen.invocation("cli", brief, SETTINGS)
    assert run.stdin == brief
    assert brief not in run.argv


def test_claude_codes_result_gives_the_message_and_the_money() -> None:
    report = ClaudeCode().report(json.dumps(CLAUDE_OK) + "\n", "", 0)
    assert report.failure is None
    assert hypothesis(report.final_message) == "lower the value"
    assert report.usage == (Usage("claude-sonnet-4-5", 3600, 240, 0.0144),)


def test_claude_code_that_could_not_reach_its_model_failed() -> None:
    report = ClaudeCode().report(json.dumps(CLAUDE_DOWN), "", 1)
    assert report.failure == f"Claude Code failed: {CLAUDE_DOWN['result']}"


def test_claude_code_that_exits_0_without_being_allowed_to_edit_failed() -> None:
    report = ClaudeCode().report(json.dumps(CLAUDE_DENIED), "", 0)
    assert report.failure is not None
    assert report.failure.startswith("Claude Code was not allowed to edit (Edit /w/app.py)")


def test_claude_code_without_a_json_result_failed() -> None:
    report = ClaudeCode().report("", "Error: bad flag --x\nNode.js v20\n", 2)
    assert report.failure == "Claude Code exited 2: Error: bad flag --x"


def test_codex_events_give_the_message_and_the_tokens() -> None:
    report = Codex().report(CODEX_OK, "Reading additional input from stdin...\n", 0)
    assert report.failure is None
    assert report.final_message == "HYPOTHESIS: x"
    assert report.usage == (Usage(None, 2400, 160),)


def test_a_failed_codex_turn_failed() -> None:
    report = Codex().report(CODEX_FAILED, "", 1)
    assert report.failure == "Codex failed: We’re currently experiencing high demand"


def test_codex_that_never_completed_its_turn_failed() -> None:
    report = Codex().report(json.dumps({"type": "turn.started"}), "", 0)
    assert report.failure == "Codex ended without completing its turn"


def test_prices_turn_tokens_into_dollars_and_replace_the_clis_estimate() -> None:
    codex = [Usage(None, 2_000_000, 100_000)]
    assert cost_line(codex, {}, "gpt-5") == "COST tokens=2100000"
    assert cost_line(codex, {"gpt-5": Price(1.25, 10.0)}, "gpt-5") == "COST usd=3.500000 tokens=2100000"
    claude = [Usage("claude-sonnet-4-5", 1_000_000, 0, 3.0)]
    assert cost_line(claude, {}, None) == "COST usd=3.000000 tokens=1000000"
    assert (
        cost_line(claude, {"claude-sonnet-4-5": Price(1.0, 0.0)}, None) == "COST usd=1.000000 tokens=1000000"
    )
    assert cost_line([], {}, None) is None


def test_the_hypothesis_is_the_last_hypothesis_line_else_the_first_line() -> None:
    assert hypothesis("I looked.\nHYPOTHESIS: a\nHYPOTHESIS: b\n") == "b"
    assert hypothesis("Cached the parser.\nMore words.") == "Cached the parser."
    assert hypothesis("") is None


def test_codex_whose_edit_failed_failed_although_it_says_done() -> None:
    change = {"type": "file_change", "changes": [{"path": "/w/app.py", "kind": "update"}], "status": "failed"}
    events = [
        {"type": "item.completed", "item": change},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "Done.\nHYPOTHESIS: x"}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
    ]
    report = Codex().report("\n".join(json.dumps(e) for e in events), "", 0)
    assert report.failure == "Codex could not apply its edit to /w/app.py (see the agent log for why)"


# Recorded from Codex 0.171 (stderr, trimmed): an edit its read-only sandbox refused leaves no event at
# all, only this log line; an edit the file system refused (a read-only bind) is a failed file_change
# whose reason is on stderr only.
CODEX_REJECTED_STDERR = (
    "Reading additional input from stdin...\n"
    "2026-12-04T16:30:11.767388Z ERROR codex_core::tools::router: error=patch rejected: writing is blocked "
    "by read-only sandbox; rejected by user approval settings\n"
)
CODEX_WRITE_FAILED_STDERR = (
    "Reading additional input from stdin...\n"
    "2026-12-04T16:31:16.794507Z ERROR codex_core::tools::router: error=Exit code: 1\n"
    "Wall time: 0.1 seconds\nOutput:\nFailed to write file /w/src/value.txt\n\n"
)
CODEX_DONE = [
    {"type": "item.completed", "item": {"type": "agent_message", "text": "Done.\nHYPOTHESIS: x"}},
    {"type": "turn.completed", "usage": {"input_tokens": 2400, "output_tokens": 160}},
]


def test_codex_refused_by_its_own_sandbox_failed_although_no_event_says_so() -> None:
    report = Codex().report("\n".join(json.dumps(e) for e in CODEX_DONE), CODEX_REJECTED_STDERR, 0)
    assert report.failure == (
        "Codex was not allowed to edit: patch rejected: writing is blocked by read-only sandbox; "
        "rejected by user approval settings"
    )
    assert report.usage == (Usage(None, 2400, 160),)


def test_codex_whose_write_failed_says_why_from_its_log() -> None:
    change = {"type": "file_change", "changes": [{"path": "/w/src/value.txt"}], "status": "failed"}
    events = [{"type": "item.completed", "item": change}, *CODEX_DONE]
    report = Codex().report("\n".join(json.dumps(e) for e in events), CODEX_WRITE_FAILED_STDERR, 0)
    assert report.failure == (
        "Codex could not apply its edit to /w/src/value.txt: Failed to write file /w/src/value.txt"
    )


def test_codex_with_one_edit_refused_and_another_made_did_its_turn() -> None:
    change = {"type": "file_change", "changes": [{"path": "/w/src/value.txt"}], "status": "completed"}
    events = [{"type": "item.completed", "item": change}, *CODEX_DONE]
    report = Codex().report("\n".join(json.dumps(e) for e in events), CODEX_REJECTED_STDERR, 0)
    assert report.failure is None

"""``preset = "gemini"``: the invocation it builds and how it reads Gemini CLI's stream-json events (recorded
from Gemini CLI 0.61.0 against the scripted endpoint), then ``crucible loop`` with the real CLI under
bubblewrap against the scripted Gemini API: the edit kept with its tokens, and the turns it did not do
failed with a reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.agents.base import Settings, Usage
from controller.agents.gemini import GeminiCli
from controller.agents.outcome import hypothesis
from tests.agentkit.clis import cli
from tests.agentkit.server import ModelServer
from tests.agents.conftest import EDIT, preset_spec
from tests.e2e.conftest import BENCH_SH, Project, assert_checkout_at, ok_run, outcomes

KEY = "gemini-test-key-0123456789abcdef"
SETTINGS = Settings(
    workdir=Path("/w"), home=Path("/h"), model="gemini-2.5-pro", base_url="http://127.0.0.1:9"
)
REPLACE = {"file_path": "src/a.py", "instruction": "x", "old_string": "1", "new_string": "2"}
STATS = {"total_tokens": 2560, "input_tokens": 2400, "output_tokens": 160, "cached": 0, "input": 2400}


def _stream(*events: dict[str, Any]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


INIT = {"type": "init", "session_id": "s", "model": "gemini-2.5-pro"}
CALL = {"type": "tool_use", "tool_name": "replace", "tool_id": "replace_1", "parameters": REPLACE}
DONE = {"type": "tool_result", "tool_id": "replace_1", "status": "success"}
FINAL = [
    {"type": "message", "role": "assistant", "content": "Done.\n", "delta": True},
    {"type": "message", "role": "assistant", "content": "HYPOTHESIS: lower it", "delta": True},
]
RESULT = {"type": "result", "status": "success", "stats": {**STATS, "models": {"gemini-2.5-pro": STATS}}}


def test_gemini_runs_headless_trusting_the_workspace_with_its_own_settings() -> None:
    run = GeminiCli().invocation("/bin/gemini", "the brief", SETTINGS)
    assert run.argv[:3] == ["/bin/gemini", "--output-format", "stream-json"]
    assert run.argv[run.argv.index("--approval-mode") + 1] == "yolo"
    assert run.argv[run.argv.index("-p") + 1] == "the brief"
    assert run.argv[run.argv.index("--model") + 1] == "gemini-2.5-pro"
    assert run.stdin is None
    assert run.env["GOOGLE_GEMINI_BASE_URL"] == SETTINGS.base_url
    assert run.env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"  # else yolo silently becomes default
    settings = json.loads(run.files[".gemini/settings.json"])
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"  # else exit 41 with a base URL
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["general"]["enableAutoUpdate"] is False


def test_without_crucibles_sandbox_gemini_may_only_edit_and_a_long_brief_goes_through_stdin() -> None:
    brief = "x" * 200_000
    run = GeminiCli().invocation(
        "gemini", brief, Settings(workdir=Path("/w"), home=Path("/h"), sandboxed=False)
    )
    assert run.argv[run.argv.index("--approval-mode") + 1] == "auto_edit"
    assert run.stdin == brief and brief not in run.argv
    assert "GOOGLE_GEMINI_BASE_URL" not in run.env and "--model" not in run.argv


def test_gemini_events_give_the_last_message_and_the_tokens() -> None:
    early = {"type": "message", "role": "assistant", "content": "Let me edit.", "delta": True}
    report = GeminiCli().report(
        _stream(INIT, early, CALL, DONE, *FINAL, RESULT), "Ripgrep is not available.\n", 0
    )
    assert report.failure is None
    assert report.final_message == "Done.\nHYPOTHESIS: lower it"
    assert hypothesis(report.final_message) == "lower it"
    assert report.usage == (Usage("gemini-2.5-pro", 2400, 160),)


def test_a_refused_edit_or_a_downgraded_approval_mode_fails_the_turn() -> None:
    error = {"type": "tool_not_registered", "message": 'Tool "replace" not found.'}
    refused = {"type": "tool_result", "tool_id": "replace_1", "status": "error", "error": error}
    report = GeminiCli().report(_stream(INIT, CALL, refused, *FINAL, RESULT), "", 0)
    assert (
        report.failure == 'Gemini CLI was not allowed to edit (replace src/a.py: Tool "replace" not found.)'
    )
    missed = {"type": "edit_no_occurrence_found", "message": "0 occurrences"}
    no_match = {**refused, "error": missed}  # the model's mistake, not a refusal
    assert GeminiCli().report(_stream(INIT, CALL, no_match, *FINAL, RESULT), "", 0).failure is None
    said = 'Approval mode overridden to "default" because the current folder is not trusted.'
    report = GeminiCli().report(_stream(INIT, *FINAL, RESULT), f"YOLO mode is enabled.\n{said}\n", 0)
    assert report.failure == f"Gemini CLI was not allowed to edit: {said}"


def test_a_gemini_result_with_an_error_status_failed() -> None:
    error = {"type": "unknown", "message": '[API Error: {"error":{"message":"quota"}}]'}
    failed = {"type": "result", "status": "error", "error": error, "stats": {**STATS, "models": {}}}
    report = GeminiCli().report(_stream(INIT, failed), "", 1)
    assert report.failure == 'Gemini CLI failed: [API Error: {"error":{"message":"quota"}}]'
    report = GeminiCli().report("", "An unexpected critical error occurred:Error: Invalid approval mode\n", 1)
    assert (
        report.failure
        == "Gemini CLI exited 1: An unexpected critical error occurred:Error: Invalid approval mode"
    )


# ----------------------------------------------------------------------------------- the real CLI, end to end


@pytest.mark.slow
def test_a_real_gemini_edit_is_kept_with_its_tokens(project: Project, model_server: ModelServer) -> None:
    gemini = cli("gemini")
    project.make({"tools/bench.sh": 'test -z "$GEMINI_API_KEY" || exit 3\n' + BENCH_SH})
    preset_spec(project, "gemini", gemini, model_server.url, model="gemini-2.5-pro")
    view = ok_run(project.loop(env={"GEMINI_API_KEY": KEY, "GITHUB_TOKEN": "ghp_" + "x" * 36}))

    assert outcomes(view) == [("accepted", "improved")]
    turn = view["turns"][0]
    assert turn["changed_paths"] == ["src/value.txt"]
    assert turn["hypothesis"] == EDIT.hypothesis
    calls = model_server.received("gemini")
    assert [c.path for c in calls] == ["/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"] * 2
    assert view["tokens"] == 2 * (model_server.model.input_tokens + model_server.model.output_tokens)
    assert turn["cost_usd"] is None or turn["cost_usd"] == 0  # tokens only, and no agent.prices
    checkout = project.checkout(view["run_id"])
    assert (checkout / "src" / "value.txt").read_text() == "8\n"
    assert_checkout_at(checkout, view["components"][0]["head_sha"])

    assert {c.headers.get("x-goog-api-key") for c in calls} == {KEY}
    assert model_server.received() == calls  # no usage statistics, no update check, no router call
    assert not any("ghp_" in c.body.decode() for c in calls)


@pytest.mark.slow
def test_a_gemini_that_may_not_edit_fails_the_turn(project: Project, model_server: ModelServer) -> None:
    project.make()
    args = ["--approval-mode", "default"]  # headless, the edit tools are not registered; it exits 0
    preset_spec(project, "gemini", cli("gemini"), model_server.url, model="m", args=args)
    view = ok_run(project.loop(env={"GEMINI_API_KEY": KEY}))

    assert outcomes(view) == [("failed", "agent_failed")]
    detail = view["turns"][0]["detail"]
    assert 'Gemini CLI was not allowed to edit (replace src/value.txt: Tool "replace" not found' in detail, (
        detail
    )


@pytest.mark.slow
def test_a_gemini_whose_model_answers_errors_fails_the_turn(
    project: Project, model_server: ModelServer
) -> None:
    project.make()
    model_server.model.fail_status = 401
    preset_spec(project, "gemini", cli("gemini"), model_server.url, model="m")
    view = ok_run(project.loop(env={"GEMINI_API_KEY": KEY}))
    assert outcomes(view) == [("failed", "agent_failed")]
    assert "Gemini CLI failed: [API Error: " in view["turns"][0]["detail"]


@pytest.mark.slow
def test_agent_prices_turn_gemini_tokens_into_dollars_that_the_cost_budget_counts(
    project: Project, model_server: ModelServer
) -> None:
    project.make()
    prices = {"gemini-2.5-pro": {"input": 1.25, "output": 10.0}}
    preset_spec(project, "gemini", cli("gemini"), model_server.url, model="gemini-2.5-pro", prices=prices)
    spec = project.spec_path.read_text() + "\n[budget]\ncost_usd = 0.000001\n"
    project.spec_path.write_text(spec.replace("turns = 1", "turns = 3"))

    view = ok_run(project.loop(env={"GEMINI_API_KEY": KEY}))

    model = model_server.model
    usd = 2 * (model.input_tokens * 1.25 + model.output_tokens * 10.0) / 1e6
    assert outcomes(view) == [("accepted", "improved")]
    assert view["turns"][0]["cost_usd"] == pytest.approx(usd)
    assert view["stop_reason"] == "cost", view["message"]  # the budget stopped it after the first turn

"""``preset = "qwen-code"``: the invocation it builds and how it reads qwen-code's JSON (recorded from
qwen-code 0.15.10 against the scripted endpoint), then ``crucible loop`` with the real CLI under bubblewrap
against the scripted OpenAI chat-completions endpoint: the edit kept with its tokens, and each way the CLI
exits 0 without doing its turn failing it with a reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.agents.base import Settings, Usage
from controller.agents.outcome import hypothesis
from controller.agents.qwen_code import QwenCode
from tests.agentkit.clis import REAL_HOME, cli
from tests.agentkit.server import ModelServer
from tests.agents.conftest import EDIT, preset_spec
from tests.e2e.conftest import BENCH_SH, Project, assert_checkout_at, ok_run, outcomes

KEY = "sk-qwen-test-0123456789abcdef"
SETTINGS = Settings(
    workdir=Path("/w"), home=Path("/h"), model="qwen3-coder", base_url="http://127.0.0.1:9/v1"
)
EDIT_TOOLS = ["list_directory", "read_file", "grep_search", "glob", "edit", "write_file", "run_shell_command"]


def _events(result: dict[str, Any], tools: list[str] = EDIT_TOOLS, mode: str = "yolo") -> str:
    """qwen-code's ``--output-format json`` stdout: one JSON array of events, ending in the result."""
    init = {"type": "system", "subtype": "init", "tools": tools, "permission_mode": mode, "model": "m"}
    text = {"type": "assistant", "message": {"content": [{"type": "text", "text": result.get("result", "")}]}}
    return json.dumps([init, text, result]) + "\n"


def _result(text: str, *, requests: int = 3, errors: int = 0, **extra: Any) -> dict[str, Any]:
    tokens = {"prompt": 3600, "candidates": 200, "total": 3840, "cached": 0, "thoughts": 40}
    if errors:
        tokens = {"prompt": 0, "candidates": 0, "total": 0, "cached": 0, "thoughts": 0}
    api = {"totalRequests": requests, "totalErrors": errors, "totalLatencyMs": 156}
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": text,
        "usage": {"input_tokens": tokens["prompt"], "output_tokens": tokens["candidates"]},
        "permission_denials": [],
        "stats": {"models": {"qwen3-coder": {"api": api, "tokens": tokens}}},
        **extra,
    }


def test_qwen_code_runs_headless_in_yolo_mode_with_its_own_settings() -> None:
    run = QwenCode().invocation("/bin/qwen", "the brief", SETTINGS)
    assert run.argv[:5] == ["/bin/qwen", "--auth-type", "openai", "--output-format", "json"]
    assert run.argv[run.argv.index("--approval-mode") + 1] == "yolo"
    assert run.argv[run.argv.index("-p") + 1] == "the brief"
    assert run.argv[run.argv.index("--model") + 1] == "qwen3-coder"
    assert run.stdin is None
    assert run.env["OPENAI_BASE_URL"] == SETTINGS.base_url
    assert run.env["QWEN_SANDBOX"] == "false"
    settings = json.loads(run.files[".qwen/settings.json"])
    assert settings["privacy"]["usageStatisticsEnabled"] is False  # no RUM telemetry
    assert settings["memory"]["enableManagedAutoMemory"] is False  # no second model call per session
    assert settings["general"]["enableAutoUpdate"] is False


def test_without_crucibles_sandbox_qwen_code_may_only_edit_and_a_long_brief_goes_through_stdin() -> None:
    unsandboxed = Settings(workdir=Path("/w"), home=Path("/h"), sandboxed=False)
    brief = "x" * 200_000
    run = QwenCode().invocation("qwen", brief, unsandboxed)
    assert run.argv[run.argv.index("--approval-mode") + 1] == "auto-edit"
    assert run.stdin == brief and brief not in run.argv
    assert "OPENAI_BASE_URL" not in run.env and "--model" not in run.argv


def test_a_flag_in_args_replaces_the_presets_own() -> None:
    args = ("--approval-mode=auto-edit", "-m", "other")
    run = QwenCode().invocation(
        "qwen", "b", Settings(workdir=Path("/w"), home=Path("/h"), model="m", args=args)
    )
    assert run.argv.count("--approval-mode=auto-edit") == 1 and "--approval-mode" not in run.argv
    assert "--model" not in run.argv and run.argv[-2:] == ["-m", "other"]


def test_qwen_codes_result_gives_the_message_and_the_tokens_per_model() -> None:
    report = QwenCode().report(_events(_result("Done.\nHYPOTHESIS: lower it")), "", 0)
    assert report.failure is None
    assert hypothesis(report.final_message) == "lower it"
    assert report.usage == (Usage("qwen3-coder", 3600, 240),)  # thoughts are output


def test_qwen_code_that_reports_success_after_every_model_call_failed_failed() -> None:
    down = _result("[API Error: Connection error. (cause: fetch failed)]", requests=1, errors=1)
    report = QwenCode().report(_events(down), "", 0)
    said = "[API Error: Connection error. (cause: fetch failed)]"
    assert report.failure == f"qwen-code could not get an answer from its model: {said}"
    report = QwenCode().report(_events(_result("I gave up.", requests=2, errors=2)), "", 0)
    assert report.failure == "qwen-code: all 2 model calls failed: I gave up."


def test_qwen_code_without_an_edit_tool_or_with_a_denied_edit_failed() -> None:
    no_edit = _events(_result("HYPOTHESIS: x"), tools=["read_file", "glob"], mode="default")
    failure = QwenCode().report(no_edit, "", 0).failure
    assert failure is not None
    assert failure.startswith("qwen-code was not allowed to edit: in its approval mode 'default' it offers")
    denial = {"tool_name": "edit", "tool_use_id": "c", "tool_input": {"file_path": "/w/src/a.py"}}
    denied = _events(_result("HYPOTHESIS: x", permission_denials=[denial]))
    failure = QwenCode().report(denied, "", 0).failure
    assert failure is not None and failure.startswith("qwen-code was not allowed to edit (edit /w/src/a.py)")


def test_qwen_code_without_a_json_result_failed() -> None:
    report = QwenCode().report("", "An unexpected critical error occurred:\nTypeError: x\n", 1)
    assert report.failure == "qwen-code exited 1: TypeError: x"
    assert QwenCode().report("not json\n", "", 0).failure == (
        "qwen-code printed no JSON result (--output-format json)"
    )


# ----------------------------------------------------------------------------------- the real CLI, end to end


@pytest.mark.slow
@pytest.mark.parametrize("home", ["temporary", "the machine's own"])
def test_a_real_qwen_code_edit_is_kept_with_its_tokens(
    project: Project, model_server: ModelServer, home: str
) -> None:
    qwen = cli("qwen")
    # The key is the agent's alone: the metric command fails if it sees it.
    project.make({"tools/bench.sh": 'test -z "$OPENAI_API_KEY" || exit 3\n' + BENCH_SH})
    prices = {"qwen3-coder": {"input": 1.0, "output": 5.0}}
    preset_spec(project, "qwen-code", qwen, f"{model_server.url}/v1", model="qwen3-coder", prices=prices)
    env = {"OPENAI_API_KEY": KEY, "GITHUB_TOKEN": "ghp_" + "x" * 36}
    if home != "temporary":
        env["HOME"] = str(REAL_HOME)
    view = ok_run(project.loop(env=env))

    assert outcomes(view) == [("accepted", "improved")]
    turn = view["turns"][0]
    assert turn["changed_paths"] == ["src/value.txt"]
    assert turn["hypothesis"] == EDIT.hypothesis
    calls = model_server.received("chat")
    assert len(calls) == 3  # read_file, edit, final answer: no memory extraction, no side calls
    tokens = 3 * (model_server.model.input_tokens + model_server.model.output_tokens)
    assert view["tokens"] == tokens
    usd = 3 * (model_server.model.input_tokens * 1.0 + model_server.model.output_tokens * 5.0) / 1e6
    assert turn["cost_usd"] == pytest.approx(usd)  # agent.prices turn its tokens into dollars
    checkout = project.checkout(view["run_id"])
    assert (checkout / "src" / "value.txt").read_text() == "8\n"
    assert_checkout_at(checkout, view["components"][0]["head_sha"])  # nothing else left behind

    assert {c.headers.get("authorization") for c in calls} == {f"Bearer {KEY}"}
    assert {c.json()["model"] for c in calls} == {"qwen3-coder"}
    assert all(c.json()["stream"] for c in calls)
    assert model_server.received() == calls  # nothing but model calls reached the endpoint
    assert not any("ghp_" in c.body.decode() for c in calls)  # the controller's token never reached it
    projects = REAL_HOME / ".qwen" / "projects"  # the CLI kept its state in a HOME of its own
    assert not any(view["run_id"] in p.name for p in projects.glob("*")) if projects.is_dir() else True


@pytest.mark.slow
def test_a_qwen_code_that_may_not_edit_fails_the_turn(project: Project, model_server: ModelServer) -> None:
    project.make()
    args = ["--approval-mode", "default"]  # no edit tool is offered, and qwen-code exits 0 all the same
    preset_spec(project, "qwen-code", cli("qwen"), f"{model_server.url}/v1", model="m", args=args)
    view = ok_run(project.loop(env={"OPENAI_API_KEY": KEY}))

    assert outcomes(view) == [("failed", "agent_failed")]
    detail = view["turns"][0]["detail"]
    assert "qwen-code was not allowed to edit: in its approval mode 'default'" in detail, detail


@pytest.mark.slow
def test_a_qwen_code_whose_model_answers_errors_fails_the_turn(
    project: Project, model_server: ModelServer
) -> None:
    project.make()
    model_server.model.fail_status = 401
    preset_spec(project, "qwen-code", cli("qwen"), f"{model_server.url}/v1", model="m")
    view = ok_run(project.loop(env={"OPENAI_API_KEY": KEY}))

    assert outcomes(view) == [("failed", "agent_failed")]
    assert "qwen-code could not get an answer from its model: [API Error: 401" in view["turns"][0]["detail"]

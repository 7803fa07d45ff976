"""``preset = "claude-code"`` end to end: ``crucible loop`` runs the real Claude Code under bubblewrap against
the scripted Anthropic endpoint, which makes one edit; the turn keeps it with its cost, and each way the CLI
can fail to do its turn is a failed turn that says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agentkit.clis import REAL_HOME, cli
from tests.agentkit.server import ModelServer
from tests.agents.conftest import EDIT, preset_spec
from tests.e2e.conftest import BENCH_SH, Project, assert_checkout_at, ok_run, outcomes

pytestmark = pytest.mark.slow

KEY = "sk-ant-test-0123456789abcdef"


def _claude_state(session: str) -> list[Path]:
    """Files under the machine's real ``~/.claude`` that name the CLI's session: none may exist."""
    root = REAL_HOME / ".claude"
    return [path for path in root.rglob("*") if session in path.name] if root.is_dir() else []


@pytest.mark.parametrize("home", ["temporary", "the machine's own"])
def test_a_real_claude_code_edit_is_kept_with_its_cost(
    project: Project, model_server: ModelServer, home: str
) -> None:
    claude = cli("claude")
    # The key is the agent's alone: the metric command fails if it sees it.
    project.make({"tools/bench.sh": 'test -z "$ANTHROPIC_API_KEY" || exit 3\n' + BENCH_SH})
    preset_spec(project, "claude-code", claude, model_server.url, model="claude-sonnet-4-5")
    env = {"ANTHROPIC_API_KEY": KEY, "GITHUB_TOKEN": "ghp_" + "x" * 36}
    if home != "temporary":
        env["HOME"] = str(REAL_HOME)
    view = ok_run(project.loop(env=env))

    assert outcomes(view) == [("accepted", "improved")]
    turn = view["turns"][0]
    assert turn["changed_paths"] == ["src/value.txt"]
    assert turn["hypothesis"] == EDIT.hypothesis
    assert turn["cost_usd"] > 0  # Claude Code prices its own tokens
    assert view["tokens"] > 0
    checkout = project.checkout(view["run_id"])
    assert (checkout / "src" / "value.txt").read_text() == "8\n"
    assert_checkout_at(checkout, view["components"][0]["head_sha"])  # nothing else left behind

    calls = model_server.received("anthropic")
    assert calls, "the CLI never called the model"
    assert {c.headers.get("x-api-key") for c in calls} == {KEY}
    assert {c.json()["model"] for c in calls} == {"claude-sonnet-4-5"}
    assert model_server.received() == calls  # nothing but model calls (no telemetry, no update check)
    assert not any("ghp_" in c.body.decode() for c in calls)  # the controller's token never reached it
    session = calls[0].headers["x-claude-code-session-id"]
    assert _claude_state(session) == []  # the CLI kept its state in a HOME of its own


def test_an_edit_claude_code_was_not_allowed_to_make_fails_the_turn(
    project: Project, model_server: ModelServer
) -> None:
    project.make()
    args = ["--permission-mode", "default"]  # a later flag wins: edits now need a prompt nobody answers
    preset_spec(project, "claude-code", cli("claude"), model_server.url, args=args)
    view = ok_run(project.loop(env={"ANTHROPIC_API_KEY": KEY}))

    assert outcomes(view) == [("failed", "agent_failed")]
    detail = view["turns"][0]["detail"]
    assert "Claude Code was not allowed to edit (Edit " in detail, detail
    assert "src/value.txt" in detail


def test_a_model_endpoint_that_answers_errors_fails_the_turn(
    project: Project, model_server: ModelServer
) -> None:
    project.make()
    model_server.model.fail_status = 500
    preset_spec(project, "claude-code", cli("claude"), model_server.url)
    view = ok_run(project.loop(env={"ANTHROPIC_API_KEY": KEY, "CLAUDE_CODE_MAX_RETRIES": "0"}))
    assert outcomes(view) == [("failed", "agent_failed")]
    assert "Claude Code failed: API Error: 500" in view["turns"][0]["detail"]

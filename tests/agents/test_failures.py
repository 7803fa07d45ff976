"""Each preset's failure paths with its real CLI under bubblewrap, as one table (issue 20).

A model endpoint that is down, a model that never answers (the turn's timeout) and a CLI that is not
installed: each is a failed turn that says why, naming the CLI (and for a missing one, its exact install
command), for every preset, never a quiet ``no_change``. The per-preset files test what is particular to
one CLI (an edit it was not allowed to make, an endpoint answering errors); this file holds the paths every
preset must share, and is the only place they are run end to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.agentkit.clis import cli, refused_url
from tests.agentkit.server import ModelServer
from tests.agents.conftest import preset_spec
from tests.e2e.conftest import Project, assert_checkout_at, ok_run, outcomes

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Case:
    preset: str
    program: str
    title: str  # how the turn's detail names the CLI
    install: str  # the command the detail gives for installing it
    key: str
    path: str = ""  # what the base URL needs after the server's root
    agent: tuple[tuple[str, Any], ...] = ()


CASES = (
    Case(
        "claude-code",
        "claude",
        "Claude Code",
        "npm install -g @anthropic-ai/claude-code",
        "ANTHROPIC_API_KEY",
    ),
    Case("codex", "codex", "Codex", "npm install -g @openai/codex", "OPENAI_API_KEY", "/v1"),
    Case(
        "aider",
        "aider",
        "aider",
        "pipx install aider-chat  (or: python -m pip install aider-chat)",
        "OPENAI_API_KEY",
        "/v1",
        (("model", "gpt-4o"),),
    ),
    Case("gemini", "gemini", "Gemini CLI", "npm install -g @google/gemini-cli", "GEMINI_API_KEY"),
    Case(
        "qwen-code",
        "qwen",
        "qwen-code",
        "npm install -g @qwen-code/qwen-code",
        "OPENAI_API_KEY",
        "/v1",
        (("model", "m"),),
    ),
)
KEY = "sk-failure-test-0123456789abcdef"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.preset)
def test_a_model_endpoint_that_is_down_fails_the_turn_saying_so(project: Project, case: Case) -> None:
    project.make()
    url = refused_url() + case.path
    preset_spec(project, case.preset, cli(case.program), url, **dict(case.agent))

    view = ok_run(project.loop(env={case.key: KEY}))

    assert outcomes(view) == [("failed", "agent_failed")], view["turns"]
    assert f"{case.title}: cannot reach the model endpoint {url}" in view["turns"][0]["detail"]
    assert_checkout_at(project.checkout(view["run_id"]), project.base_sha())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.preset)
def test_a_model_that_never_answers_times_the_turn_out(
    project: Project, model_server: ModelServer, case: Case
) -> None:
    project.make()
    model_server.model.delay_s = 60
    # The turn's whole timeout is waited out: 3 s is as good a "never" as 8 s, five times over.
    url = model_server.url + case.path
    preset_spec(project, case.preset, cli(case.program), url, **{**dict(case.agent), "timeout": "3s"})

    view = ok_run(project.loop(env={case.key: KEY}))

    assert outcomes(view) == [("failed", "timeout")], view["turns"]
    assert "timed out after 3s" in view["turns"][0]["detail"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.preset)
def test_a_missing_cli_fails_the_turn_and_the_dry_run_names_its_install_command(
    project: Project, model_server: ModelServer, case: Case
) -> None:
    project.make()
    preset_spec(project, case.preset, project.root / f"no-such-{case.program}", model_server.url + case.path)

    dry = project.cli("loop", "--spec", str(project.spec_path), "--dry-run", "--json")
    view = ok_run(project.loop(env={case.key: KEY}))

    assert outcomes(view) == [("failed", "agent_failed")], view["turns"]
    detail = view["turns"][0]["detail"]
    assert f"{case.title} is not installed" in detail, detail
    assert detail.endswith(f"install it: {case.install}"), detail
    assert dry.code == 0 and isinstance(dry.json, dict), dry.describe()
    plan = dry.json["agent"]["preset"]
    assert plan["cli"] is None and plan["install"] == case.install and case.install in plan["missing"], plan
    assert model_server.received() == []

"""The presets at the command line: the spec's errors, and what ``crucible loop --dry-run`` says about the
CLI a run would use."""

from __future__ import annotations

import os

import pytest

from tests.agentkit.clis import cli
from tests.agents.conftest import preset_spec
from tests.e2e.conftest import Project

pytestmark = pytest.mark.slow


def test_an_unknown_preset_exits_2_listing_the_presets(project: Project) -> None:
    project.make()
    project.write_spec(agent={"command": None, "preset": "cursor"})
    result = project.cli("loop", "--spec", str(project.spec_path), "--dry-run")
    assert result.code == 2, result.describe()
    assert 'agent.preset: unknown preset "cursor"; the presets are claude-code, codex' in result.stderr


def test_a_preset_beside_a_command_is_refused_naming_both(project: Project) -> None:
    project.make()
    project.write_spec(agent={"preset": "codex"})  # the default spec has a command
    result = project.loop()
    assert result.code == 2, result.describe()
    assert "agent.preset: set agent.command or agent.preset, not both" in result.stderr


def test_the_dry_run_names_a_missing_cli_with_its_install_command(project: Project) -> None:
    project.make()
    preset_spec(project, "codex", project.root / "bin" / "codex", "http://127.0.0.1:9/v1")
    result = project.cli("loop", "--spec", str(project.spec_path), "--dry-run", "--json")
    assert result.code == 0, result.describe()
    plan = result.json["agent"]["preset"]
    assert plan["cli"] is None
    assert plan["missing"].endswith("is not installed: npm install -g @openai/codex")
    text = project.cli("loop", "--spec", str(project.spec_path), "--dry-run")
    assert "cannot start: Codex (" in text.stdout
    assert "npm install -g @openai/codex" in text.stdout


def test_the_dry_run_shows_the_cli_its_keys_and_the_command_a_turn_runs(project: Project) -> None:
    claude = cli("claude")
    project.make()
    preset_spec(project, "claude-code", claude, "http://127.0.0.1:9", model="claude-sonnet-4-5")
    result = project.cli(
        "loop", "--spec", str(project.spec_path), "--dry-run", env={"ANTHROPIC_API_KEY": "sk-ant-x-123456"}
    )
    assert result.code == 0, result.describe()
    assert "agent: preset claude-code, model claude-sonnet-4-5, endpoint http://127.0.0.1:9" in result.stdout
    assert "ANTHROPIC_API_KEY (set), ANTHROPIC_AUTH_TOKEN (not set)" in result.stdout
    # The CLI itself, its output going to the turn's folder (no wrapper in between, ADR-0038).
    runs = next(line for line in result.stdout.splitlines() if line.startswith("  runs: "))
    assert f"exec {os.path.realpath(claude)} -p " in runs and "--permission-mode acceptEdits" in runs
    assert "DISABLE_TELEMETRY=1 " in runs and runs.endswith(" </dev/null >'$TURN/stdout' 2>'$TURN/stderr'")
    assert "sk-ant-x-123456" not in result.output
    assert "cannot start" not in result.stdout  # the CLI starts inside the sandbox


def test_init_writes_a_spec_for_a_preset_that_the_dry_run_accepts(project: Project) -> None:
    project.make()
    made = project.cli("init", "--agent", "codex", cwd=project.repo)
    assert made.code == 0, made.describe()
    text = (project.repo / "crucible.toml").read_text()
    assert 'preset = "codex"' in text and "npm install -g @openai/codex" in text
    dry = project.cli("loop", "--spec", str(project.repo / "crucible.toml"), "--dry-run", cwd=project.repo)
    assert dry.code == 0, dry.describe()
    assert "agent: preset codex" in dry.stdout


def test_init_refuses_an_unknown_preset_listing_them(project: Project) -> None:
    project.make()
    made = project.cli("init", "--agent", "cursor", cwd=project.repo)
    assert made.code == 2
    assert (
        "agent.preset: unknown preset 'cursor'; the presets are claude-code, codex, aider, gemini, qwen-code"
        in made.stderr
    )
    assert not (project.repo / "crucible.toml").exists()


def test_agents_lists_each_preset_its_cli_and_version(project: Project) -> None:
    claude, codex = cli("claude"), cli("codex")
    env = {"PATH": f"{claude.parent}:{os.environ['PATH']}", "OPENAI_API_KEY": "sk-x-0123456789"}
    listed = project.cli("agents", "--json", env=env)
    assert listed.code == 0, listed.describe()
    by_name = {entry["preset"]: entry for entry in listed.json}
    assert list(by_name) == ["claude-code", "codex", "aider", "gemini", "qwen-code"]
    assert (
        by_name["claude-code"]["path"] == str(claude) and "Claude Code" in by_name["claude-code"]["version"]
    )
    assert by_name["codex"]["path"] == str(codex) and by_name["codex"]["version"].startswith("codex-cli ")
    assert by_name["codex"]["keys_set"] == ["OPENAI_API_KEY"]
    text = project.cli("agents", env={"PATH": "/usr/bin:/bin"})
    assert "claude-code  Claude Code: not installed: npm install -g @anthropic-ai/claude-code" in text.stdout

"""Programs under /tmp inside the sandbox, through the real CLI (issue 13).

The sandbox's private ``/tmp`` hid every program, interpreter and virtualenv living there, so a run from a
throwaway clone failed every turn with ``execvp: No such file``. The agent here is a script in a virtualenv
under the test's temp dir (under ``/tmp``), found on ``PATH`` like a ``pipx``-installed tool.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Project, ok_run, outcomes

# Runs on a home crucible ran in before (``migrated_home``): not about a first run.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("migrated_home")]


@pytest.fixture
def tool_venv(tmp_path: Path) -> Path:
    assert str(tmp_path).startswith("/tmp/"), "this test needs a temp dir under /tmp"
    venv = tmp_path / "toolenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    agent = venv / "bin" / "lower-agent"
    agent.write_text(
        f"#!{venv}/bin/python\nopen('src/value.txt', 'w').write('8\\n')\nprint('HYPOTHESIS: 8')\n"
    )
    agent.chmod(0o755)
    return venv


def test_an_agent_installed_under_tmp_runs_inside_the_sandbox(project: Project, tool_venv: Path) -> None:
    project.make()
    project.write_spec(agent={"command": "lower-agent"})
    env = {"PATH": f"{tool_venv / 'bin'}:{os.environ['PATH']}"}

    # The dry run in-process (``crucible loop --dry-run`` as a process: test_cli_contract.py).
    dry = project.cli_in_process("loop", "--spec", str(project.spec_path), "--dry-run", "--json", env=env)
    view = ok_run(project.loop(env=env))

    assert dry.code == 0 and dry.json["sandbox_problems"] == [], dry.describe()
    assert outcomes(view) == [("accepted", "improved")], view["turns"]


def test_a_program_the_sandbox_cannot_show_is_named_in_the_turn_and_by_dry_run(
    project: Project, tool_venv: Path
) -> None:
    agent = tool_venv / "bin" / "lower-agent"
    project.make()
    # The path comes from the environment at run time, so nothing can read it from the command.
    project.write_spec(agent={"command": '"$LOWER_AGENT"'}, metric={"command": "no-such-metric-tool"})
    env = {"LOWER_AGENT": str(agent)}

    # The dry run in-process (``crucible loop --dry-run`` as a process: test_cli_contract.py).
    dry = project.cli_in_process("loop", "--spec", str(project.spec_path), "--dry-run", env=env)
    project.write_spec(turns=3, agent={"command": '"$LOWER_AGENT"'})
    result = project.loop(env=env)

    assert dry.code == 0, dry.describe()
    assert "cannot start: metric: no-such-metric-tool: not found on PATH" in dry.stdout
    # Every turn would fail the same way: the run stops after the first, saying what to fix.
    assert result.code == 1 and isinstance(result.json, dict), result.describe()
    view = result.json
    assert outcomes(view) == [("failed", "agent_failed")]
    sentence = f"{agent} exists outside but is not visible inside the sandbox (bubblewrap"
    assert sentence in view["turns"][0]["detail"]
    assert view["stop_reason"] == "error" and sentence in view["message"]


def test_a_validation_that_cannot_start_names_the_path_in_the_baseline_failure(
    project: Project, tool_venv: Path
) -> None:
    tool = tool_venv / "bin" / "lower-agent"
    project.make()
    project.write_spec(validation={"command": '"$CHECKER"', "retries": 0})

    result = project.loop(env={"CHECKER": str(tool)})

    assert result.code == 1, result.describe()
    assert f"{tool} exists outside but is not visible inside the sandbox" in result.output

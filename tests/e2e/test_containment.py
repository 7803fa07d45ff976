"""Containment without a sandbox (issue 11, section 2), through the real CLI with ``sandbox.mode = "none"``.

Nothing stops an unsandboxed agent from writing its checkout's ``.git`` or from starting a daemon in a new
session. What must hold: crucible's own git never runs a program the repository configures (it would run
with the controller's environment), every change to a clone's ``.git`` is a ``policy_violation`` and is
undone, and no process a step started is alive when the next step begins.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.conftest import Project, assert_checkout_at, ok_run, outcomes

# Runs on a home crucible ran in before (``migrated_home``): not about a first run.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("migrated_home")]


def test_repository_configured_programs_never_run_and_git_changes_are_undone(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = f"E2ELEAK{secrets.token_hex(8)}"
    monkeypatch.setenv("CRUCIBLE_GITHUB_TOKEN", token)
    escaped = tmp_path / "escaped"
    escaped.mkdir()
    # Turn 1 improves the score and plants a fsmonitor, a filter driver, a post-commit hook and a branch;
    # turn 2 improves honestly, and its keep makes crucible commit (the hook would run then).
    agent = f"""\
if [ "$CRUCIBLE_TURN" = 1 ]; then
  echo 8 > src/value.txt
  git config core.fsmonitor "sh -c 'env > {escaped}/fsmonitor; false'"
  git config filter.evil.clean "sh -c 'env > {escaped}/filter; cat'"
  mkdir -p .git/info .git/hooks
  echo '* filter=evil' >> .git/info/attributes
  printf '#!/bin/sh\\nenv > {escaped}/hook\\n' > .git/hooks/post-commit
  chmod +x .git/hooks/post-commit
  git update-ref refs/heads/evil HEAD
else
  echo 7 > src/value.txt
fi
"""
    project.make(agent=agent)
    project.write_spec(turns=2, sandbox={"mode": "none"})

    view = ok_run(project.loop())

    assert outcomes(view) == [("rejected", "policy_violation"), ("accepted", "improved")], view["turns"]
    detail = view["turns"][0]["detail"]
    for planted in (".git/config", ".git/hooks/post-commit", ".git/info/attributes", ".git/refs/heads/evil"):
        assert planted in detail
    assert sorted(p.name for p in escaped.iterdir()) == [], "a repository-configured program ran"
    candidate = project.checkout(view["run_id"])
    config = (candidate / ".git" / "config").read_text()
    assert "fsmonitor" not in config and "evil" not in config
    assert not (candidate / ".git" / "hooks" / "post-commit").exists()
    assert "evil" not in git(candidate, "for-each-ref")
    assert_checkout_at(candidate, view["turns"][1]["commit"])


def test_nothing_a_step_started_outlives_it(project: Project, tmp_path: Path) -> None:
    pidfile = tmp_path / "escapee.pid"
    # A daemon in its own session that would rewrite the candidate after measurement; the agent waits
    # until it runs, so it surely exists when the agent's step ends.
    agent = f"""\
echo 8 > src/value.txt
setsid sh -c 'echo $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; sleep 60; echo 99 > src/value.txt' &
while [ ! -s {pidfile} ]; do sleep 0.01; done
"""
    project.make(agent=agent)
    project.write_spec(turns=1, sandbox={"mode": "none"})

    view = ok_run(project.loop())

    assert outcomes(view) == [("accepted", "improved")]
    pid = int(pidfile.read_text())
    alive = Path(f"/proc/{pid}").exists() and b") Z" not in Path(f"/proc/{pid}/stat").read_bytes()
    if alive:
        os.kill(pid, 9)
    assert not alive, "a process the agent started in its own session outlived the turn"
    assert (project.checkout(view["run_id"]) / "src" / "value.txt").read_text() == "8\n"


def test_network_off_without_a_sandbox_warns_when_mode_is_none(project: Project) -> None:
    project.make()
    project.write_spec(turns=1, sandbox={"mode": "none", "network": False})

    result = project.loop()

    ok_run(result)
    assert "network is not blocked" in result.stderr


@pytest.mark.parametrize("target", ["/etc/passwd", "/".join([".."] * 3 + [".ssh", "id_rsa"])])
def test_a_symlink_leaving_the_repository_is_a_policy_violation(project: Project, target: str) -> None:
    # issue 11 §4: such links were committed, and accept wrote them into the user's checkout.
    project.make(agent=f"echo 8 > src/value.txt\nln -s '{target}' src/x\n")
    project.write_spec(turns=1)

    view = ok_run(project.loop())

    assert outcomes(view) == [("rejected", "policy_violation")]
    assert "src/x: symlink leaving the repository" in view["turns"][0]["detail"]


def test_a_step_that_fills_the_disk_budget_is_stopped_while_it_runs(project: Project) -> None:
    # issue 11 §4: the disk budget was only checked between turns.
    agent = (
        "echo 8 > src/value.txt\nwhile true; do head -c 1000000 /dev/zero >> src/big.bin; sleep 0.05; done\n"
    )
    project.make(agent=agent)
    project.write_spec(turns=1, sandbox={"mode": "none"}, budget={"disk": "20MB"})

    result = project.loop()

    view = ok_run(result)
    assert outcomes(view) == [("failed", "cancelled")], view["turns"]
    assert "budget.disk" in view["turns"][0]["detail"]
    assert not (project.checkout(view["run_id"]) / "src" / "big.bin").exists()

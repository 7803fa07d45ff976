"""``crucible resume`` refuses, naming the mismatch, when continuing would not be the same run (issue 2,
deliverable 8): the spec's fingerprint changed, a component's base moved, or the controller still lives.
A refusal changes nothing; once the cause is undone the same run resumes to completion.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from controller.domain.enums import EventKind, RunStatus
from tests.conftest import git
from tests.recovery.conftest import (
    METRIC_COMMAND,
    Lab,
    Reference,
    assert_decided_once,
    is_running,
    projected,
    user_state,
)

pytestmark = pytest.mark.slow

_PROGRESS = {EventKind.TURN_STEP, EventKind.SAMPLE}


def _stored(lab: Lab, run_id: str) -> dict[str, Any]:
    """Everything about the run a refused resume must leave as it was. Not the running turn's progress
    events: a controller still alive writes them up to a second late (ADR-0046), and resume writes none."""
    with lab.store() as store:
        run = store.get_run(run_id)
        return {
            "run": (run.status, run.stop_reason, run.lease_owner, run.champion_value, run.updated_at),
            "turns": store.list_turns(run_id),
            "events": [(e.id, e.kind) for e in store.list_events(run_id) if e.kind not in _PROGRESS],
            "process_groups": lab.recorded_groups(run_id),
            "components": store.list_components(run_id),
        }


def _crashed_run(lab: Lab) -> str:
    """A run whose controller was killed (-9) while turn 2's agent ran."""
    lab.hang_at("agent:2")
    controller = lab.loop()
    run_id = controller.run_id()
    lab.wait_hung(controller)
    os.kill(controller.proc.pid, signal.SIGKILL)
    controller.proc.wait(timeout=30)
    return run_id


def test_resume_refuses_a_changed_spec_or_a_moved_base_and_changes_nothing(
    lab: Lab, reference: Reference, user_before: dict[str, Any]
) -> None:
    run_id = _crashed_run(lab)
    before = _stored(lab, run_id)
    assert before["run"][0] == RunStatus.RUNNING
    spec_text = lab.spec_path.read_text()

    lab.spec_path.write_text(spec_text.replace(METRIC_COMMAND, METRIC_COMMAND + " --fast"))
    refused = lab.cli("resume", run_id)
    assert refused.code == 1, refused.describe()
    assert "fingerprint" in refused.stderr and str(lab.spec_path) in refused.stderr, refused.describe()
    assert _stored(lab, run_id) == before

    lab.spec_path.write_text(spec_text)
    base = git(lab.repo, "rev-parse", "main")
    (lab.repo / "CHANGELOG").write_text("moved on\n")
    git(lab.repo, "add", "CHANGELOG")
    git(lab.repo, "commit", "-q", "-m", "the base moves on")
    moved = git(lab.repo, "rev-parse", "main")
    refused = lab.cli("resume", run_id)
    assert refused.code == 1, refused.describe()
    assert "app" in refused.stderr and "moved" in refused.stderr, refused.describe()
    assert base[:12] in refused.stderr and moved[:12] in refused.stderr, refused.describe()
    assert _stored(lab, run_id) == before

    git(lab.repo, "reset", "-q", "--hard", base)
    resumed = lab.cli("resume", run_id, "--json")
    assert resumed.code == 0, resumed.describe()
    assert projected(resumed.json) == reference.turns
    assert_decided_once(lab, run_id)
    assert user_state(lab.repo) == user_before


def test_resume_refuses_while_the_controller_is_alive(lab: Lab, user_before: dict[str, Any]) -> None:
    lab.hang_at("agent:2")
    controller = lab.loop()
    run_id = controller.run_id()
    hung = lab.wait_hung(controller)
    before = _stored(lab, run_id)
    assert f":{controller.proc.pid}:" in before["run"][2], "the controller holds the run's lease"

    refused = lab.cli("resume", run_id)

    assert refused.code == 1, refused.describe()
    assert "still running" in refused.stderr and str(controller.proc.pid) in refused.stderr, (
        refused.describe()
    )
    assert _stored(lab, run_id) == before
    assert controller.proc.poll() is None, "the refused resume disturbed the live controller"
    assert is_running(hung), "the refused resume killed the live controller's agent"
    assert user_state(lab.repo) == user_before

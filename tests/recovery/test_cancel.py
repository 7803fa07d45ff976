"""Ctrl-C (issue 2, deliverable 6): SIGINT while the agent runs kills the agent's whole process group,
restores the candidate, records the run ``cancelled`` and exits 130; ``crucible resume`` then continues the
cancelled run to completion.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from tests.recovery.conftest import (
    Lab,
    Reference,
    assert_checkout_clean_at,
    assert_decided_once,
    pgid_of,
    projected,
    running_members,
    user_state,
)

pytestmark = pytest.mark.slow


def test_ctrl_c_cancels_cleanly_and_resume_continues(
    lab: Lab, reference: Reference, user_before: dict[str, Any]
) -> None:
    lab.hang_at("agent:2")
    controller = lab.loop()
    run_id = controller.run_id()
    hung = lab.wait_hung(controller)
    agent_group = pgid_of(hung)

    os.killpg(controller.proc.pid, signal.SIGINT)  # what a terminal sends to its foreground group
    result = controller.finish()

    assert result.code == 130, result.describe()
    view = result.json
    assert (view["status"], view["stop_reason"]) == ("cancelled", "cancelled"), result.describe()
    assert running_members(agent_group) == [], "a process of the cancelled agent survived"
    turns = projected(view)
    assert [t["turn"] for t in turns] == [1, 2], "turn 2 is decided (cancelled) and nothing runs after it"
    assert turns[0] == reference.turns[0]
    assert (turns[1]["outcome"], turns[1]["reason"]) == ("failed", "cancelled")
    champion = view["turns"][0]["commit"]
    assert view["components"][0]["head_sha"] == champion
    assert_checkout_clean_at(lab.checkout(run_id, "candidate"), champion)
    assert (lab.checkout(run_id, "candidate") / "src" / "value.txt").read_text() == "9\n"
    assert lab.recorded_groups(run_id) == []
    with lab.store() as store:
        assert store.get_run(run_id).controller_pid is None

    resumed = lab.cli("resume", run_id, "--json")

    assert resumed.code == 0, resumed.describe()
    final = resumed.json
    assert (final["status"], final["stop_reason"]) == ("completed", "max_turns"), resumed.describe()
    assert projected(final)[2:] == reference.turns[2:]
    assert projected(final)[:2] == turns
    patch = lab.cli("patch", run_id)
    assert patch.stdout == reference.patch, "turn 2 was a rejection anyway: the result is the same"
    assert_decided_once(lab, run_id)
    assert_checkout_clean_at(lab.checkout(run_id, "candidate"), final["components"][0]["head_sha"])
    assert user_state(lab.repo) == user_before

"""Ctrl-C (issue 2, deliverable 6): SIGINT while the agent runs kills the agent's whole process group,
restores the candidate, records the run ``cancelled`` and exits 130; ``crucible resume`` then continues the
cancelled run to completion.
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from typing import Any

import pytest

from controller.store import Store
from tests.recovery.conftest import (
    Lab,
    Reference,
    assert_checkout_clean_at,
    assert_decided_once,
    is_running,
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
        assert store.get_run(run_id).lease_owner is None, "the lease was handed back"

    resumed = lab.cli("resume", run_id, "--json")

    assert resumed.code == 0, resumed.describe()
    final = resumed.json
    assert (final["status"], final["stop_reason"]) == ("completed", "max_turns"), resumed.describe()
    assert projected(final)[2:] == reference.turns[2:]
    assert projected(final)[:2] == turns
    assert lab.patch(run_id) == reference.patch, "turn 2 was a rejection anyway: the result is the same"
    assert_decided_once(lab, run_id)
    assert_checkout_clean_at(lab.checkout(run_id, "candidate"), final["components"][0]["head_sha"])
    assert user_state(lab.repo) == user_before


def test_cancel_from_another_process_reaches_the_controller_through_its_lease(
    lab: Lab, user_before: dict[str, Any]
) -> None:
    """``crucible cancel`` signals nothing (the controller may be on another host): it sets the run's
    cancel flag, which the controller's heartbeat reads; the agent's group dies, the run ends cancelled."""
    lab.hang_at("agent:2")
    controller = lab.loop()
    run_id = controller.run_id()
    hung = lab.wait_hung(controller)
    agent_group = pgid_of(hung)

    asked = lab.cli("cancel", run_id)

    assert asked.code == 0, asked.describe()
    assert "cancel requested" in asked.stdout and str(controller.proc.pid) in asked.stdout, asked.describe()
    result = controller.finish()  # bounded by the CLI timeout; the heartbeat comes every second
    assert result.code == 130, result.describe()
    assert (result.json["status"], result.json["stop_reason"]) == ("cancelled", "cancelled")
    assert running_members(agent_group) == []
    with lab.store() as store:
        run = store.get_run(run_id)
        assert (run.lease_owner, run.cancel_requested) == (None, False)
    assert_decided_once(lab, run_id, turns=2)
    assert user_state(lab.repo) == user_before


def test_a_cancel_requested_while_a_dead_controllers_lease_lasts_is_honoured_by_the_takeover(
    lab: Lab,
) -> None:
    lab.env["CRUCIBLE_LEASE_TTL"] = "1h"  # the dead controller's lease outlasts the test
    lab.hang_at("agent:2")
    controller = lab.loop()
    run_id = controller.run_id()
    hung = lab.wait_hung(controller)
    os.kill(controller.proc.pid, signal.SIGKILL)
    controller.proc.wait(timeout=30)

    asked = lab.cli("cancel", run_id)

    assert asked.code == 0 and "cancel requested" in asked.stdout, asked.describe()
    with lab.store() as store:
        run = store.get_run(run_id)
        assert (run.status, run.cancel_requested) == ("running", True)
        holder, expires = run.lease_owner, run.lease_expires_at
    assert holder is not None and expires is not None
    # An hour later (the store's clock, not a sleep) someone takes the run over and hands it back.
    with Store.open(lab.database_url, clock=lambda: expires + timedelta(seconds=1)) as later:
        later.claim_run(run_id, "a-scheduler", 5)
        assert later.release_lease(run_id, "a-scheduler")

    resumed = lab.cli("resume", run_id, "--json")

    assert resumed.code == 130, resumed.describe()
    assert (resumed.json["status"], resumed.json["stop_reason"]) == ("cancelled", "cancelled")
    assert not is_running(hung), "the takeover killed what the dead controller left"
    again = lab.cli("cancel", run_id)
    assert again.code == 1 and "already finished" in again.stderr, again.describe()

"""``kill -9`` of the controller at chosen points of a turn, then ``crucible resume`` (issue 2, item 8).

A resumed run must end exactly where an uninterrupted one ends (same turns, same final patch), with every
turn decided once, the leftover process group of the dead controller killed before anything else runs, the
run's checkouts reconciled, and the user's checkout untouched.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from typing import Any

import pytest

from controller.domain.enums import RunStatus, TurnPhase
from tests.recovery.conftest import (
    TURNS,
    Lab,
    Reference,
    assert_checkout_clean_at,
    assert_decided_once,
    assert_kept_commits_in_history,
    is_running,
    pgid_of,
    projected,
    running_members,
    user_state,
)

pytestmark = pytest.mark.slow

# where the armed command hangs -> the turn that is cut off (0: the baseline)
POINTS = {
    "a-agent": "agent:3",
    "b-candidate-metric": "metric:3",
    "c-baseline": "metric:0",
    "d-after-keep": "agent:2",  # turn 1 was just kept: the kept commit must survive the crash
}


def _kill_controller_while_hung(lab: Lab, where: str) -> tuple[str, int]:
    """Start the loop, wait until ``where`` hangs, SIGKILL the controller alone; return (run id, hung pid)."""
    lab.hang_at(where)
    controller = lab.loop()
    run_id = controller.run_id()
    hung = lab.wait_hung(controller)
    os.kill(controller.proc.pid, signal.SIGKILL)
    assert controller.proc.wait(timeout=30) == -signal.SIGKILL
    assert is_running(hung), "a kill -9 of the controller leaves its command running (the premise)"
    return run_id, hung


def _turn_started_counts(stream: list[dict[str, Any]]) -> Counter[int]:
    return Counter(e["turn"] for e in stream if e["kind"] == "turn_started")


@pytest.mark.parametrize(
    ("point", "backend"),
    [
        pytest.param("a-agent", "sqlite", id="a-agent-sqlite"),
        pytest.param("a-agent", "postgresql", id="a-agent-postgresql", marks=pytest.mark.postgres),
        pytest.param("b-candidate-metric", "sqlite", id="b-candidate-metric"),
        pytest.param("c-baseline", "sqlite", id="c-baseline"),
        pytest.param("d-after-keep", "sqlite", id="d-after-keep"),
    ],
)
def test_kill_9_then_resume_ends_like_an_uninterrupted_run(
    lab: Lab,
    reference: Reference,
    user_before: dict[str, Any],
    request: pytest.FixtureRequest,
    point: str,
    backend: str,
) -> None:
    if backend == "postgresql":
        # At the schema's head already: ``crucible db upgrade`` on PostgreSQL is test_cli_contract's.
        lab.env["CRUCIBLE_DATABASE_URL"] = request.getfixturevalue("migrated_postgres_url")
    where = POINTS[point]
    cut_turn = int(where.split(":")[1])

    run_id, hung = _kill_controller_while_hung(lab, where)
    with lab.store() as store:
        assert store.get_run(run_id).status == RunStatus.RUNNING
        decided = [t.number for t in store.list_turns(run_id) if t.phase == TurnPhase.DECIDED]
        component = store.list_components(run_id)[0]
    assert decided == list(range(1, cut_turn)), "the cut-off turn must not be decided yet"
    if point == "d-after-keep":
        assert component.head_sha != component.base_sha, "turn 1's keep is recorded before the crash"
    lab.lease_runs_out(run_id)  # the store's clock, not a 3 s wait (the wait: the tests below)

    resumed = lab.cli("resume", run_id, "--json")

    assert resumed.code == 0, resumed.describe()
    view = resumed.json
    assert (view["status"], view["stop_reason"]) == ("completed", "max_turns"), resumed.describe()
    assert projected(view) == reference.turns
    assert lab.patch(run_id) == reference.patch
    candidate = lab.checkout(run_id, "candidate")
    assert_kept_commits_in_history(candidate, view)
    if point == "d-after-keep":
        assert view["turns"][0]["commit"] == component.head_sha, (
            "the commit kept before the crash was replaced"
        )

    stream = assert_decided_once(lab, run_id)
    expected_starts = {n: 1 for n in range(1, TURNS + 1)}
    if cut_turn:
        expected_starts[cut_turn] = 2  # the cut-off turn ran again from its start
    assert _turn_started_counts(stream) == expected_starts

    assert not is_running(hung)
    witness = lab.witness()
    assert witness, "nothing ran after the resume?"
    assert all(line.endswith(" dead") for line in witness), f"the hung command outlived resume: {witness}"
    champion = view["components"][0]["head_sha"]
    assert_checkout_clean_at(candidate, champion)
    assert_checkout_clean_at(lab.checkout(run_id, "champion"), champion)
    assert user_state(lab.repo) == user_before


def test_resume_first_kills_the_process_group_the_dead_controller_left(
    lab: Lab, user_before: dict[str, Any]
) -> None:
    run_id, hung = _kill_controller_while_hung(lab, "agent:2")
    group = pgid_of(hung)
    assert running_members(group), "the agent's group runs on after the controller died"
    recorded = [pgid for pgid, _command in lab.recorded_groups(run_id)]
    assert recorded == [group], "the running agent's process group is on record"
    assert lab.witness() == []

    resumed = lab.cli("resume", run_id, "--json")

    assert resumed.code == 0, resumed.describe()
    assert running_members(group) == [], "resume left the dead controller's agent running"
    # The re-run of turn 2 and every later command saw the hung agent already dead.
    witness = lab.witness()
    assert witness[0] == "agent:2 dead", witness
    assert all(line.endswith(" dead") for line in witness), witness
    stream = assert_decided_once(lab, run_id)
    resumed_events = [e for e in stream if e["kind"] == "resumed"]
    assert [e["killed_process_groups"] for e in resumed_events] == [1]
    after_resume = stream[stream.index(resumed_events[0]) + 1 :]
    assert after_resume[0]["kind"] == "turn_started" and after_resume[0]["turn"] == 2
    assert lab.recorded_groups(run_id) == []
    assert user_state(lab.repo) == user_before


def test_resume_spares_a_recorded_group_that_is_no_longer_the_runs(lab: Lab) -> None:
    run_id, _hung = _kill_controller_while_hung(lab, "agent:2")
    # Simulate pid reuse after a reboot: the store names a group that now belongs to someone else.
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        with lab.store() as store:
            store.record_process_group(run_id, stranger.pid, "sh tools/agent.sh")

        resumed = lab.cli("resume", run_id, "--json")

        assert resumed.code == 0, resumed.describe()
        assert stranger.poll() is None, "resume killed a process that was never the run's"
    finally:
        stranger.kill()
        stranger.wait()

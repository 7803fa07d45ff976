"""RoundJob: immutable, JSON round-trips exactly, and bad JSON is refused naming the field."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from controller.domain.errors import ConflictError, SpecError
from controller.domain.jobs import (
    ROUND_TRANSITIONS,
    HoldRule,
    RoundJob,
    RoundKind,
    RoundState,
    check_round_transition,
)

REFINE = RoundJob(
    run_id="r1",
    round=2,
    turns=3,
    first_turn=11,
    heads={"app": "a" * 40, "lib": "b" * 40},
    steer="@bob on src/a.py:3:\n> keep it stable",
    feedback_ids=(4, 5),
    hold=HoldRule(tolerance=0.01, relative=True, first_published=101.5),
    attempt=1,
)


def test_a_job_round_trips_through_json_text() -> None:
    text = json.dumps(REFINE.to_json())
    back = RoundJob.from_json(json.loads(text))
    assert back == REFINE
    assert back.kind is RoundKind.REFINEMENT and back.key == ("r1", 2) and back.launch_key == ("r1", 2, 1)
    search = RoundJob(run_id="r1", round=0, turns=5, first_turn=1, heads={"app": "a" * 40})
    assert RoundJob.from_json(json.loads(json.dumps(search.to_json()))) == search
    assert search.kind is RoundKind.SEARCH and search.to_json()["hold"] is None


def test_a_job_is_frozen_all_the_way_down() -> None:
    with pytest.raises(FrozenInstanceError):
        REFINE.turns = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        REFINE.heads["app"] = "c" * 40  # type: ignore[index]
    source = {"app": "a" * 40}
    job = RoundJob(run_id="r1", round=0, turns=1, first_turn=1, heads=source)
    source["app"] = "z" * 40
    assert job.heads["app"] == "a" * 40, "the job copied the heads it was given"
    assert hash(job.launch_key) == hash(("r1", 0, 0))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"round": -1}, "round"),
        ({"turns": "3"}, "turns"),
        ({"turns": True}, "turns"),
        ({"first_turn": 0}, "first_turn"),
        ({"attempt": -1}, "attempt"),
        ({"attempt": "1"}, "attempt"),
        ({"heads": {"app": 7}}, "heads.app"),
        ({"hold": {"tolerance": 0.1, "relative": "yes", "first_published": 1.0}}, "hold.relative"),
        ({"hold": {"relative": True, "first_published": 1.0}}, "hold.tolerance"),
        ({"feedback_ids": [1, "2"]}, "feedback_ids"),
        ({"schema": 99}, "schema"),
        ({"kind": "search"}, "kind"),
    ],
)
def test_bad_json_names_the_field(change: dict[str, Any], field: str) -> None:
    data = {**REFINE.to_json(), **change}
    with pytest.raises(SpecError) as err:
        RoundJob.from_json(data)
    assert err.value.key == field


def test_a_missing_field_is_named() -> None:
    data = REFINE.to_json()
    del data["run_id"]
    with pytest.raises(SpecError, match="run_id: is required"):
        RoundJob.from_json(data)


def test_a_job_written_before_attempts_existed_is_a_first_attempt() -> None:
    data = REFINE.to_json()
    del data["attempt"]
    assert RoundJob.from_json(data).attempt == 0


def test_round_zero_never_holds() -> None:
    with pytest.raises(SpecError) as err:
        RoundJob(run_id="r", round=0, turns=1, first_turn=1, heads={}, hold=REFINE.hold)
    assert err.value.key == "hold"


def test_round_states_move_forward_only() -> None:
    finished = [s for s, nxt in ROUND_TRANSITIONS.items() if not nxt]
    assert set(finished) == {RoundState.SUCCEEDED, RoundState.FAILED, RoundState.CANCELLED}
    check_round_transition(RoundState.PENDING, RoundState.RUNNING)
    for state in finished:
        with pytest.raises(ConflictError):
            check_round_transition(state, RoundState.RUNNING)

"""Stop rules: the first spent budget wins, and every stop is explained in one sentence."""

from __future__ import annotations

import pytest

from controller.domain.enums import Direction, StopReason
from controller.engine.stopping import Budgets, Progress, check_stop, explain_stop, reached


def _progress(**kw: object) -> Progress:
    base: dict[str, object] = dict(
        turns_done=0,
        elapsed_s=0.0,
        cost_usd=0.0,
        tokens=0,
        disk_bytes=None,
        consecutive_failures=0,
        champion_value=None,
        direction=Direction.MINIMIZE,
    )
    base.update(kw)
    return Progress(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("budgets", "progress", "expected"),
    [
        (Budgets(turns=3), _progress(turns_done=2), None),
        (Budgets(turns=3), _progress(turns_done=3), StopReason.MAX_TURNS),
        (Budgets(turns=9, wall_clock_s=10), _progress(elapsed_s=10.0), StopReason.WALL_CLOCK),
        (Budgets(turns=9, cost_usd=1.0), _progress(cost_usd=1.2), StopReason.COST),
        (Budgets(turns=9, tokens=100), _progress(tokens=100), StopReason.TOKENS),
        (Budgets(turns=9, disk_bytes=10), _progress(disk_bytes=11), StopReason.DISK),
        (
            Budgets(turns=9, max_consecutive_failures=2),
            _progress(consecutive_failures=2),
            StopReason.CONSECUTIVE_FAILURES,
        ),
        (Budgets(turns=9, target=5.0), _progress(champion_value=4.9), StopReason.TARGET_REACHED),
        (Budgets(turns=9, target=5.0), _progress(champion_value=5.1), None),
    ],
)
def test_check_stop(budgets: Budgets, progress: Progress, expected: StopReason | None) -> None:
    assert check_stop(budgets, progress) == expected


def test_target_is_direction_aware() -> None:
    assert reached(Direction.MAXIMIZE, 81.0, 80.0)
    assert not reached(Direction.MAXIMIZE, 79.0, 80.0)
    assert not reached(Direction.MINIMIZE, None, 80.0)


def test_turn_budget_message_matches_design() -> None:
    text = explain_stop(
        StopReason.MAX_TURNS, Budgets(turns=20), _progress(turns_done=20, champion_value=101.5)
    )
    assert text == "stopped: turn budget spent (20/20); the search was not exhausted; best 101.5"


def test_every_stop_reason_has_an_explanation() -> None:
    for reason in StopReason:
        assert explain_stop(reason, Budgets(turns=1), _progress()).startswith("stopped: ")

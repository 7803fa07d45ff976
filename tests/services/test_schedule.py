"""The measurement schedule: warmups first, then an order in which a linear drift cancels."""

from __future__ import annotations

from controller.domain.enums import SampleArm
from controller.services.execution.measure import schedule

A, B, C = SampleArm.CHAMPION, SampleArm.CANDIDATE, SampleArm.BASE


def test_two_arms_warmups_first_then_abba() -> None:
    order = schedule([A, B], samples=4, warmups=1)
    assert order[:2] == [(A, True), (B, True)]
    assert [arm for arm, warm in order[2:]] == [A, B, B, A, A, B, B, A]
    assert not any(warm for _, warm in order[2:])


def test_abba_order_cancels_a_linear_drift() -> None:
    order = [arm for arm, warm in schedule([A, B], samples=4, warmups=0)]
    mean_pos = {arm: sum(i for i, a in enumerate(order) if a == arm) / order.count(arm) for arm in (A, B)}
    assert mean_pos[A] == mean_pos[B]


def test_single_arm_and_three_arms() -> None:
    assert schedule([A], samples=3, warmups=0) == [(A, False)] * 3
    three = [arm for arm, _ in schedule([A, B, C], samples=2, warmups=0)]
    assert three == [A, B, C, C, B, A]

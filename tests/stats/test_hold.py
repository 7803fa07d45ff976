"""The refinement-round rule: hold the score against the PR head and against the first published score."""

from __future__ import annotations

from controller.config.units import Tolerance
from controller.domain.enums import Direction, Reason
from controller.stats import Arm, GuardRule, KeepRule, decide_hold

HOLD = Tolerance(0.01, relative=True)
RULE = KeepRule(direction=Direction.MINIMIZE)


def _arm(*values: float, rss: float | None = None) -> Arm:
    guards = {} if rss is None else {"rss": tuple(rss for _ in values)}
    return Arm(primary=tuple(values), guards=guards)


def test_a_slightly_worse_candidate_holds_within_hold() -> None:
    verdict = decide_hold(RULE, HOLD, _arm(100.5, 100.5, 100.5), _arm(100.0, 100.0, 100.0), 100.0)
    assert verdict.keep and verdict.reason is Reason.IMPROVED


def test_worse_than_hold_against_the_pr_head_is_not_kept() -> None:
    verdict = decide_hold(RULE, HOLD, _arm(101.5, 101.5), _arm(100.0, 100.0), 100.0)
    assert not verdict.keep and "PR head" in verdict.detail


def test_five_rounds_each_losing_a_little_cannot_lose_more_than_hold_in_total() -> None:
    first = 100.0
    head = first
    kept = []
    for _ in range(5):
        candidate = head * 1.009  # each round loses a little less than the 1% hold against its PR head
        verdict = decide_hold(RULE, HOLD, _arm(candidate), _arm(head), first)
        kept.append(verdict.keep)
        if verdict.keep:
            head = candidate
    assert kept == [True, False, False, False, False]
    assert head <= first * 1.01


def test_guards_still_apply_in_rounds() -> None:
    rule = KeepRule(
        direction=Direction.MINIMIZE, guards=(GuardRule("rss", Direction.MINIMIZE, Tolerance(0.05, True)),)
    )
    verdict = decide_hold(rule, HOLD, _arm(99.0, rss=120.0), _arm(100.0, rss=100.0), 100.0)
    assert not verdict.keep and verdict.reason is Reason.GUARD_REGRESSED

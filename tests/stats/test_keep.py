"""The keep rule of docs/keep-rule.md, reason by reason, the guard-vs-base rule, and "holding the score"."""

from __future__ import annotations

import dataclasses

import pytest

import controller.stats
from controller.domain.enums import Direction, Reason
from controller.stats import (
    Arm,
    GuardRule,
    KeepRule,
    Tolerance,
    decide_keep,
    guard_check,
    holds_score,
    median,
    needs_base_arm,
)

MIN = Direction.MINIMIZE
MAX = Direction.MAXIMIZE
RSS_5PCT = GuardRule("rss_mb", MIN, Tolerance(0.05, relative=True))


def arm(primary: list[float], **guards: list[float]) -> Arm:
    return Arm(primary=tuple(primary), guards={name: tuple(values) for name, values in guards.items()})


def test_public_api_is_exported() -> None:
    for name in (
        "Arm",
        "GuardRule",
        "KeepRule",
        "KeepVerdict",
        "Tolerance",
        "decide_keep",
        "guard_check",
        "holds_score",
        "interleaved_order",
        "mann_whitney_less_p",
        "median",
        "needs_base_arm",
    ):
        assert name in controller.stats.__all__
        assert hasattr(controller.stats, name)


# --- small pieces -------------------------------------------------------------------------------------


def test_median_of_odd_and_even_counts() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([7.0]) == 7.0


@pytest.mark.parametrize("values", [[], [1.0, float("nan")]])
def test_median_rejects_empty_or_non_finite(values: list[float]) -> None:
    with pytest.raises(ValueError):
        median(values)


def test_tolerance_allowance_relative_and_absolute() -> None:
    assert Tolerance(0.05, relative=True).allowed(200.0) == pytest.approx(10.0)
    assert Tolerance(0.05, relative=True).allowed(-200.0) == pytest.approx(10.0)
    assert Tolerance(3.0, relative=False).allowed(200.0) == 3.0
    assert str(Tolerance(0.05, relative=True)) == "5%"
    assert str(Tolerance(2.5, relative=False)) == "2.5"


def test_tolerance_is_the_config_layers_own() -> None:
    from controller.config.units import Tolerance as ConfigTolerance

    assert Tolerance is ConfigTolerance


@pytest.mark.parametrize(
    "kwargs",
    [
        {"confidence": 1.0},
        {"confidence": -0.1},
        {"min_improvement": float("inf")},
        {"guards": (RSS_5PCT, RSS_5PCT)},
    ],
)
def test_keep_rule_rejects_bad_thresholds(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        KeepRule(MIN, **kwargs)  # type: ignore[arg-type]


def test_rules_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        KeepRule(MIN).confidence = 0.5  # type: ignore[misc]


def test_base_arm_is_needed_only_with_guards() -> None:
    assert not needs_base_arm(KeepRule(MIN))
    assert needs_base_arm(KeepRule(MIN, guards=(RSS_5PCT,)))


# --- each reason ----------------------------------------------------------------------------------------


def test_improved_when_minimizing() -> None:
    verdict = decide_keep(KeepRule(MIN), arm([1.0, 2.0, 3.0]), arm([4.0, 5.0, 6.0]))
    assert verdict.keep
    assert verdict.reason is Reason.IMPROVED
    assert (verdict.candidate_median, verdict.champion_median, verdict.delta) == (2.0, 5.0, 3.0)
    assert verdict.p_value == 0.05
    assert verdict.guard_failures == ()
    assert verdict.detail.startswith("Kept:")


def test_improved_when_maximizing() -> None:
    verdict = decide_keep(KeepRule(MAX), arm([14.0, 15.0, 16.0]), arm([4.0, 5.0, 6.0]))
    assert verdict.keep
    assert verdict.delta == 10.0
    assert verdict.p_value == 0.05


def test_a_larger_value_is_not_improved_when_minimizing_and_p_is_still_reported() -> None:
    verdict = decide_keep(KeepRule(MIN), arm([14.0, 15.0, 16.0]), arm([4.0, 5.0, 6.0]))
    assert not verdict.keep
    assert verdict.reason is Reason.NOT_IMPROVED
    assert verdict.delta == -10.0
    assert verdict.p_value == 1.0
    assert "Not kept" in verdict.detail


def test_equal_medians_are_not_improved() -> None:
    verdict = decide_keep(KeepRule(MIN, confidence=0.0), arm([5.0, 5.0, 5.0]), arm([5.0, 5.0, 5.0]))
    assert verdict.reason is Reason.NOT_IMPROVED
    assert verdict.p_value is None


def test_improvement_must_be_strictly_greater_than_min_improvement() -> None:
    candidate, champion = arm([1.0, 2.0, 3.0]), arm([4.0, 5.0, 6.0])  # delta exactly 3.0
    assert decide_keep(KeepRule(MIN, min_improvement=3.0), candidate, champion).reason is Reason.NOT_IMPROVED
    assert decide_keep(KeepRule(MIN, min_improvement=2.999), candidate, champion).reason is Reason.IMPROVED


def test_overlapping_samples_are_not_significant() -> None:
    verdict = decide_keep(KeepRule(MIN), arm([1.0, 2.0, 5.0, 3.5]), arm([3.0, 4.0, 6.0, 2.5]))
    assert verdict.delta > 0
    assert verdict.p_value is not None and verdict.p_value > 0.05
    assert verdict.reason is Reason.NOT_SIGNIFICANT
    assert not verdict.keep
    assert "noise" in verdict.detail


def test_p_equal_to_one_minus_confidence_passes_for_decimal_confidences() -> None:
    candidate, champion = arm([1.0, 2.0, 4.0]), arm([3.0, 5.0, 6.0])  # exact p = 2/20
    assert decide_keep(KeepRule(MIN, confidence=0.9), candidate, champion).reason is Reason.IMPROVED
    assert decide_keep(KeepRule(MIN, confidence=0.95), candidate, champion).reason is Reason.NOT_SIGNIFICANT


def test_confidence_zero_disables_the_test() -> None:
    verdict = decide_keep(KeepRule(MIN, confidence=0.0), arm([1.0, 2.0, 5.0]), arm([3.0, 4.0, 6.0]))
    assert verdict.p_value is None
    assert verdict.reason is Reason.IMPROVED
    assert "no significance test" in verdict.detail


@pytest.mark.parametrize(("n_candidate", "n_champion"), [(2, 5), (5, 2), (1, 1)])
def test_fewer_than_three_samples_a_side_skips_the_test(n_candidate: int, n_champion: int) -> None:
    verdict = decide_keep(KeepRule(MIN), arm([1.0] * n_candidate), arm([2.0] * n_champion))
    assert verdict.p_value is None
    assert verdict.keep


def test_guard_regressed_against_the_champion() -> None:
    rule = KeepRule(MIN, guards=(RSS_5PCT,))
    verdict = decide_keep(
        rule,
        arm([1.0, 2.0, 3.0], rss_mb=[112.0, 112.0, 112.0]),
        arm([4.0, 5.0, 6.0], rss_mb=[100.0, 100.0, 100.0]),
    )
    assert verdict.reason is Reason.GUARD_REGRESSED
    assert not verdict.keep
    assert verdict.guard_failures == ("rss_mb: 112 vs champion 100 (tolerance 5%)",)
    assert "rss_mb: 112 vs champion 100" in verdict.detail


def test_guard_within_tolerance_passes_and_boundary_is_allowed() -> None:
    rule = KeepRule(MIN, guards=(GuardRule("rss_mb", MIN, Tolerance(5.0, relative=False)),))
    verdict = decide_keep(
        rule, arm([1.0, 2.0, 3.0], rss_mb=[105.0] * 3), arm([4.0, 5.0, 6.0], rss_mb=[100.0] * 3)
    )
    assert verdict.reason is Reason.IMPROVED


def test_guard_regressed_against_the_base_only() -> None:
    rule = KeepRule(MIN, guards=(RSS_5PCT,))
    candidate = arm([1.0, 2.0, 3.0], rss_mb=[112.0] * 3)
    champion = arm([4.0, 5.0, 6.0], rss_mb=[108.0] * 3)
    base = arm([9.0, 9.0, 9.0], rss_mb=[100.0] * 3)
    assert decide_keep(rule, candidate, champion).reason is Reason.IMPROVED
    verdict = decide_keep(rule, candidate, champion, base)
    assert verdict.reason is Reason.GUARD_REGRESSED
    assert verdict.guard_failures == ("rss_mb: 112 vs base 100 (tolerance 5%)",)


def test_guard_direction_maximize_with_absolute_tolerance() -> None:
    throughput = GuardRule("rps", MAX, Tolerance(10.0, relative=False))
    rule = KeepRule(MIN, guards=(throughput,))
    champion = arm([4.0, 5.0, 6.0], rps=[1000.0] * 3)
    assert guard_check(rule, arm([1.0], rps=[991.0]), champion, None) == ()
    assert guard_check(rule, arm([1.0], rps=[2000.0]), champion, None) == ()
    assert guard_check(rule, arm([1.0], rps=[989.0]), champion, None) == (
        "rps: 989 vs champion 1000 (tolerance 10)",
    )


def test_guard_uses_medians_not_single_samples() -> None:
    rule = KeepRule(MIN, guards=(RSS_5PCT,))
    spiky = arm([1.0, 2.0, 3.0], rss_mb=[100.0, 100.0, 300.0])
    assert guard_check(rule, spiky, arm([4.0, 5.0, 6.0], rss_mb=[100.0, 101.0, 99.0]), None) == ()


def test_missing_guard_samples_are_an_error() -> None:
    rule = KeepRule(MIN, guards=(RSS_5PCT,))
    with pytest.raises(ValueError, match="rss_mb"):
        decide_keep(rule, arm([1.0, 2.0, 3.0]), arm([4.0, 5.0, 6.0], rss_mb=[100.0] * 3))


def test_not_improved_is_reported_before_not_significant_and_guards() -> None:
    rule = KeepRule(MIN, guards=(RSS_5PCT,))
    verdict = decide_keep(
        rule, arm([5.0, 6.0, 4.0], rss_mb=[200.0] * 3), arm([5.0, 4.0, 6.0], rss_mb=[100.0] * 3)
    )
    assert verdict.reason is Reason.NOT_IMPROVED
    assert verdict.p_value is not None and verdict.p_value > 0.05
    assert verdict.guard_failures  # still reported


def test_not_significant_is_reported_before_guards() -> None:
    rule = KeepRule(MIN, guards=(RSS_5PCT,))
    verdict = decide_keep(
        rule, arm([1.0, 2.0, 5.0], rss_mb=[200.0] * 3), arm([3.0, 4.0, 6.0], rss_mb=[100.0] * 3)
    )
    assert verdict.reason is Reason.NOT_SIGNIFICANT
    assert verdict.guard_failures == ("rss_mb: 200 vs champion 100 (tolerance 5%)",)


def test_five_small_regressions_that_each_pass_against_the_champion_add_up_against_the_base() -> None:
    """Each turn improves the primary metric and grows rss by 4% over the champion (tolerance 5%)."""
    rule = KeepRule(MIN, guards=(RSS_5PCT,))
    base = arm([100.0, 101.0, 99.0], rss_mb=[100.0, 100.0, 100.0])

    def five_turns(with_base: bool) -> tuple[list[bool], Arm]:
        champion, kept = base, []
        for step in range(1, 6):
            primary = [v - 10.0 * step for v in (100.0, 101.0, 99.0)]
            rss = median(champion.guards["rss_mb"]) * 1.04
            candidate = arm(primary, rss_mb=[rss] * 3)
            assert guard_check(rule, candidate, champion, None) == ()  # passes against the champion
            verdict = decide_keep(rule, candidate, champion, base if with_base else None)
            kept.append(verdict.keep)
            if verdict.keep:
                champion = candidate
        return kept, champion

    kept_without_base, drifted = five_turns(with_base=False)
    assert kept_without_base == [True] * 5
    assert median(drifted.guards["rss_mb"]) > 120.0  # 1.04 ** 5: the regressions added up

    kept_with_base, champion = five_turns(with_base=True)
    # Step 2 would reach 1.04 ** 2 = +8.2% over the base; it and every later step are refused.
    assert kept_with_base == [True, False, False, False, False]
    assert median(champion.guards["rss_mb"]) <= 105.0


# --- holding the score ------------------------------------------------------------------------------


def test_holds_score_minimize() -> None:
    hold = Tolerance(0.01, relative=True)
    assert holds_score(MIN, [100.5, 101.0, 100.0], [100.0, 100.0, 100.0], hold)
    assert holds_score(MIN, [90.0], [100.0], hold)
    assert not holds_score(MIN, [101.5, 101.5, 101.5], [100.0, 100.0, 100.0], hold)


def test_holds_score_maximize_and_absolute() -> None:
    hold = Tolerance(2.0, relative=False)
    assert holds_score(MAX, [48.0], [50.0, 50.0], hold)
    assert holds_score(MAX, [70.0], [50.0], hold)
    assert not holds_score(MAX, [47.5], [50.0], hold)

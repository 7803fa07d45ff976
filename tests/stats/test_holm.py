"""The parallel keep rule: Holm's step-down levels, the choice of one candidate, and its error rate."""

from __future__ import annotations

import random

import pytest

from controller.domain.enums import Direction, Reason
from controller.stats import Arm, KeepRule, decide_keep, interleaved_order
from controller.stats.holm import Contender, choose, holm_levels
from controller.stats.keep import KeepVerdict

RULE = KeepRule(direction=Direction.MINIMIZE, confidence=0.95)


def verdict(
    delta: float, p: float | None, *, keep: bool = True, reason: Reason = Reason.IMPROVED
) -> KeepVerdict:
    return KeepVerdict(keep, reason, 100.0 - delta, 100.0, delta, p, (), f"verdict {delta}")


def test_holm_levels_step_down_from_the_smallest_p_value() -> None:
    levels = holm_levels([0.03, 0.001, 0.02], 0.05, 3)
    assert levels == pytest.approx([0.05, 0.05 / 3, 0.025])


def test_holm_stops_at_the_first_failure() -> None:
    # 0.02 > 0.05/3: it fails, and the larger p-value behind it is not reached.
    assert holm_levels([0.02, 0.04], 0.05, 3) == [pytest.approx(0.05 / 3), None]


def test_holm_counts_comparisons_that_never_produced_a_p_value() -> None:
    # Two of four hypotheses failed before measurement: the two measured still face 0.05/4 first.
    assert holm_levels([0.013, 0.001], 0.05, 4) == pytest.approx([0.05 / 3, 0.05 / 4])
    with pytest.raises(ValueError, match="comparisons"):
        holm_levels([0.1, 0.2], 0.05, 1)


def test_a_missing_p_value_passes_as_in_the_single_rule() -> None:
    assert holm_levels([None, 0.3], 0.05, 2) == [pytest.approx(0.025), pytest.approx(0.05)]


def test_the_best_passing_candidate_is_kept_and_the_others_superseded() -> None:
    choice = choose(
        [
            Contender(0, verdict(2.0, 0.001)),
            Contender(1, verdict(5.0, 0.004)),
            Contender(2, verdict(1.0, 0.01)),
        ],
        0.05,
        3,
    )
    assert choice.kept == 1
    assert choice.reasons == {0: Reason.SUPERSEDED, 1: Reason.IMPROVED, 2: Reason.SUPERSEDED}
    assert "hypothesis 1 improves more" in choice.details[0]


def test_a_candidate_significant_alone_but_not_after_the_correction_is_not_significant() -> None:
    choice = choose([Contender(0, verdict(3.0, 0.03)), Contender(1, None)], 0.05, 2)
    assert choice.kept is None
    assert choice.reasons == {0: Reason.NOT_SIGNIFICANT}
    assert "Holm level for 2 parallel hypotheses (0.025)" in choice.details[0]


def test_own_reasons_stand_and_failed_candidates_get_none() -> None:
    rejected = verdict(-1.0, 0.9, keep=False, reason=Reason.NOT_IMPROVED)
    choice = choose([Contender(0, rejected), Contender(1, None), Contender(2, verdict(4.0, 0.001))], 0.05, 3)
    assert choice.kept == 2
    assert choice.reasons == {0: Reason.NOT_IMPROVED, 2: Reason.IMPROVED}


def test_ties_go_to_the_lower_index() -> None:
    choice = choose([Contender(3, verdict(2.0, 0.001)), Contender(1, verdict(2.0, 0.002))], 0.05, 4)
    assert choice.kept == 1 and choice.reasons[3] is Reason.SUPERSEDED


def _do_nothing(rng: random.Random, samples: int) -> tuple[Arm, Arm]:
    champion: list[float] = []
    candidate: list[float] = []
    for arm in interleaved_order(samples):
        (candidate if arm == "B" else champion).append(100.0 * (1 + rng.gauss(0.0, 0.02)))
    return Arm(tuple(candidate)), Arm(tuple(champion))


@pytest.mark.parametrize("n", [2, 4])
def test_do_nothing_candidates_are_kept_at_most_at_the_level_with_holm_but_not_without(n: int) -> None:
    rng = random.Random(16)
    decisions = 1500
    holm = plain = 0
    for _ in range(decisions):
        contenders = [Contender(i, decide_keep(RULE, *_do_nothing(rng, 8))) for i in range(n)]
        holm += choose(contenders, 0.05, n).kept is not None
        plain += any(c.verdict is not None and c.verdict.keep for c in contenders)
    # Binomial sd at 5% and 1,500 decisions is 0.56%: 6.5% is over 2.5 sd above the level.
    assert holm / decisions <= 0.065
    # Without the correction the rate grows with N (about 1 - 0.95^N): the test can see the difference.
    assert plain / decisions > (0.06 if n == 2 else 0.12)

"""Sequential looks beyond one interleaved search turn (ADR-0032): parallel hypotheses with Holm's
correction over N, the candidate alone against stored champion samples (``interleave = false``), and a
refinement round's hold rule; and ``stats.verdicts``, which replays them for the turn path and for the
controller checking a worker.

Error-rate margins are three binomial standard deviations (as in ``test_sequential``); seeds are fixed.
"""

from __future__ import annotations

import math
import random

import pytest

from controller.config.spec import MetricSpec
from controller.config.units import Tolerance
from controller.domain.enums import Direction, Reason, SequentialStop
from controller.stats import Arm, KeepRule, decide_hold, interleaved_order
from controller.stats.hold import hold_look
from controller.stats.holm import Contender, choose
from controller.stats.sequential import LookAction, combined_p, design_for, look, replay
from controller.stats.verdicts import HoldScore, TurnRule, sequential_design, turn_verdict

RULE = KeepRule(Direction.MINIMIZE, confidence=0.95)
HOLD = Tolerance(0.01, relative=True)
TURNS = 500


def _pairs(rng: random.Random, effect: float, samples: int = 10, noise: float = 0.02) -> tuple[Arm, Arm]:
    """(candidate, champion) measured in the interleaved order, minimised, ``effect`` better."""
    champion: list[float] = []
    candidate: list[float] = []
    for arm in interleaved_order(samples):
        mean = 100.0 * (1 - effect) if arm == "B" else 100.0
        (candidate if arm == "B" else champion).append(mean * (1 + rng.gauss(0, noise)))
    return Arm(tuple(candidate)), Arm(tuple(champion))


def test_combined_p_is_one_before_any_look_that_may_keep_and_scales_each_look_by_its_share() -> None:
    design = design_for(3, 10, 0.95, hypotheses=4)
    candidate, champion = Arm((97.0, 96.0, 98.0, 97.5)), Arm((100.0, 101.0, 99.0, 100.5))
    # Four pairs: the first look that may keep is at five. A None here would pass every Holm level.
    assert combined_p(RULE, design, candidate, champion) == 1.0
    rng = random.Random(3)
    cand, champ = _pairs(rng, 0.02)
    p5 = look(RULE, design_for(3, 10, 0.95), Arm(cand.primary[:5]), Arm(champ.primary[:5])).p_value
    assert p5 is not None
    share5 = design.alpha[5] / design.level
    assert combined_p(RULE, design, Arm(cand.primary[:5]), Arm(champ.primary[:5])) == pytest.approx(
        min(1.0, p5 / share5)
    )


def test_a_parallel_hypothesis_keeps_early_only_at_holms_strictest_level() -> None:
    one, four = design_for(3, 10, 0.95), design_for(3, 10, 0.95, hypotheses=4)
    # A clear, noisy improvement at the first look that may keep (five pairs) whose p lies between
    # that look's level / 4 and its level: alone it keeps early, one of four measures on.
    rng = random.Random(0)
    for _ in range(5000):
        cand, champ = _pairs(rng, 0.03, samples=5)
        alone = look(RULE, one, cand, champ)
        p = alone.p_value
        if p is not None and one.alpha[5] / 4 < p <= one.alpha[5]:
            break
    else:
        raise AssertionError("no sample in the band")
    assert alone.action is LookAction.KEEP and alone.stop is SequentialStop.KEPT_EARLY
    assert look(RULE, four, cand, champ).action is LookAction.CONTINUE


def test_parallel_sequential_looks_with_holm_keep_a_do_nothing_change_at_most_at_the_level() -> None:
    rng = random.Random(21)
    design = design_for(3, 10, 0.95, hypotheses=4)
    kept = 0
    pairs = 0
    for _ in range(TURNS):
        contenders = []
        for i in range(4):
            decided = replay(RULE, design, *_pairs(rng, 0.0))
            contenders.append(Contender(i, decided.verdict))
            pairs += decided.pairs
        kept += choose(contenders, 0.05, 4).kept is not None
    assert kept / TURNS <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / TURNS)
    assert pairs / (4 * TURNS) < 7, "do-nothing hypotheses stop well before ten pairs"


def test_without_interleaving_the_candidate_alone_is_looked_at_against_stored_samples() -> None:
    design = design_for(3, 10, 0.95, interleaved=False)
    stored = Arm(tuple([100.0] * 10))
    # A deterministic 3% improvement: kept at the first look that may keep (five candidate samples).
    better = replay(RULE, design, Arm(tuple([97.0] * 10)), stored)
    assert (better.action, better.pairs, better.stop) == (LookAction.KEEP, 5, SequentialStop.KEPT_EARLY)
    assert better.verdict is not None and "candidate samples" in better.verdict.detail
    # A deterministic regression: rejected at the first look.
    worse = replay(RULE, design, Arm(tuple([103.0] * 10)), stored)
    assert (worse.action, worse.pairs, worse.stop) == (LookAction.REJECT, 3, SequentialStop.REJECTED_EARLY)


def test_without_interleaving_do_nothing_changes_are_kept_at_most_at_the_level() -> None:
    rng = random.Random(22)
    design = design_for(3, 10, 0.95, interleaved=False)
    kept = 0
    for _ in range(TURNS):
        stored = Arm(tuple(100 * (1 + rng.gauss(0, 0.02)) for _ in range(10)))
        candidate = Arm(tuple(100 * (1 + rng.gauss(0, 0.02)) for _ in range(10)))
        kept += replay(RULE, design, candidate, stored).action is LookAction.KEEP
    assert kept / TURNS <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / TURNS)


def test_a_refinement_look_settles_clear_cases_early_and_leaves_the_last_to_the_hold_rule() -> None:
    design = design_for(3, 10, 0.95)
    head = Arm(tuple(100.0 + 0.1 * (i % 3) for i in range(10)))
    same = Arm(tuple(100.0 + 0.1 * ((i + 1) % 3) for i in range(10)))
    held = hold_look(RULE, HOLD, design, Arm(same.primary[:3]), Arm(head.primary[:3]), 100.0)
    assert (held.action, held.stop) == (LookAction.KEEP, SequentialStop.KEPT_EARLY)
    assert held.verdict is not None and held.verdict.keep and "kept early" in held.verdict.detail
    worse = Arm(tuple(v * 1.05 for v in same.primary))
    lost = hold_look(RULE, HOLD, design, Arm(worse.primary[:3]), Arm(head.primary[:3]), 100.0)
    assert (lost.action, lost.stop) == (LookAction.REJECT, SequentialStop.REJECTED_EARLY)
    assert lost.verdict is not None and lost.verdict.reason is Reason.NOT_IMPROVED
    # The last look is the fixed hold rule itself.
    rng = random.Random(5)
    cand, champ = _pairs(rng, -0.01)
    final = hold_look(RULE, HOLD, design, cand, champ, 100.0)
    assert final.stop is SequentialStop.MAX_SAMPLES
    assert final.verdict == decide_hold(RULE, HOLD, cand, champ, 100.0)


def test_refinement_looks_keep_the_fixed_hold_rules_keep_rates() -> None:
    design = design_for(3, 10, 0.95)
    for effect, seed in ((0.0, 31), (-0.03, 32)):
        rng = random.Random(seed)
        fixed = sequential = 0
        for _ in range(TURNS):
            cand, champ = _pairs(rng, effect)
            fixed += decide_hold(RULE, HOLD, cand, champ, 100.0).keep
            for k in range(3, 11):
                found = hold_look(RULE, HOLD, design, Arm(cand.primary[:k]), Arm(champ.primary[:k]), 100.0)
                if found.action is not LookAction.CONTINUE:
                    break
            sequential += found.action is LookAction.KEEP
        margin = 3 * math.sqrt(0.25 / TURNS)
        assert abs(sequential - fixed) / TURNS <= margin, (effect, fixed, sequential)


def test_turn_verdict_replays_refinement_and_stored_sample_looks_as_the_turn_path_ran_them() -> None:
    metric = MetricSpec(command="true", name="m", direction=Direction.MINIMIZE, samples=10, interleave=False)
    design = sequential_design(metric)
    assert design is not None and not design.interleaved
    stored = Arm(tuple([100.0] * 10))
    decided = turn_verdict(TurnRule(keep=RULE, design=design), Arm(tuple([97.0] * 5)), stored, lambda: stored)
    assert (decided.verdict.keep, decided.pairs, decided.stop) == (True, 5, SequentialStop.KEPT_EARLY)

    interleaved = sequential_design(
        MetricSpec(command="true", name="m", direction=Direction.MINIMIZE, samples=10)
    )
    assert interleaved is not None
    head = Arm(tuple(100.0 + 0.1 * (i % 3) for i in range(3)))
    same = Arm(tuple(100.0 + 0.1 * ((i + 1) % 3) for i in range(3)))
    rule = TurnRule(keep=RULE, design=interleaved, hold=HoldScore(HOLD, 100.0))
    held = turn_verdict(rule, same, head, lambda: head)
    assert (held.verdict.keep, held.p_value, held.pairs, held.stop) == (
        True,
        None,
        3,
        SequentialStop.KEPT_EARLY,
    )
    with pytest.raises(ValueError):  # pairs measured past the look that decided: no measurement does that
        turn_verdict(rule, Arm(same.primary * 2), Arm(head.primary * 2), lambda: head)


def test_confidence_zero_or_sequential_off_leaves_the_fixed_rule() -> None:
    base = {"command": "true", "name": "m", "direction": Direction.MINIMIZE}
    assert sequential_design(MetricSpec(**base, confidence=0)) is None
    assert sequential_design(MetricSpec(**base, sequential=False)) is None
    assert sequential_design(MetricSpec(**base), hypotheses=3) is not None

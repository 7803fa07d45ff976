"""The keep rule on a simulated noisy, drifting machine (docs/keep-rule.md).

Each simulated turn measures a champion whose true value is 100 and a candidate, with Gaussian noise as large
as the effect (sigma = EFFECT = 1) plus a linear drift of the machine: every slot of the measurement window
(warmups included) shifts readings by the same amount, DRIFT_PER_WINDOW = -1.5 sigma over one window, so later
readings look better for a minimised metric. This is the dangerous direction: it favours whatever is measured
later, usually the candidate.

- Interleaved (the default): warmups first, then the arms in ``interleaved_order`` (A B B A A B B A ...), in
  the same window, so the drift hits both arms alike.
- Not interleaved: the candidate is compared with champion samples stored one window earlier, before the
  drift moved.

Measured rates (2000 runs each, for the record): interleaved no-effect 0.038, interleaved 2-sigma gain 0.85,
not-interleaved no-effect 0.67. Power with samples = 5 per side is enough (>= 0.8), so the power test uses 5.
"""

from __future__ import annotations

import math
import random

import pytest

from controller.domain.enums import Direction
from controller.stats import CANDIDATE, CHAMPION, Arm, KeepRule, decide_keep, interleaved_order

EFFECT = 1.0
SIGMA = EFFECT
DRIFT_PER_WINDOW = -1.5 * SIGMA
CHAMPION_TRUE = 100.0
SAMPLES = 5
WARMUPS = 1
RUNS = 400
RULE = KeepRule(Direction.MINIMIZE, min_improvement=0.0, confidence=0.95)
ALPHA = 1 - RULE.confidence

# Binomial margin for the false-keep rate: over RUNS = 400 runs with a true rate of ALPHA = 0.05 the count of
# keeps has sd sqrt(400 * 0.05 * 0.95) = 4.4, i.e. 0.011 as a rate; three sd (0.033) above ALPHA leaves a
# chance of about 0.2% that a correct rule fails the test. The rule's true rate here is about 0.04.
FALSE_KEEP_MARGIN = 3 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)


class DriftingMachine:
    """A benchmark machine: reading = true value + slope * slot + Gaussian noise."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.window = 2 * (WARMUPS + SAMPLES)  # slots in one turn's measurement window
        self.slope = DRIFT_PER_WINDOW / self.window

    def read(self, true_value: float, slot: int) -> float:
        return true_value + self.slope * slot + self.rng.gauss(0.0, SIGMA)


def interleaved_turn(seed: int, gain: float) -> bool:
    """The current window (slots window..2*window-1): warmups, then A B B A ... in the same window."""
    machine = DriftingMachine(seed)
    true = {CHAMPION: CHAMPION_TRUE, CANDIDATE: CHAMPION_TRUE - gain}
    slot = machine.window
    for arm in (CHAMPION, CANDIDATE) * WARMUPS:
        machine.read(true[arm], slot)  # discarded
        slot += 1
    samples: dict[str, list[float]] = {CHAMPION: [], CANDIDATE: []}
    for arm in interleaved_order(SAMPLES):
        samples[arm].append(machine.read(true[arm], slot))
        slot += 1
    return decide_keep(RULE, Arm(tuple(samples[CANDIDATE])), Arm(tuple(samples[CHAMPION]))).keep


def stored_reference_turn(seed: int, gain: float) -> bool:
    """interleave = false: champion samples stored in the previous window, candidate measured in this one."""
    machine = DriftingMachine(seed)
    champion = [machine.read(CHAMPION_TRUE, WARMUPS + i) for i in range(SAMPLES)]
    start = machine.window + WARMUPS
    candidate = [machine.read(CHAMPION_TRUE - gain, start + i) for i in range(SAMPLES)]
    return decide_keep(RULE, Arm(tuple(candidate)), Arm(tuple(champion))).keep


def keep_rate(turn: str, gain: float, first_seed: int) -> float:
    run = interleaved_turn if turn == "interleaved" else stored_reference_turn
    return sum(run(seed, gain) for seed in range(first_seed, first_seed + RUNS)) / RUNS


def test_interleaved_order_alternates_in_abba_blocks() -> None:
    assert "".join(interleaved_order(5)) == "ABBAABBAAB"
    assert interleaved_order(0) == []
    for samples in range(12):
        order = interleaved_order(samples)
        assert len(order) == 2 * samples
        assert order.count(CHAMPION) == order.count(CANDIDATE) == samples


def test_interleaved_order_rejects_negative() -> None:
    with pytest.raises(ValueError):
        interleaved_order(-1)


def test_interleaved_no_effect_change_is_rarely_kept_despite_drift() -> None:
    rate = keep_rate("interleaved", gain=0.0, first_seed=10_000)
    assert rate <= ALPHA + FALSE_KEEP_MARGIN


def test_interleaved_two_sigma_gain_is_kept_at_least_80_percent_with_five_samples() -> None:
    rate = keep_rate("interleaved", gain=2 * SIGMA, first_seed=20_000)
    assert rate >= 0.8


def test_the_same_drift_fools_a_comparison_with_stored_champion_samples() -> None:
    fooled = keep_rate("stored", gain=0.0, first_seed=30_000)
    honest = keep_rate("interleaved", gain=0.0, first_seed=30_000)
    # 0.25 is 5x ALPHA and more than 15 binomial sd above the false-keep bound: drift, not chance.
    assert fooled >= 0.25
    assert fooled > 4 * max(honest, ALPHA)

"""``bench/decisions.py`` still runs end to end on a tiny simulation, and what it counts is consistent.

No rate assertions (a few decisions say nothing about error rates; the statistical tests are in
``tests/stats/test_sequential.py``): every scenario is decided by both rules, rates are rates, and the
sequential rule never uses more pairs than the maximum nor fewer than the first look.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from controller.domain.enums import Direction
from controller.engine.knobs import Knob, KnobProposer, Proposal
from controller.stats import Arm, KeepRule
from controller.stats.sequential import Look, LookAction, design_for, replay
from tests.bench.loading import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("decisions")


def test_the_simulation_decides_every_scenario_with_both_rules(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = bench.run_simulation(decisions=20, samples=6, min_samples=3, noise=0.02, seed=1)
    assert set(rows) == {s.name for s in bench.SCENARIOS}
    for row in rows.values():
        assert 0.0 <= row["fixed"] <= 1.0 and 0.0 <= row["seq"] <= 1.0
        assert 3.0 <= row["n"] <= 6.0
    assert rows["3% worse"]["seq"] == 0.0 and rows["5% better"]["fixed"] > 0.5
    out = capsys.readouterr().out
    assert "ratio" in out and "false keeps" in out


def test_the_parallel_simulation_reports_rates_and_both_time_ratios(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    out = bench.run_parallel(decisions=30, samples=8, min_samples=3, noise=0.02, seed=1, n=3, agent_cost=4.0)
    for key in ("false keeps, do-nothing", "false keeps, do-nothing, drift 0.1%", "power"):
        assert 0.0 <= out[key] <= 1.0
    # Three hypotheses one after another take three times the pods' wall time for the same keeps.
    assert out["local"] == pytest.approx(3 * out["pods"])
    assert out["pods_ratio"] > 0 and out["local_ratio"] == pytest.approx(3 * out["pods_ratio"])
    assert "parallel = 3 in pods at once" in capsys.readouterr().out


def test_the_sequential_rule_everywhere_reports_both_rules_and_a_ratio(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parallel hypotheses, ``interleave = false`` and refinement rounds (ADR-0032), each beside the
    fixed rule on the same samples, with the samples ratio the issue's target is about."""
    runs = {
        "parallel": bench.run_parallel_sequential(
            decisions=10, samples=6, min_samples=3, noise=0.02, seed=1, n=3
        ),
        "stored": bench.run_stored(decisions=10, samples=6, min_samples=3, noise=0.02, seed=1),
        "refinement": bench.run_refinement(decisions=10, samples=6, min_samples=3, noise=0.02, seed=1),
    }
    for name, out in runs.items():
        assert 3 / 6 <= out["ratio"] <= 1.0, name
        rates = {key: value for key, value in out.items() if key.startswith(("fixed ", "seq "))}
        assert rates and all(0.0 <= value <= 1.0 for value in rates.values()), name
    assert runs["stored"]["seq 3% worse"] == 0.0
    assert capsys.readouterr().out.count("(target <= 0.65)") == 3


def test_the_pods_walk_reports_the_floor_and_the_early_end_what_if(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--pods-walk``: the knobs walk of ``bench/parallel_pods.py`` with the loop's decisions; both
    rules over the same number of runs, and the bench's own configuration's spread."""
    out = bench.run_pods_walk(runs=6, seed=1, noise=0.02, overheads=(0.0, 1.0))
    for name in ("the loop's rule", "the turn ends at the first early keep (what-if)"):
        assert 0.0 < out[name] < 2.0, name
    assert out["bench sd"] >= 0.0
    printed = capsys.readouterr().out
    assert "pairs a turn N = 1" in printed and "the bench's configuration" in printed
    # Speculative turns, each variant at both overheads, beside the same walk without speculation.
    assert "checked turn by turn" in printed
    for overhead in ("0", "1"):
        today = out[f"overhead {overhead}, no speculation (today's rule)"]
        assert out[f"overhead {overhead}, no speculation (today's rule), void"] == 0.0
        for depth in ("1 turn ahead", "2 turns ahead", "unlimited"):
            name = f"overhead {overhead}, speculative, {depth}, cancel at a keep"
            # With cancelling, no turn is decided later than without speculation: nor is the last.
            assert 0.0 < out[name] <= today, name
            assert 0.0 <= out[f"{name}, void"] < 1.0
            assert out[f"bench {name}"] > 0.0 and out[f"bench sd {name}"] >= 0.0


def test_the_speculative_walk_refuses_samples_that_depend_on_the_order_of_measuring(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check behind "same decisions as today": samples drawn from one stream in the order the
    hypotheses start (as ``_walk_arm`` draws them by default) differ once slots run ahead, and the
    walk says so instead of printing a ratio of other decisions."""
    rule = bench.KeepRule(direction=bench.Direction.MINIMIZE, confidence=0.95)

    def in_call_order(key: str, n: int, good: set[str], noise: float) -> Callable[..., Look]:
        rng = random.Random(key)
        design = bench.design_for(3, 10, rule.confidence, hypotheses=n)

        def measure(turn: int, index: int, keeps: int, proposal: Proposal) -> Look:
            champion, candidate = bench.simulate(bench.BY_NAME[bench._effect(proposal, good)], 10, rng, noise)
            return bench.replay(rule, design, Arm(tuple(candidate)), Arm(tuple(champion)))

        return measure

    monkeypatch.setattr(bench, "_keyed_measure", in_call_order)
    with pytest.raises(AssertionError, match="decided otherwise than the walk without it"):
        bench.run_speculative_walk(runs=2, seed=1, noise=0.02)


def _fixed(pairs: int) -> Look:
    """A look that rejects after ``pairs`` pairs."""
    return Look(pairs, LookAction.REJECT, None)


def _kept() -> Look:
    """A clear 3% improvement, kept at the design of four's first look that may keep (5 pairs)."""
    design = design_for(3, 10, 0.95, hypotheses=4)
    champion = Arm(tuple(100.0 + 0.01 * i for i in range(10)))
    look = replay(
        KeepRule(direction=Direction.MINIMIZE, confidence=0.95),
        design,
        Arm(tuple(97.0 + 0.01 * i for i in range(10))),
        champion,
    )
    assert look.pairs == 5 and look.verdict is not None and look.verdict.keep
    return look


def _arm(
    bench: ModuleType,
    measure: Callable[..., Look],
    turns: int,
    depth: int | None,
    cancel: bool = True,
    latency: float = 0.0,
    overhead: float = 0.0,
) -> Any:
    knobs = [Knob("conf.json", f"k{i}", (0, 1)) for i in range(16)]
    return bench.speculative_arm(
        KnobProposer(knobs, 3),
        {k.ident: 0 for k in knobs},
        lambda p: True,
        measure,
        4,
        turns,
        bench.Speculation(depth, cancel=cancel, latency=latency, overhead=overhead),
    )


def test_speculative_slots_start_the_next_turns_while_the_slowest_hypothesis_runs(bench: ModuleType) -> None:
    """Turns of one 10-pair hypothesis and three 3-pair ones, none kept: without speculation each turn
    waits 10 pairs (30 for three); one turn ahead, the three free slots take the next turn's
    hypotheses (20); unlimited, the third turn starts before the first is decided (16, timed by hand
    in the comments). Nothing is void, and every arm decides the same turns."""

    def measure(turn: int, index: int, keeps: int, proposal: Proposal) -> Look:
        return _fixed(10 if index == 0 else 3)

    today = _arm(bench, measure, 3, 0)
    assert today.wall == 30 and today.void == 0 and today.busy == 3 * (10 + 3 * 3)
    # 0-10 turn 0's slow one; 3-13 turn 1's; 3-6 and 3-6 and 6-9 its others; then the slots wait for turn
    # 0's decision at 10 (turn 2 is two ahead); 10-20 turn 2's slow one.
    assert _arm(bench, measure, 3, 1).wall == 20
    # Unlimited: 6-16 turn 2's slow one, decided at 16.
    unlimited = _arm(bench, measure, 3, None)
    assert unlimited.wall == 16 and unlimited.void == 0
    assert unlimited.decided == today.decided and [kept for _, _, kept in today.decided] == [None] * 3
    # An overhead a hypothesis: each turn of today's rule waits for it once.
    assert _arm(bench, measure, 3, 0, overhead=1.0).wall == 33


def test_a_keep_voids_the_next_turns_hypotheses_cancelled_or_run_out(bench: ModuleType) -> None:
    """Turn 0 keeps its first hypothesis at 5 pairs while its three others ended at 3 and started turn
    1 (4 pairs each) speculatively: the keep voids those three. Cancelled at once, they lose 2 pairs
    each and turn 1 starts afresh at 5 as without speculation (both end at 9); run out, they lose 4
    each and hold their slots until 7 (turn 1 ends at 11). The decisions are the same every time."""
    kept = _kept()

    def measure(turn: int, index: int, keeps: int, proposal: Proposal) -> Look:
        if turn == 0:
            return kept if index == 0 else _fixed(3)
        return _fixed(4)

    today = _arm(bench, measure, 2, 0)
    assert today.wall == 9 and today.void == 0 and today.kept_true == 1
    cancelled = _arm(bench, measure, 2, 1, cancel=True)
    assert cancelled.wall == 9 and cancelled.void == 3 * 2
    ran_out = _arm(bench, measure, 2, 1, cancel=False)
    assert ran_out.wall == 11 and ran_out.void == 3 * 4
    # A cancel that reaches the pods half a pair late: they stop at 5.5 and turn 1 ends at 9.5.
    late = _arm(bench, measure, 2, 1, latency=0.5)
    assert late.wall == 9.5 and late.void == 3 * 2.5
    assert today.decided == cancelled.decided == ran_out.decided == late.decided
    assert [kept for _, _, kept in today.decided] == [0, None]


def test_a_turn_of_the_pods_walk_waits_for_its_slowest_hypothesis(bench: ModuleType) -> None:
    """A turn of N = 4 measures four hypotheses at once: its pairs are the slowest one's (at most 10,
    at least the first look's 3), so 10 turns wait between 30 and 100 pairs; N = 1 counts each."""
    good = {f"k{i}" for i in range(10)}
    waited, kept_true, kept_null, tried_null = bench._walk_arm(random.Random(3), 5, 4, 40, 40, good, 0.02)
    assert 30 <= waited <= 100
    assert kept_true + kept_null <= 10 and tried_null <= 40
    single = bench._walk_arm(random.Random(3), 5, 1, 40, 40, good, 0.02)
    assert 3 * 40 <= single[0] <= 10 * 40

"""``bench/decisions.py`` still runs end to end on a tiny simulation, and what it counts is consistent.

No rate assertions (a few decisions say nothing about error rates; the statistical tests are in
``tests/stats/test_sequential.py``): every scenario is decided by both rules, rates are rates, and the
sequential rule never uses more pairs than the maximum nor fewer than the first look.
"""

from __future__ import annotations

import random
from types import ModuleType

import pytest

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
    out = bench.run_pods_walk(runs=6, seed=1, noise=0.02)
    for name in ("the loop's rule", "the turn ends at the first early keep (what-if)"):
        assert 0.0 < out[name] < 2.0, name
    assert out["bench sd"] >= 0.0
    printed = capsys.readouterr().out
    assert "pairs a turn N = 1" in printed and "the bench's configuration" in printed


def test_a_turn_of_the_pods_walk_waits_for_its_slowest_hypothesis(bench: ModuleType) -> None:
    """A turn of N = 4 measures four hypotheses at once: its pairs are the slowest one's (at most 10,
    at least the first look's 3), so 10 turns wait between 30 and 100 pairs; N = 1 counts each."""
    good = {f"k{i}" for i in range(10)}
    waited, kept_true, kept_null, tried_null = bench._walk_arm(random.Random(3), 5, 4, 40, 40, good, 0.02)
    assert 30 <= waited <= 100
    assert kept_true + kept_null <= 10 and tried_null <= 40
    single = bench._walk_arm(random.Random(3), 5, 1, 40, 40, good, 0.02)
    assert 3 * 40 <= single[0] <= 10 * 40

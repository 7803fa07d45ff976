"""``bench/cli_start.py`` still runs end to end with tiny parameters (the figures are its business)."""

from __future__ import annotations

from tests.bench.loading import load_bench


def test_every_arm_is_timed_against_the_floor() -> None:
    bench = load_bench("cli_start")
    arms = bench.run(repeat=1)
    assert [arm.name for arm in arms] == ["floor", "help", "runs-list"]
    assert all(len(arm.times) == 1 and arm.median > 0 for arm in arms)

"""``bench/poll_budget.py`` still runs end to end on a tiny scene, and what it counts is consistent.

No timed assertions and no budget assertions (the numbers are the benchmark's business): what is
checked is that every posted item and every close was reported, latencies are bounded by what a
poll interval allows on the simulated clock, and the counts add up.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.bench.loading import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("poll_budget")


def test_a_tiny_hour_reports_everything(bench: ModuleType) -> None:
    lines: list[str] = []
    result = bench.run(2, 2, 8, 1, 30.0, 7, hour=600, log=lines.append)
    assert result.missing == 0
    assert len(result.latencies) >= 9  # 8 actions (some with several items) and one close
    assert all(0 <= latency <= 2 * result.interval for latency in result.latencies)
    assert 0 < result.billable < result.requests  # something was read, and quiet polls were 304s
    assert result.sync_billable >= 2 * 3 + 4  # three lists per repository and the reviews of each PR
    assert result.polls >= 600 // 30
    text = "\n".join(bench.report(result))
    assert "never reported: 0" in text and "billable / floor" in text and "worst / poll interval" in text

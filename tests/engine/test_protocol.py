"""The line protocols: a missing metric is never zero, duplicates and non-finite values are invalid."""

from __future__ import annotations

import pytest

from controller.engine.protocol import parse_agent_output, parse_metric_sample


def test_metric_sample_reads_required_names_and_ignores_others() -> None:
    sample = parse_metric_sample(
        ["noise", "METRIC p50_ms=12.5", "METRIC other=1", "METRIC rss=3e2"], ["p50_ms", "rss"]
    )
    assert sample.valid
    assert sample.values == {"p50_ms": 12.5, "rss": 300.0}


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        ([], "missing"),
        (["METRIC p50_ms=1", "METRIC p50_ms=2"], "2 times"),
        (["METRIC p50_ms=nan"], "not finite"),
        (["METRIC p50_ms=inf"], "not finite"),
        (["METRIC p50_ms=-Infinity"], "not finite"),
        (["METRIC p50_ms=fast"], "not a number"),
        (["METRIC p50_ms="], "missing"),
    ],
)
def test_invalid_samples_say_why(lines: list[str], needle: str) -> None:
    sample = parse_metric_sample(lines, ["p50_ms"])
    assert not sample.valid
    assert sample.values == {}
    assert sample.error is not None and needle in sample.error


def test_a_missing_guard_invalidates_the_sample() -> None:
    sample = parse_metric_sample(["METRIC p50_ms=1"], ["p50_ms", "rss_mb"])
    assert not sample.valid and "rss_mb" in (sample.error or "")


def test_agent_output_last_hypothesis_wins_and_costs_add_up() -> None:
    report = parse_agent_output(
        [
            "HYPOTHESIS: first idea",
            "COST usd=0.25 tokens=1000",
            "HYPOTHESIS:   bigger cache  ",
            "COST usd=0.5 tokens=2e3",
            "unrelated COST usd=100",
        ]
    )
    assert report.hypothesis == "bigger cache"
    assert report.cost_usd == pytest.approx(0.75)
    assert report.tokens == 3000


def test_agent_without_reports() -> None:
    report = parse_agent_output(["hello"])
    assert (report.hypothesis, report.cost_usd, report.tokens) == (None, 0.0, 0)

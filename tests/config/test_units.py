"""Durations, sizes and tolerances: what users may write, and the key-naming errors for what they may not."""

from __future__ import annotations

import math

import pytest

from controller.config.units import Tolerance, parse_duration, parse_size, parse_tolerance
from controller.domain.errors import SpecError


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("90s", 90.0),
        ("20m", 1200.0),
        ("4h", 14400.0),
        ("1.5h", 5400.0),
        ("0.5m", 30.0),
        (" 20M ", 1200.0),
        ("45", 45.0),
        (45, 45.0),
        (2.5, 2.5),
        (0, 0.0),
    ],
)
def test_durations_become_seconds(value: str | int | float, seconds: float) -> None:
    assert parse_duration(value, "agent.timeout") == seconds


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("20 minutes", 'got "20 minutes"'),
        ("-5m", 'got "-5m"'),
        ("m", "expected a duration"),
        ("", "expected a duration"),
        ("1d", "expected a duration"),
        (-1, "must not be negative"),
        (math.inf, "must be finite"),
        (True, "got true"),
        ([1], "got an array"),
    ],
)
def test_bad_durations_name_the_key(value: object, fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_duration(value, "feedback.quiet_window")  # type: ignore[arg-type]
    assert caught.value.key == "feedback.quiet_window"
    assert fragment in caught.value.message


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("20GB", 20 * 1000**3),
        ("500MB", 500 * 1000**2),
        ("10KB", 10_000),
        ("10kb", 10_000),
        ("1.5GB", 1_500_000_000),
        ("2TB", 2 * 1000**4),
        ("1GiB", 1024**3),
        ("3MiB", 3 * 1024**2),
        ("4KiB", 4096),
        ("512B", 512),
        ("512", 512),
        (1234, 1234),
        (1e9, 1_000_000_000),
    ],
)
def test_sizes_become_bytes(value: str | int, size: int) -> None:
    result = parse_size(value, "budget.disk")
    assert result == size
    assert isinstance(result, int)


@pytest.mark.parametrize("value", ["20 parsecs", "GB", "-1GB", -1, 1.5, True, "twenty GB"])
def test_bad_sizes_name_the_key(value: object) -> None:
    with pytest.raises(SpecError) as caught:
        parse_size(value, "budget.disk")  # type: ignore[arg-type]
    assert caught.value.key == "budget.disk"
    assert caught.value.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5%", Tolerance(0.05, relative=True)),
        (" 12.5 % ", Tolerance(0.125, relative=True)),
        ("0%", Tolerance(0.0, relative=True)),
        ("0.5", Tolerance(0.5, relative=False)),
        (2, Tolerance(2.0, relative=False)),
        (0.25, Tolerance(0.25, relative=False)),
        ("0", Tolerance(0.0, relative=False)),
    ],
)
def test_tolerances(value: str | int | float, expected: Tolerance) -> None:
    assert parse_tolerance(value, "metric.guard[0].tolerance") == expected


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("-5%", "must not be negative"),
        ("-0.5", "must not be negative"),
        (-1, "must not be negative"),
        ("five%", 'got "five%"'),
        ("5%%", "expected a tolerance"),
        (True, "got true"),
        (math.nan, "must be finite"),
    ],
)
def test_bad_tolerances_name_the_key(value: object, fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_tolerance(value, "feedback.hold")  # type: ignore[arg-type]
    assert caught.value.key == "feedback.hold"
    assert fragment in caught.value.message
    assert str(caught.value).startswith("feedback.hold: ")


def test_relative_tolerance_scales_with_the_magnitude_of_the_reference() -> None:
    tolerance = parse_tolerance("5%", "k")
    assert tolerance.allowed(200.0) == pytest.approx(10.0)
    assert tolerance.allowed(-200.0) == pytest.approx(10.0)
    assert tolerance.allowed(0.0) == 0.0


def test_absolute_tolerance_ignores_the_reference() -> None:
    tolerance = parse_tolerance(0.5, "k")
    assert tolerance.allowed(1000.0) == 0.5
    assert tolerance.allowed(-3.0) == 0.5


@pytest.mark.parametrize(
    ("tolerance", "text"),
    [
        (Tolerance(0.05, relative=True), "5%"),
        (Tolerance(0.125, relative=True), "12.5%"),
        (Tolerance(0.5, relative=False), "0.5"),
        (Tolerance(2.0, relative=False), "2"),
    ],
)
def test_tolerance_prints_as_written(tolerance: Tolerance, text: str) -> None:
    assert str(tolerance) == text
    assert parse_tolerance(text, "k") == tolerance

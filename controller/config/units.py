"""Durations, sizes and tolerances as people write them in ``crucible.toml``.

The spec lets users write ``timeout = "20m"``, ``disk = "20GB"`` and ``tolerance = "5%"`` (docs/spec.md).
These parsers turn such values into plain numbers once, at the edge, so nothing downstream ever sees a
unit string. Each public parser raises ``SpecError`` naming the key it was given; the ``*_value``
variants raise ``ValueError`` so the spec models can use them as pydantic validators.

Sizes are decimal: ``KB``, ``MB``, ``GB``, ``TB`` are powers of 1000 (as disks are sold and as ``df -H``
counts); the binary ``KiB``, ``MiB``, ``GiB``, ``TiB`` are accepted too for those who mean powers of 1024.
"""

from __future__ import annotations

import math
import re
from collections.abc import Container
from dataclasses import dataclass
from decimal import Decimal

from controller.domain.errors import SpecError

_DURATION_UNITS: dict[str, float] = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_NUMBER_WITH_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([A-Za-z%]*)\s*$")


def _number(value: object, what: str) -> float:
    """A finite, non-negative plain number (bool is not a number here, although Python thinks so)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected {what}, got {toml_repr(value)}")
    if not math.isfinite(value):
        raise ValueError(f"must be finite, got {value}")
    if value < 0:
        raise ValueError(f"must not be negative, got {value}")
    return float(value)


def toml_repr(value: object) -> str:
    """A value roughly as the user wrote it in TOML, for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return str(value)


def _split_unit(text: str, units: Container[str], expected: str) -> tuple[Decimal, str]:
    """``"1.5h"`` -> (Decimal("1.5"), "h"); the unit is lower-cased and must be one of ``units``."""
    match = _NUMBER_WITH_UNIT.match(text)
    if match is None or match.group(2).lower() not in units:
        raise ValueError(f"expected {expected}, got {toml_repr(text)}")
    return Decimal(match.group(1)), match.group(2).lower()


def duration_value(value: object) -> float:
    """Seconds from ``"90s"``, ``"20m"``, ``"1.5h"``, ``"45"`` or a number of seconds; ValueError if not."""
    expected = 'a duration like "90s", "20m", "4h" or a number of seconds'
    if not isinstance(value, str):
        return _number(value, expected)
    number, unit = _split_unit(value, _DURATION_UNITS, expected)
    return float(number) * _DURATION_UNITS[unit]


def size_value(value: object) -> int:
    """Bytes from ``"20GB"``, ``"500MB"``, ``"1GiB"`` or an integer of bytes; ValueError if not."""
    expected = 'a size like "500MB", "20GB" or an integer number of bytes'
    if not isinstance(value, str):
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"expected {expected}, got {value}")
        return int(_number(value, expected))
    number, unit = _split_unit(value, _SIZE_UNITS, expected)
    return int(number * _SIZE_UNITS[unit])


@dataclass(frozen=True)
class Tolerance:
    """How much worse a value may get: ``relative`` ones are a fraction of a reference value."""

    value: float
    relative: bool

    def allowed(self, reference: float) -> float:
        """The largest permitted worsening, in the metric's own unit, against ``reference``."""
        return self.value * abs(reference) if self.relative else self.value

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


def tolerance_value(value: object) -> Tolerance:
    """A Tolerance from ``"5%"`` (relative, 0.05) or a plain number (absolute); ValueError if not."""
    if isinstance(value, Tolerance):
        return value
    expected = 'a tolerance like "5%" or a plain number'
    if not isinstance(value, str):
        return Tolerance(_number(value, expected), relative=False)
    if value.strip().startswith("-"):
        raise ValueError(f"must not be negative, got {toml_repr(value)}")
    number, unit = _split_unit(value, ("", "%"), expected)
    relative = unit == "%"
    return Tolerance(float(number / 100) if relative else float(number), relative=relative)


def parse_duration(value: str | int | float, key: str) -> float:
    """Seconds from a duration; raises ``SpecError(key, ...)`` when it is not one."""
    try:
        return duration_value(value)
    except ValueError as exc:
        raise SpecError(key, str(exc)) from None


def parse_size(value: str | int, key: str) -> int:
    """Bytes from a size (decimal KB/MB/GB, binary KiB/MiB/GiB); raises ``SpecError(key, ...)``."""
    try:
        return size_value(value)
    except ValueError as exc:
        raise SpecError(key, str(exc)) from None


def parse_tolerance(value: str | int | float, key: str) -> Tolerance:
    """A tolerance from ``"5%"`` or a number; negative or malformed values raise ``SpecError(key, ...)``."""
    try:
        return tolerance_value(value)
    except ValueError as exc:
        raise SpecError(key, str(exc)) from None

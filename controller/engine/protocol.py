"""Parsing the line protocols (docs/agent.md, docs/metric.md): what agents and metric commands print.

Pure functions over lines, so the rules ("a missing metric is never zero", "exactly once, finite") are
tested without running anything.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

METRIC_PREFIX = "METRIC "
HYPOTHESIS_PREFIX = "HYPOTHESIS:"
COST_PREFIX = "COST "
CAPTURE_PREFIXES = (METRIC_PREFIX, HYPOTHESIS_PREFIX, COST_PREFIX)

_METRIC_RE = re.compile(r"^METRIC\s+([A-Za-z_][A-Za-z0-9_.\-/]*)\s*=\s*(\S+)\s*$")
_COST_FIELD_RE = re.compile(r"\b(usd|tokens)\s*=\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)")


@dataclass(frozen=True)
class MetricSample:
    """One measured run of the metric command: the values, or why the sample is invalid."""

    values: dict[str, float]
    error: str | None

    @property
    def valid(self) -> bool:
        return self.error is None


def parse_metric_sample(lines: Iterable[str], required: Sequence[str]) -> MetricSample:
    """Read ``METRIC name=value`` lines; every required name must appear exactly once and be finite.

    Names that are not required are ignored, so a benchmark may print more than the spec uses.
    """
    seen: dict[str, list[str]] = {}
    for raw in lines:
        line = raw.strip()
        match = _METRIC_RE.match(line)
        if match:
            seen.setdefault(match.group(1), []).append(match.group(2))
    values: dict[str, float] = {}
    for name in required:
        found = seen.get(name, [])
        if not found:
            return MetricSample({}, f"metric {name!r} missing from the output")
        if len(found) > 1:
            return MetricSample({}, f"metric {name!r} printed {len(found)} times")
        try:
            value = float(found[0])
        except ValueError:
            return MetricSample({}, f"metric {name!r} is not a number: {found[0]!r}")
        if not math.isfinite(value):
            return MetricSample({}, f"metric {name!r} is not finite: {found[0]!r}")
        values[name] = value
    return MetricSample(values, None)


@dataclass(frozen=True)
class AgentReport:
    """What an agent said about its turn: its hypothesis and what it spent."""

    hypothesis: str | None
    cost_usd: float
    tokens: int


def parse_agent_output(lines: Iterable[str]) -> AgentReport:
    """The last HYPOTHESIS line wins; COST lines add up (an agent may report per model call)."""
    hypothesis: str | None = None
    cost = 0.0
    tokens = 0
    for raw in lines:
        line = raw.strip()
        if line.startswith(HYPOTHESIS_PREFIX):
            text = line[len(HYPOTHESIS_PREFIX) :].strip()
            hypothesis = text[:500] or hypothesis
        elif line.startswith(COST_PREFIX):
            for key, number in _COST_FIELD_RE.findall(line):
                if key == "usd":
                    cost += float(number)
                else:
                    tokens += int(float(number))
    return AgentReport(hypothesis, cost, tokens)

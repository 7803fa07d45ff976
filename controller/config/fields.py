"""Field types shared by the tables of ``crucible.toml``: non-blank strings, globs that stay inside the
repository, durations, sizes and the bounds that catch typos.

They live apart from the models so that tables defined in modules of their own (``[agent]`` in
``controller.config.agent``) validate exactly like the rest of ``controller.config.spec``.
"""

from __future__ import annotations

import json
import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field

from controller.config.units import Tolerance, duration_value, size_value, tolerance_value

HOUR, DAY = 3600.0, 86400.0
# Upper bounds of the spec's numbers and durations (issue 11 §4): each is far beyond any sensible value,
# so a bound only ever catches a typo or an attack (``samples = 100000000000``, ``timeout = "9999…h"``).
MAX_TURNS = 100_000
MAX_SAMPLES = 1_000
MAX_WARMUPS = 100
MAX_RETRIES = 10
MAX_ROUNDS = 1_000
MAX_FAILURES = 10_000
MAX_TOKENS = 10**12
MAX_COST_USD = 1e6
MAX_DISK = 10**15  # 1000 TB
MAX_SEED = 2**63 - 1
MAX_COMMAND_S = 7 * DAY  # agent, validation and metric timeouts
MAX_WALL_CLOCK_S = 366 * DAY
MAX_INTERVAL_S = DAY  # feedback.poll_interval and quiet_window


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _escape_problem(path: str) -> str | None:
    """Why ``path`` (a repo-relative path or gitignore-style glob) could reach outside the repo, if it can."""
    if path.startswith("/"):
        return f"must be relative to the repository root, got {json.dumps(path)}"
    if ".." in path.split("/"):
        return f"must not contain a '..' segment, got {json.dumps(path)}"
    return None


def inside_repo(pattern: str) -> str:
    problem = _escape_problem(pattern.removeprefix("!"))
    if problem:
        raise ValueError(problem)
    return pattern


def _no_negation(pattern: str) -> str:
    if pattern.startswith("!"):
        raise ValueError(f"negation is not supported here, got {json.dumps(pattern)}")
    return pattern


def _negation_after_a_pattern(patterns: list[str]) -> list[str]:
    """``!glob`` excludes from the patterns before it (gitignore order); first it excludes from nothing."""
    if patterns and patterns[0].startswith("!"):
        raise ValueError(
            f"the first pattern cannot be a negation ({json.dumps(patterns[0])}): '!' only excludes "
            "paths that an earlier pattern matched"
        )
    return patterns


def matching(regex: str, what: str) -> AfterValidator:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {what}, got {json.dumps(value)}")
        return value

    return AfterValidator(check)


NonBlank = Annotated[str, AfterValidator(_not_blank)]
RepoGlob = Annotated[str, Field(min_length=1), AfterValidator(inside_repo)]
PlainGlob = Annotated[str, Field(min_length=1), AfterValidator(inside_repo), AfterValidator(_no_negation)]
Duration = Annotated[float, BeforeValidator(duration_value), Field(gt=0)]
CommandTimeout = Annotated[float, BeforeValidator(duration_value), Field(gt=0, le=MAX_COMMAND_S)]
Interval = Annotated[float, BeforeValidator(duration_value), Field(gt=0, le=MAX_INTERVAL_S)]
Size = Annotated[int, BeforeValidator(size_value), Field(gt=0, le=MAX_DISK)]
Globs = Annotated[list[RepoGlob], AfterValidator(_negation_after_a_pattern)]
Tol = Annotated[Tolerance, BeforeValidator(tolerance_value)]
MetricName = Annotated[str, matching(r"[^\s=]+", "a name without spaces or '='")]
ForgeRepo = Annotated[str, matching(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", 'of the form "owner/name"')]
ComponentName = Annotated[str, matching(r"[A-Za-z0-9][A-Za-z0-9._-]*", "letters, digits, '.', '_', '-'")]
Number = int | float

"""The JSON forms of the views (``schemas.py`` dumped with ``mode="json"``), as TypedDicts.

The CLI prints a run from this form, whichever side built it: ``crucible runs show ID`` dumps the
local view, ``--server URL`` reads the REST API's answer, and ``crucible runs list`` on the default
SQLite file writes the summary field by field without pydantic (``summaries.py``, ADR-0013). So the
printers need the shape of the *JSON*, not the models: enums are their string values, datetimes ISO
text. This module is stdlib only, so the runs list stays off pydantic; ``tests/services/
test_json_forms.py`` holds each TypedDict's keys equal to its model's fields, so a field added to a
view fails there until it is added here.
"""

from __future__ import annotations

from typing import TypedDict


class BaselineJson(TypedDict):
    value: float | None
    samples: list[float]


class BestJson(TypedDict):
    value: float
    turn: int


class MetricJson(TypedDict):
    name: str
    direction: str


class HypothesisJson(TypedDict):
    index: int
    outcome: str
    reason: str
    value: float | None
    samples: list[float]
    reference_samples: list[float]
    p_value: float | None
    changed_paths: list[str]
    hypothesis: str | None
    commit: str | dict[str, str] | None
    cost_usd: float
    duration_s: float
    detail: str


class TurnJson(TypedDict):
    turn: int
    round: int
    outcome: str | None
    reason: str | None
    value: float | None
    samples: list[float]
    reference_samples: list[float]
    p_value: float | None
    changed_paths: list[str]
    hypothesis: str | None
    commit: str | dict[str, str] | None
    cost_usd: float
    duration_s: float
    detail: str
    pairs: int | None
    sequential_stop: str | None
    hypotheses: list[HypothesisJson]


class ComponentJson(TypedDict):
    name: str
    base_sha: str
    head_sha: str
    diff: str | None


class PullRequestJson(TypedDict):
    component: str
    url: str
    number: int
    branch: str
    draft: bool
    head_sha: str
    state: str
    paused: bool
    published_value: float | None
    note: str | None
    problems: list[str]


class FeedbackItemJson(TypedDict):
    id: int
    component: str
    pr_number: int
    source: str
    author: str
    association: str | None
    path: str | None
    line: int | None
    action: str | None
    body: str
    trusted: bool | None
    verdict: str | None
    reason: str | None
    round: int | None


class RoundJson(TypedDict):
    round: int
    component: str
    feedback: list[int]
    kept: bool
    head: str | None
    detail: str


class ReplyJson(TypedDict):
    feedback: int
    author: str
    reply: str


class FeedbackJson(TypedDict):
    run_id: str
    feedback: list[FeedbackItemJson]
    rounds: list[RoundJson]
    replies: list[ReplyJson]


class RunJson(TypedDict):
    run_id: str
    status: str
    stop_reason: str | None
    message: str | None
    objective: str
    metric: MetricJson
    baseline: BaselineJson
    best: BestJson | None
    cost_usd: float
    tokens: int
    turns: list[TurnJson]
    components: list[ComponentJson]
    pull_requests: list[PullRequestJson]
    created_at: str
    finished_at: str | None
    feedback: list[FeedbackItemJson]
    rounds: list[RoundJson]
    replies: list[ReplyJson]


class RunSummaryJson(TypedDict):
    run_id: str
    status: str
    stop_reason: str | None
    objective: str
    baseline: float | None
    best: float | None
    created_at: str

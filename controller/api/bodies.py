"""Request bodies and page envelopes of the operator API.

The views themselves are ``services.views.schemas``.

Unknown fields are refused (422 naming them), so a typo in a client is an error, not a silent default.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from controller.config.fields import MAX_TURNS
from controller.services.views.reads import run_summary
from controller.services.views.schemas import RunSummary, Turn
from controller.store.summary import RunSummaryRecord


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    """Every error answer: what went wrong, what kind of error (``api/errors.py``) and, for 422, the
    dotted name of the offending field."""

    detail: str
    kind: str | None = None
    key: str | None = None


ERRORS: dict[int | str, dict[str, object]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in (
        (401, "no valid bearer token"),
        (403, "the read-only token on a write"),
        (404, "no such run"),
        (409, "refused or conflicting with the run's state"),
        (422, "a bad spec or payload; key names the field"),
        (503, "the database is busy, unreachable or not at the schema head"),
    )
}


MAX_SPEC_CHARS = 1_000_000  # a spec is a page of TOML; a megabyte is a mistake or an attack


class RunCreate(_Body):
    spec: str = Field(description="the crucible.toml text", min_length=1, max_length=MAX_SPEC_CHARS)
    spec_dir: str | None = Field(
        default=None,
        max_length=4096,
        description="absolute directory on the controller that relative paths in the spec resolve "
        "against (default: the controller's working directory)",
    )
    turns: int | None = Field(
        default=None,
        ge=0,
        le=MAX_TURNS,
        description="turns in round 0 (overrides the spec; bounded as there)",
    )
    publish_prs: bool = False
    watch_feedback: bool = False


class RoundCreate(_Body):
    steer: str = Field(min_length=1, max_length=20_000, description="what the agent should address")
    component: str | None = Field(
        default=None,
        max_length=200,
        description="the component whose pull request to refine (needed when the run has several)",
    )


class Created(BaseModel):
    id: str


class Message(BaseModel):
    message: str


class RunPage(BaseModel):
    items: list[RunSummary]
    next_offset: int | None = Field(description="the offset of the next page; null on the last page")


def run_page_json(records: Sequence[RunSummaryRecord], *, limit: int, offset: int) -> bytes:
    """The body of ``GET /api/runs`` from the page's rows read with ``limit + 1`` (the extra row says
    whether there is a next page): a function of its arguments only, so the hot path may keep it."""
    items = [run_summary(r) for r in records[:limit]]
    more = len(records) > limit
    return RunPage(items=items, next_offset=offset + limit if more else None).model_dump_json().encode()


class TurnPage(BaseModel):
    items: list[Turn]
    next_after: int | None = Field(description="pass as after= for the next page; null on the last page")


class Patch(BaseModel):
    patch: str = Field(description="one unified diff per changed component, each under '# component: NAME'")

"""How a run was asked to run (``crucible loop`` flags, ``POST /api/runs`` fields), stored with the run.

The options are part of the run's record, not of the process that started it: ``crucible resume``
(and a server taking a run over) restores every one of them from the store, so a resumed
``--publish-prs --watch-feedback`` run goes on publishing and watching without the flags being
repeated. Credentials never belong here (they come from the settings); a listen address does,
because it is how the run receives its webhooks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)

from controller.domain.errors import SpecError


class RunOptions(BaseModel):
    """The options of one run. Field names are the API's JSON keys; the CLI flags say the same."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turns: int | None = Field(default=None, ge=0)
    """Turns in round 0; None: the spec's ``turns``. (``--turns``)"""
    publish_prs: bool = False
    """Publish each kept candidate as a draft pull request. (``--publish-prs``)"""
    watch_feedback: bool = False
    """After round 0, refine on trusted review feedback until the PRs close. (``--watch-feedback``)"""
    listen: str | None = None
    """HOST:PORT of the webhook endpoint this run serves while watching. (``--listen``)"""
    live_steer: bool = False
    """Append feedback arriving mid-round to CRUCIBLE_STEER_FILE. (``--live-steer``)"""

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is None:
            return None
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"wants HOST:PORT, got {value!r}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.watch_feedback and not self.publish_prs:
            raise ValueError("watch_feedback needs publish_prs (feedback arrives on the published PRs)")
        if self.listen and not self.watch_feedback:
            raise ValueError("listen only makes sense with watch_feedback")
        if self.live_steer and not self.watch_feedback:
            raise ValueError("live_steer only makes sense with watch_feedback")
        return self

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> RunOptions:
        """Options from JSON-like data; SpecError naming the field (``options.<name>``) if bad."""
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            error = exc.errors()[0]
            loc = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            raise SpecError(f"options.{loc}" if loc else "options", message) from None

    @classmethod
    def stored(cls, data: Mapping[str, Any]) -> RunOptions:
        """The options a stored run carries; runs stored before options were typed had only
        ``publish_prs`` (and nothing else was restored), which parses the same way."""
        return cls.parse(data)

    def to_json(self) -> dict[str, JsonValue]:
        return self.model_dump(mode="json")

"""The runs list's row, apart from the other records: ``crucible runs list`` reads an up-to-date SQLite
file with the standard library alone (``listing``), and the other records' JSON columns are typed
with pydantic, which that path must not import (ADR-0013)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from controller.domain.enums import RunStatus, StopReason


@dataclass(frozen=True)
class RunSummaryRecord:
    """The columns of a run that a line of the runs list shows (``Store.run_summaries``)."""

    id: str
    status: RunStatus
    stop_reason: StopReason | None
    objective: str
    baseline_value: float | None
    champion_value: float | None
    created_at: datetime

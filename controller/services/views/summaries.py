"""The runs list in its ``--json`` form for ``crucible runs list``, without pydantic where it can.

``schemas.RunSummary`` is the contract of a runs-list line; building it means importing pydantic and
every view model, which costs more than the command's own work. On the default SQLite database the
line is read with ``store.listing`` and written out here field by field, in exactly the form
``RunSummary.model_dump(mode="json")`` gives (``tests/services/test_summaries.py`` holds the two
equal, so a field added to the model fails that test until it is added here). ADR-0013.
"""

from __future__ import annotations

from datetime import UTC, datetime

from controller.services.views.json_forms import RunSummaryJson
from controller.store.listing import sqlite_run_summaries
from controller.store.summary import RunSummaryRecord


def summary_json(record: RunSummaryRecord) -> RunSummaryJson:
    """``schemas.RunSummary`` of ``record``, dumped as JSON-ready values."""
    return {
        "run_id": record.id,
        "status": record.status.value,
        "stop_reason": None if record.stop_reason is None else record.stop_reason.value,
        "objective": record.objective,
        "baseline": _number(record.baseline_value),
        "best": _number(record.champion_value),
        "created_at": _iso(record.created_at),
    }


def quick_run_list(database_url: str, limit: int) -> list[RunSummaryJson] | None:
    """The first ``limit`` lines of the runs list read without the ``Store``, or None when only the
    ``Store`` can answer (see ``store.listing``)."""
    records = sqlite_run_summaries(database_url, limit=limit)
    return None if records is None else [summary_json(r) for r in records]


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)


def _iso(value: datetime) -> str:
    """pydantic's JSON form of an aware datetime: ISO 8601, with ``Z`` for UTC."""
    text = value.isoformat()
    return text[: -len("+00:00")] + "Z" if value.utcoffset() == UTC.utcoffset(None) else text

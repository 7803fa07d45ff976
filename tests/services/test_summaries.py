"""``services.views.summaries``: a runs-list line written without pydantic is exactly the ``--json`` form of
``schemas.RunSummary``, field for field (a field added to the model fails here until added there)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller.domain.enums import RunStatus, StopReason
from controller.services.views import schemas
from controller.services.views.reads import runs_list
from controller.services.views.summaries import quick_run_list, summary_json
from controller.store import Store
from controller.store.summary import RunSummaryRecord
from tests.support import new_run
from tests.support.fixtures import migrated_sqlite_url


@pytest.mark.parametrize(
    "record",
    [
        RunSummaryRecord("a", RunStatus.PENDING, None, "o", None, None, datetime(2026, 12, 3, tzinfo=UTC)),
        RunSummaryRecord(
            "b",
            RunStatus.CANCELLED,
            StopReason.CANCELLED,
            "faster \u00e9",
            1.0,
            0.5,
            datetime(2026, 12, 3, 1, 2, 3, 45, tzinfo=UTC),
        ),
    ],
)
def test_a_line_is_the_models_json_form(record: RunSummaryRecord) -> None:
    model = schemas.RunSummary(
        run_id=record.id,
        status=record.status,
        stop_reason=record.stop_reason,
        objective=record.objective,
        baseline=record.baseline_value,
        best=record.champion_value,
        created_at=record.created_at,
    )
    assert summary_json(record) == model.model_dump(mode="json")


def test_the_quick_list_is_the_run_services_list(tmp_path: Path) -> None:
    url = migrated_sqlite_url(tmp_path / "crucible.db")
    with Store.open(url, upgrade=True) as store:
        for i in range(3):
            store.create_run(new_run(f"r{i}"))
        store.set_baseline("r1", 3.0, {})
        assert quick_run_list(url, 2) == schemas.dump(runs_list(store, limit=2))
    assert quick_run_list("postgresql+psycopg://u@h/db", 2) is None

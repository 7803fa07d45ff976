"""Property-based: requests generated from the OpenAPI document find no 5xx and no answer that breaks the
document (status, content type and body schema), with the admin token, the read-only one and none.

The app runs over a real SQLite store (with one finished run in it, so reads have something to show),
called through ASGI; each operation gets its own Hypothesis run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.config.settings import Settings
from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.store import Store
from tests.api.conftest import ADMIN, READER, Recorder, new_run
from tests.api.sqlite_only import sqlite_only  # noqa: F401 (database_url on SQLite only: the HTTP edge)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = 30


def _check(case: Any) -> None:
    if case.path.endswith("/events"):
        case.query = {**(case.query or {}), "follow": "false"}  # a stream that ends, for a test
    for token in (ADMIN, READER, None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        case.call_and_validate(headers=headers, checks=CHECKS)


def test_no_5xx_and_every_answer_matches_the_document(
    tmp_path: Path, database_url: str, store: Store
) -> None:
    run_id = new_run(store, "finished-run")
    store.append_event(run_id, EventKind.RESUMED, {})
    store.set_run_status(run_id, RunStatus.RUNNING)
    store.set_run_status(run_id, RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
    app_settings = Settings(home=tmp_path / "home", database_url=database_url)
    app = create_app(app_settings, store, ApiTokens(ADMIN, READER), Recorder(), events_poll_s=0.01)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12
    for operation in operations:
        run = given(case=operation.as_strategy())(_check)
        settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))(run)()

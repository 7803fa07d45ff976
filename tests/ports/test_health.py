"""The ``SchemaHealth`` contract (``controller.store.ports.pages``) for every implementation: what
``/readyz`` and ``/metrics`` ask of the database itself. An implementation at the head revision
answers ``check_schema`` quietly, and its statement count only grows, by the statements it sends."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.domain.errors import SchemaOutdatedError
from controller.store.ports import SchemaHealth
from controller.store.store import Store
from tests.ports.conftest import PortHarness


def test_a_database_at_the_head_passes_and_statements_are_counted(harness: PortHarness) -> None:
    health: SchemaHealth = harness.impl
    health.check_schema()
    before = health.statements
    harness.seed_run("r1")
    after = health.statements
    assert after > before, "writing a run sends statements"
    harness.impl.get_run("r1")
    assert health.statements > after, "so does reading one"


def test_a_database_without_the_schema_is_refused_by_name(tmp_path: Path) -> None:
    """Behind the head (here: no schema at all), ``check_schema`` raises SchemaOutdatedError saying
    how to upgrade, which ``/readyz`` turns into 503."""
    store = Store(f"sqlite:///{tmp_path / 'empty.db'}")
    health: SchemaHealth = store
    try:
        with pytest.raises(SchemaOutdatedError, match="crucible db upgrade"):
            health.check_schema()
    finally:
        store.close()

"""Implementations of the store's ports under test (``controller.store.ports``), Optuna's
``StorageSupplier`` pattern as in ``tests/ledger``.

Each contract module asks for the implementation typed as the one Protocol it tests, so only that
Protocol's methods are called (seeding aside, through ``PortHarness.seed_run``) and mypy-style
reading of a test shows exactly what the port promises. To add an implementation (a fake, another
backend), add its name to ``IMPLEMENTATIONS`` and a branch to ``harness``: every contract test then
runs against it unchanged. The SQL store runs over SQLite and PostgreSQL, with a hand-set clock so
expiry is tested by moving time, never by sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from controller.domain.enums import RunStatus
from controller.store import ComponentRecord, NewRun
from controller.store.ports import ControllerStore
from controller.store.store import Store, as_controller_store
from tests.support import Clock
from tests.support.fixtures import migrated_sqlite_url

IMPLEMENTATIONS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]

SHA_A, SHA_B, SHA_C = "a" * 40, "b" * 40, "c" * 40


@dataclass
class PortHarness:
    """One implementation of every port (``impl``), its clock, and a way to seed runs as the
    controller creates them."""

    impl: ControllerStore
    clock: Clock

    def seed_run(
        self,
        run_id: str = "r1",
        *,
        components: tuple[str, ...] = ("app",),
        status: RunStatus = RunStatus.RUNNING,
        **changes: Any,
    ) -> str:
        """A run with ``components`` (at ``SHA_A``), moved to ``status``."""
        run = NewRun(
            id=run_id,
            spec_text='objective = "x"\n',
            spec_fingerprint="fp",
            spec_path=None,
            objective="Cut latency",
            metric_name="p50_ms",
            direction="minimize",
            turns_planned=5,
            options={},
        )
        self.impl.create_run(replace(run, **changes), [component(run_id, name) for name in components])
        if status is not RunStatus.PENDING:
            self.impl.set_run_status(run_id, status)
        return run_id


def component(run_id: str, name: str) -> ComponentRecord:
    return ComponentRecord(
        run_id=run_id,
        name=name,
        repo=f"/src/{name}",
        base_ref="main",
        base_sha=SHA_A,
        head_sha=SHA_A,
        user_head=SHA_A,
        user_state="digest",
        upstream=f"acme/{name}",
        extra={},
    )


def _sql(url: str) -> Iterator[PortHarness]:
    clock = Clock()
    store = Store.open(url, upgrade=True, clock=clock)
    try:
        yield PortHarness(impl=as_controller_store(store), clock=clock)
    finally:
        store.close()


@pytest.fixture(params=IMPLEMENTATIONS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PortHarness]:
    if request.param == "sqlite":
        yield from _sql(migrated_sqlite_url(tmp_path / "ports.db"))
    elif request.param == "postgresql":
        yield from _sql(request.getfixturevalue("migrated_postgres_url"))
    else:  # pragma: no cover - a new implementation must say how it is built
        raise AssertionError(f"no harness for {request.param}")

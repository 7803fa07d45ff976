"""Ledger implementations under test (Optuna's ``StorageSupplier`` pattern).

Each implementation is a ``LedgerHarness``: the ledger the turn path would be given, plus a way to
seed a run the way the controller creates one (the ledger itself never creates runs). To add an
implementation (the HTTP ledger of the next issue), add its name to ``IMPLEMENTATIONS`` and a branch
to ``_harness`` that yields its client with the controller-side store seeding behind it; every
test in ``test_contract.py`` then runs against it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.domain.enums import RunStatus
from controller.store import ComponentRecord, NewRun, Store
from controller.store.ledger import Ledger

IMPLEMENTATIONS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@dataclass
class LedgerHarness:
    ledger: Ledger
    store: Store  # the controller's own store, for seeding runs

    def seed_run(self, run_id: str = "r1", *, components: tuple[str, ...] = ("app",), turns: int = 5) -> str:
        """A RUNNING run with ``components``, as ``crucible loop`` leaves it before the baseline."""
        self.store.create_run(
            NewRun(
                id=run_id,
                spec_text='objective = "x"\n',
                spec_fingerprint="fp",
                spec_path=None,
                objective="Cut latency",
                metric_name="p50_ms",
                direction="minimize",
                turns_planned=turns,
                options={},
            )
        )
        for name in components:
            self.store.add_component(
                ComponentRecord(
                    run_id=run_id,
                    name=name,
                    repo=f"/src/{name}",
                    base_ref="main",
                    base_sha="a" * 40,
                    head_sha="a" * 40,
                    user_head="a" * 40,
                    user_state="digest",
                    upstream=None,
                    extra={},
                )
            )
        self.store.set_run_status(run_id, RunStatus.RUNNING)
        return run_id


def _sql(url: str) -> Iterator[LedgerHarness]:
    store = Store.open(url, upgrade=True)
    try:
        yield LedgerHarness(ledger=store, store=store)
    finally:
        store.close()


@pytest.fixture(params=IMPLEMENTATIONS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerHarness]:
    if request.param == "sqlite":
        yield from _sql(f"sqlite:///{tmp_path / 'ledger.db'}")
    elif request.param == "postgresql":
        yield from _sql(request.getfixturevalue("postgres_url"))
    else:  # pragma: no cover - a new implementation must say how it is built
        raise AssertionError(f"no harness for {request.param}")

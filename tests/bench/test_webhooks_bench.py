"""``bench/webhooks.py`` still runs end to end: both servers answer, and its durability check holds.

Tiny parameters and no timed assertions (the numbers are the benchmark's business, not a test's);
what is checked is that each arm got deliveries through, that every 202 of the crucible arm is
found in the store, and that the check would notice a delivery that is not.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from controller.store import Store
from tests.bench.loading import load_bench

TINY = ["--seconds", "0.3", "--rounds", "1", "--warmup", "0.1", "--clients", "4"]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("webhooks")


def test_both_arms_accept_deliveries_and_every_202_is_stored(bench: ModuleType) -> None:
    report = bench.run(bench.parse_args(TINY))
    assert report.floor.accepted > 0 and report.floor.rate > 0
    assert report.crucible.accepted > 0 and report.crucible.rate > 0
    assert report.floor.failed == report.crucible.failed == 0
    assert report.crucible.latencies and report.floor.latencies
    assert report.accepted_by_store >= report.crucible.accepted  # the warmup's deliveries are stored too
    assert report.stored == report.accepted_by_store
    assert report.durable


@pytest.mark.postgres
def test_on_postgresql_it_succeeds_and_removes_what_it_stored(bench: ModuleType, postgres_url: str) -> None:
    assert bench.main([*TINY, "--database-url", postgres_url]) == 0  # 0 only if durable, no failures
    with Store.open(postgres_url) as store:
        assert store.pending_deliveries() == []


def test_the_durability_lookup_misses_a_delivery_that_was_not_stored(
    bench: ModuleType, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'crucible.db'}"
    with Store.open(url, upgrade=True) as store:
        assert store.save_delivery("stored", "issue_comment", "created", {"action": "created"})
    assert bench.stored_ids(url, ["stored", "lost"]) == {"stored"}
    assert bench.stored_ids(url, ["stored", "lost"], delete=True) == {"stored"}
    assert bench.stored_ids(url, ["stored"]) == set()

"""``bench/api_load.py`` still runs end to end with tiny parameters (the figures are its business): every
arm gets answers, and on PostgreSQL what it stored is removed afterwards."""

from __future__ import annotations

import pytest

from controller.store import Store
from tests.bench.loading import load_bench

TINY = ["--runs", "3", "--turns", "300", "--clients", "2", "--seconds", "0.3"]


def test_every_arm_gets_answers_on_sqlite() -> None:
    bench = load_bench("api_load")
    arms = bench.run(bench.parse_args(TINY))
    assert [arm.name for arm in arms] == ["floor", "runs", "turns"]
    assert all(arm.latencies for arm in arms)


@pytest.mark.postgres
def test_on_postgresql_it_removes_what_it_stored(postgres_url: str) -> None:
    bench = load_bench("api_load")
    assert bench.main([*TINY, "--database-url", postgres_url]) == 0
    with Store.open(postgres_url) as store:
        assert store.page_runs() == []

"""``services/views/specs.py``: a run's stored spec, read once per store and parsed once per text."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.domain.errors import NotFoundError
from controller.services.views.specs import stored_spec
from controller.store import Store
from controller.store.records import RunRecord
from tests.support import new_run
from tests.support.fixtures import migrated_sqlite_url

SPEC = """
objective = "{objective}"
[agent]
command = "agent"
[metric]
command = "python bench.py"
name = "ms"
[[component]]
name = "app"
repo = "."
"""


class CountingReads:
    """The store as ``stored_spec`` reads it, counting the run reads."""

    def __init__(self, store: Store) -> None:
        self.store, self.reads = store, 0

    def get_run(self, run_id: str) -> RunRecord:
        self.reads += 1
        return self.store.get_run(run_id)


def test_a_runs_spec_is_read_once_and_each_store_keeps_its_own(store: Store, tmp_path: Path) -> None:
    spec_path = tmp_path / "a" / "crucible.toml"
    spec_path.parent.mkdir()
    store.create_run(new_run("r1", spec_text=SPEC.format(objective="one"), spec_path=str(spec_path)))
    reads = CountingReads(store)
    first = stored_spec(reads, "r1")
    assert stored_spec(reads, "r1") is first and stored_spec(reads, "r1") is first
    assert reads.reads == 1, "the text and path are written once: read once"
    assert first.objective == "one" and first.spec_dir == spec_path.parent

    # Another database may hold a run of the same id with another spec (another store object).
    with Store.open(migrated_sqlite_url(tmp_path / "other.db"), upgrade=True) as other:
        other.create_run(new_run("r1", spec_text=SPEC.format(objective="two"), spec_path=None))
        assert stored_spec(CountingReads(other), "r1").objective == "two"
    assert stored_spec(reads, "r1") is first


def test_an_unknown_run_is_not_remembered(store: Store) -> None:
    reads = CountingReads(store)
    for _ in range(2):
        with pytest.raises(NotFoundError):
            stored_spec(reads, "nope")
    assert reads.reads == 2
    store.create_run(new_run("nope", spec_text=SPEC.format(objective="late")))
    assert stored_spec(reads, "nope").objective == "late"

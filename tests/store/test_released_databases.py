"""Upgrading the database a released crucible left behind (as Optuna tests its storage upgrades).

``tests/store/test_migrations.py`` migrates empty databases and rows written by hand for one old
revision; a user's database was written by the released code, through all its paths (a loop's turns,
samples and events, a pull request, feedback). ``tests/testdata/databases`` keeps one such file per
release, written by that release's own code (``generate.py`` there says how), with what it holds in a
JSON file beside it. Each is copied, refused as outdated, upgraded to the head revision, checked against
the models, read back through today's ``Store``, and written to once more.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from controller.domain.errors import SchemaOutdatedError
from controller.store import NewRun, Store, migrate

DATABASES = Path(__file__).resolve().parents[1] / "testdata" / "databases"
CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
RELEASES = sorted(path.stem for path in DATABASES.glob("*.sqlite3"))


def expected(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATABASES / f"{version}.json").read_text(encoding="utf-8"))
    return data


def test_every_release_has_its_database() -> None:
    released = re.findall(r"^## (\d+\.\d+\.\d+) - ", CHANGELOG.read_text(encoding="utf-8"), re.MULTILINE)
    assert released, "the changelog names no release"
    missing = sorted(set(released) - set(RELEASES))
    assert not missing, f"no database under tests/testdata/databases for {missing}: run generate.py there"


@pytest.mark.parametrize("version", RELEASES)
def test_a_released_database_upgrades_and_keeps_its_runs(version: str, tmp_path: Path) -> None:
    facts = expected(version)
    path = tmp_path / "crucible.db"
    shutil.copyfile(DATABASES / f"{version}.sqlite3", path)
    url = f"sqlite:///{path}"
    old = migrate.current_revision(url)
    assert old is not None and old != migrate.head_revision()
    with pytest.raises(SchemaOutdatedError, match="crucible db upgrade"):
        Store.open(url)

    with Store.open(url, upgrade=True) as store:
        assert store.current_revision() == migrate.head_revision()
        run = store.get_run(facts["run_id"])
        assert (run.status, run.stop_reason) == (facts["status"], facts["stop_reason"])
        assert run.baseline_value == facts["baseline"]
        assert (run.champion_value, run.champion_turn) == (facts["best"]["value"], facts["best"]["turn"])
        turns = store.list_turns(run.id)
        assert [(t.number, t.outcome, t.value) for t in turns] == [
            (t["turn"], t["outcome"], t["value"]) for t in facts["turns"]
        ]
        assert len(store.list_samples(run.id, 0)) > 0  # the baseline's samples
        assert all(store.list_samples(run.id, t.number) for t in turns)
        assert [p.number for p in store.list_pulls(run.id)] == [facts["pull_request"]]
        assert [f.author for f in store.list_feedback(run.id)] == facts["feedback_authors"]
        kinds = [event.kind for event in store.list_events(run.id)]
        assert kinds[0] == "baseline" and "completed" in kinds and "feedback_received" in kinds
        # the upgraded database takes today's writes too
        store.create_run(NewRun("after", "s", "fp", None, "o", "m", "minimize", 1, {}))
        assert store.get_run("after").status == "pending"
    assert migrate.schema_drift(url) == []

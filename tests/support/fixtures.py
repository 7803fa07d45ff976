"""Fixtures every test may use (loaded by ``tests/conftest.py``); a test folder that needs a variant
defines its own fixture of the same name, which wins there.

Variants of ``store`` without a copy of it: a module whose store keeps another clock overrides
``store_clock`` (``Ticker()``, or the ``clock`` fixture); one that wants runs in it overrides ``store``
with a fixture of the same name taking ``store``, which pytest hands the one below."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

from controller.store import Store
from controller.store.store import utc_now
from tests.support.clock import Clock


@pytest.fixture
def clock() -> Clock:
    """A clock moved by hand (``clock.advance(seconds)``)."""
    return Clock()


# The session's migrated SQLite file (``migrated_sqlite``), for helpers called outside a fixture's reach.
_MIGRATED: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the schema's head, migrated once per test process (each xdist worker its own).

    Autouse, so that ``migrated_sqlite_url`` can copy it from a helper that is not a fixture (a test
    kit's ``crucible_settings``): nearly every worker needs it anyway."""
    path = tmp_path_factory.mktemp("migrated") / "crucible.db"
    with Store.open(f"sqlite:///{path}", upgrade=True):
        pass
    _MIGRATED[:] = [path]
    return path


def migrated_sqlite_url(path: Path) -> str:
    """The URL of a new SQLite file at ``path``, a copy of the session's migrated database.

    For a test that opens its own store with ``upgrade=True`` and is not about migrations: running
    every migration on an empty SQLite file costs 0.3-1.5 s of CPU (SQLAlchemy compiling the batch
    table rebuilds), the copy some milliseconds (issue 23). A test about migrations opens an empty
    file itself (``tests/store``)."""
    url = f"sqlite:///{path}"
    seed_sqlite(url, _MIGRATED[0])
    return url


def seed_migrated(database_url: str) -> str:
    """``database_url``, after ``seed_sqlite`` put a copy of the session's migrated SQLite file where it
    names one that does not exist yet: for a helper or fixture that opens its own store with
    ``upgrade=True`` over the ``database_url`` fixture (which hands out an empty SQLite path)."""
    seed_sqlite(database_url, _MIGRATED[0])
    return database_url


def seed_sqlite(database_url: str, migrated: Path) -> None:
    """Put a copy of ``migrated`` where ``database_url`` names a SQLite file that does not exist yet.

    For a fixture that opens a store with ``upgrade=True``: the upgrade then finds the schema at its
    head and does nothing, where running every migration cost each test a few tenths of a second, more
    on a busy machine (issue 23). Migrations from an empty database are tested on their own
    (``tests/store``) and run by every end-to-end test. PostgreSQL URLs and existing files: untouched."""
    prefix = "sqlite:///"
    if not database_url.startswith(prefix):
        return
    target = Path(database_url.removeprefix(prefix))
    if not target.exists():
        shutil.copyfile(migrated, target)


@pytest.fixture
def store_clock() -> Callable[[], datetime]:
    """The clock of the ``store`` fixture: the real one unless a module overrides this."""
    return utc_now


@pytest.fixture
def store(database_url: str, migrated_sqlite: Path, store_clock: Callable[[], datetime]) -> Iterator[Store]:
    """An upgraded ``Store`` over ``database_url`` (SQLite and PostgreSQL) on ``store_clock``, closed
    after the test so no pooled connection outlives it."""
    seed_sqlite(database_url, migrated_sqlite)
    with Store.open(database_url, upgrade=True, clock=store_clock) as opened:
        yield opened

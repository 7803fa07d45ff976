"""Fixtures every test may use (loaded by ``tests/conftest.py``); a test folder that needs a variant
defines its own fixture of the same name, which wins there."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.store import Store
from tests.support.clock import Clock


@pytest.fixture
def clock() -> Clock:
    """A clock moved by hand (``clock.advance(seconds)``)."""
    return Clock()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the schema's head, migrated once per test process (each xdist worker its own)."""
    path = tmp_path_factory.mktemp("migrated") / "crucible.db"
    with Store.open(f"sqlite:///{path}", upgrade=True):
        pass
    return path


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
def store(database_url: str, migrated_sqlite: Path) -> Iterator[Store]:
    """An upgraded ``Store`` over ``database_url`` (SQLite and PostgreSQL), closed after the test so
    no pooled connection outlives it."""
    seed_sqlite(database_url, migrated_sqlite)
    with Store.open(database_url, upgrade=True) as opened:
        yield opened

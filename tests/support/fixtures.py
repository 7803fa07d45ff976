"""Fixtures every test may use (loaded by ``tests/conftest.py``); a test folder that needs a variant
defines its own fixture of the same name, which wins there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller.store import Store
from tests.support.clock import Clock


@pytest.fixture
def clock() -> Clock:
    """A clock moved by hand (``clock.advance(seconds)``)."""
    return Clock()


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    """An upgraded ``Store`` over ``database_url`` (SQLite and PostgreSQL), closed after the test so
    no pooled connection outlives it."""
    with Store.open(database_url, upgrade=True) as opened:
        yield opened

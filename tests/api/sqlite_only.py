"""``database_url`` on SQLite only, for the modules that import it (``from tests.api.sqlite_only import
sqlite_only``): tests whose subject is a page (its HTML, the browser, the live script, the API docs),
not the database under it.

The root ``database_url`` runs a test on SQLite and PostgreSQL. These pages read through the store's
methods, which run on both databases in ``tests/store`` and ``tests/ledger`` (and the API's own
PostgreSQL path in ``test_hot_path``); a second database here doubled these modules' time, much of it
a browser's, and checked nothing the first did not (issue 23).
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(name="database_url")
def sqlite_only(tmp_path: Path) -> str:
    """A SQLite file in the test's temp dir, in place of the root fixture's two databases."""
    return f"sqlite:///{tmp_path / 'crucible.db'}"

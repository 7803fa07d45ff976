"""``database_url`` on SQLite only, for tests whose subject is a page (its HTML, the browser, the live
script, the API docs) or the HTTP edge (authentication, validation, the protocol header), not the
database under it: a whole module imports the fixture (``from tests.api.sqlite_only import
sqlite_only``), a single test takes the mark (``@SQLITE_ONLY``).

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


# The root fixture's parameter narrowed to SQLite for one test (its other fixtures unchanged).
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
# And to PostgreSQL, for a test about sharing one database between processes (a controller killed and
# another taking over, as replicas do), which is what PostgreSQL is deployed for.
POSTGRES_ONLY = pytest.mark.parametrize(
    "database_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)

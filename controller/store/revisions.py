"""The migration history this version of crucible ships, read from the migration files themselves.

The startup check compares a database's stamped revision with the head found here; reading the files'
own ``revision =`` and ``down_revision =`` lines (the text Alembic reads) costs neither Alembic nor
SQLAlchemy, so the cheapest commands can check a schema too (``listing.py``; ADR-0005 decision 6,
ADR-0013). ``tests/store/test_migrations.py`` checks the graph against Alembic's own.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_REVISION_LINE = re.compile(r'^(down_revision|revision)\s*(?::[^=]*)?=\s*(None|"([^"]*)")', re.MULTILINE)


@functools.cache
def revision_graph() -> dict[str, str | None]:
    """revision -> down_revision of every migration file."""
    graph: dict[str, str | None] = {}
    for path in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        found = {m.group(1): m.group(3) for m in _REVISION_LINE.finditer(path.read_text())}
        if found.get("revision"):
            graph[str(found["revision"])] = found.get("down_revision")
    return graph


def head_revision() -> str:
    """The newest revision this version of crucible knows."""
    graph = revision_graph()
    heads = set(graph) - {down for down in graph.values() if down}
    if len(heads) != 1:  # pragma: no cover - the package always ships one linear history
        raise RuntimeError(f"expected one head under {MIGRATIONS_DIR}, found {sorted(heads)}")
    return heads.pop()


def known_revisions() -> frozenset[str]:
    """Every revision id this version of crucible ships."""
    return frozenset(revision_graph())

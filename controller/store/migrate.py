"""Connecting to the database and keeping its schema current (CONTRIBUTING.md, rule 8).

Alembic is configured in code, with ``script_location`` inside the package, so migrations run the
same from a checkout and from an installed wheel, without an ``alembic.ini``. Migrations are their
own step (``crucible db upgrade``); ``Store.open`` refuses a database that is not at the head.
Alembic itself is imported only to migrate or compare schemas: the startup check reads the stamped
revision with SQLAlchemy and the revision graph from the migration files' own ``revision =`` lines
(``revisions.py``), so a command that opens an up-to-date database does not pay for Alembic
(ADR-0005 decision 6; a test checks the graph against Alembic's).

``make_engine`` lives here because migrations and the store must connect the same way: on SQLite,
WAL journal, a 30 s busy timeout, foreign keys on, and ``BEGIN IMMEDIATE`` for every writing
transaction (a deferred transaction that reads and then writes can fail with "database is locked"
without waiting; an immediate one waits for the write lock up front).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.pool import StaticPool

from controller.domain.errors import SchemaOutdatedError
from controller.store.models import Base, check_constraints
from controller.store.revisions import MIGRATIONS_DIR, head_revision, known_revisions
from controller.store.revisions import revision_graph as revision_graph  # re-exported

if TYPE_CHECKING:
    from alembic.config import Config

BUSY_TIMEOUT_MS = 30_000
# Execution option: this connection only reads, so on SQLite it may BEGIN DEFERRED and never
# takes the write lock (WAL readers do not block the writer).
READ_ONLY = "crucible_read_only"
UPGRADE_HINT = "run `crucible db upgrade`"
# Connections kept open, and opened beyond that at most, per process (ADR-0013). SQLAlchemy's 5 + 10
# made the API open and close a connection for every request past the fifth concurrent one (a new
# PostgreSQL backend each time); 20 covers 16 busy clients plus the scheduler's and the hub's threads,
# and 20 + 20 matches the 40 threads FastAPI runs routes in.
POOL_SIZE, POOL_OVERFLOW = 20, 20


def normalize_url(url: str | URL) -> URL:
    """Parse ``url``; a bare ``postgresql://`` means psycopg 3, the driver crucible ships with."""
    parsed = sa.make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def is_sqlite_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def make_engine(url: str | URL) -> Engine:
    """An engine for ``url`` configured as crucible needs it (see the module docstring)."""
    parsed = normalize_url(url)
    # NaN and infinity are not JSON; refuse them on every backend instead of only on PostgreSQL.
    serializer = functools.partial(json.dumps, allow_nan=False)
    if parsed.get_backend_name() != "sqlite":
        return sa.create_engine(
            parsed,
            json_serializer=serializer,
            pool_pre_ping=True,
            pool_size=POOL_SIZE,
            max_overflow=POOL_OVERFLOW,
        )
    extra: dict[str, object] = {}
    if is_sqlite_memory(parsed):
        # One shared connection, or every checkout would see a different empty database.
        extra = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
    else:
        extra = {"pool_size": POOL_SIZE, "max_overflow": POOL_OVERFLOW}
    engine = sa.create_engine(parsed, json_serializer=serializer, **extra)
    sa.event.listen(engine, "connect", _sqlite_on_connect)
    sa.event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def page_reader(engine: Engine) -> Engine:
    """``engine`` for reads whose every statement stands alone (a page's rows of decided turns do not
    change once visible): on PostgreSQL in autocommit, which spares the BEGIN and COMMIT round trips
    that were a third of a runs page's time under load (ADR-0013); on SQLite a read-only transaction
    (there, autocommit would defeat the ``begin`` listener below)."""
    read_only = engine.execution_options(**{READ_ONLY: True})
    if engine.url.get_backend_name() == "sqlite":
        return read_only
    return read_only.execution_options(isolation_level="AUTOCOMMIT")


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN itself (the pysqlite transaction recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL never corrupts the database and loses nothing on a process crash
        # (kill -9); only a power cut may drop the last commits. It makes each commit several times
        # cheaper, and the turn loop commits a handful of times per turn.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    read_only = conn.get_execution_options().get(READ_ONLY, False)
    conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def _config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    config.attributes["connection"] = connection
    return config


@contextmanager
def _engine_for(target: str | Engine) -> Iterator[Engine]:
    """Use ``target`` if it is an engine, else build one for the URL and dispose of it afterwards."""
    if isinstance(target, Engine):
        yield target
        return
    engine = make_engine(target)
    try:
        yield engine
    finally:
        engine.dispose()


def sqlite_file_exists(url: URL) -> bool:
    """False only for a file-based SQLite URL whose file is missing; True for every other database."""
    if url.get_backend_name() != "sqlite" or is_sqlite_memory(url):
        return True
    return Path(str(url.database)).expanduser().exists()


def ensure_sqlite_dir(url: URL) -> None:
    """Create the directory of a file-based SQLite database (a user's first run must just work)."""
    if url.get_backend_name() == "sqlite" and not is_sqlite_memory(url):
        Path(str(url.database)).expanduser().parent.mkdir(parents=True, exist_ok=True)


def upgrade(target: str | Engine) -> None:
    """Apply every migration up to the head, in one transaction (DDL is transactional on both backends).

    SchemaOutdatedError if the database is at a revision this crucible does not know.
    """
    with _engine_for(target) as engine:
        current = current_revision(engine)
        if current is not None and current not in known_revisions():
            raise SchemaOutdatedError(_unknown_revision(current))
        if current == head_revision():
            return
        from alembic import command

        ensure_sqlite_dir(engine.url)
        with engine.begin() as conn:
            command.upgrade(_config(conn), "head")


def current_revision(target: str | Engine) -> str | None:
    """The revision the database is stamped with; None for a database never migrated.

    A SQLite file that does not exist yet is not created here: its revision is None.
    """
    url = target.url if isinstance(target, Engine) else normalize_url(target)
    if not sqlite_file_exists(url):
        return None
    with _engine_for(target) as engine, engine.execution_options(**{READ_ONLY: True}).connect() as conn:
        if not sa.inspect(conn).has_table(VERSION_TABLE):
            return None
        rows = list(conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())
        if len(rows) > 1:
            raise SchemaOutdatedError(
                f"the database is stamped with several revisions {rows}; {UPGRADE_HINT}"
            )
        return str(rows[0]) if rows else None


VERSION_TABLE = "alembic_version"


def check_at_head(target: str | Engine) -> None:
    """Raise SchemaOutdatedError unless the database is at the head revision (the startup check)."""
    with _engine_for(target) as engine:
        if not sqlite_file_exists(engine.url):
            raise SchemaOutdatedError(f"no crucible database at {engine.url.database}; {UPGRADE_HINT}")
        current, head = current_revision(engine), head_revision()
    if current == head:
        return
    if current is None:
        raise SchemaOutdatedError(f"the database has no crucible schema; {UPGRADE_HINT}")
    if current not in known_revisions():
        raise SchemaOutdatedError(_unknown_revision(current))
    raise SchemaOutdatedError(f"the database schema is at {current}, crucible needs {head}; {UPGRADE_HINT}")


def _unknown_revision(revision: str) -> str:
    return (
        f"the database schema is at revision {revision}, which this crucible does not know "
        "(written by a newer crucible?)"
    )


def schema_drift(target: str | Engine) -> list[str]:
    """Differences between the migrated database and the models; empty when they agree.

    Alembic's ``compare_metadata`` covers tables, columns, types, nullability, indexes, unique and
    foreign keys; it ignores CHECK constraints, so those are compared here by name and by the set
    of quoted literals they allow (backends rewrite the CHECK text, the literals survive).
    """
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with _engine_for(target) as engine, engine.execution_options(**{READ_ONLY: True}).connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diffs = [repr(diff) for diff in compare_metadata(context, Base.metadata)]
        return diffs + _check_constraint_drift(conn)


def _literals(sql: str) -> set[str]:
    return set(re.findall(r"'([^']*)'", sql))


def _check_constraint_drift(conn: Connection) -> list[str]:
    inspector = sa.inspect(conn)
    expected: dict[tuple[str, str], str] = {(t, name): text for t, name, text in check_constraints()}
    found: dict[tuple[str, str], str] = {}
    for table in Base.metadata.tables:
        for reflected in inspector.get_check_constraints(table):
            found[(table, str(reflected["name"]))] = str(reflected["sqltext"])
    problems = [f"missing CHECK {t}.{name}" for t, name in expected.keys() - found.keys()]
    problems += [f"unexpected CHECK {t}.{name}" for t, name in found.keys() - expected.keys()]
    for key in expected.keys() & found.keys():
        if _literals(expected[key]) != _literals(found[key]):
            problems.append(f"CHECK {key[0]}.{key[1]} allows {found[key]!r}, the models {expected[key]!r}")
    return sorted(problems)

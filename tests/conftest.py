"""Shared fixtures: real git repositories in temp dirs and real databases (SQLite and PostgreSQL).

Every test gets its own CRUCIBLE_HOME and HOME under tmp_path, and inherited GIT_* variables are
stripped, so nothing a test does can touch the developer's real state. End-to-end tests take the
machine's own HOME back (``machine_home``), because that is how people run crucible: a test that only
passes with an empty HOME hides the bugs of the machines people have (a pyenv shim under ``~``).
"""

from __future__ import annotations

import os
import pwd
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from controller.workspace.denylist import DENIED_IN_HOME
from tests.support.waiting import wait_until

# The shared fixtures (``store``, ``clock``): tests/support.
pytest_plugins = ["tests.support.fixtures"]

PG_ADMIN_URL = os.environ.get(
    "CRUCIBLE_TEST_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
# The HOME of the shell that started pytest (read before any fixture replaces it), else the passwd one.
MACHINE_HOME = Path(os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir)
# ``CRUCIBLE_TEST_E2E_HOME=temp`` runs the end-to-end tests with a temporary HOME instead.
E2E_HOME = os.environ.get("CRUCIBLE_TEST_E2E_HOME", "machine")
# What a run of crucible (git, an agent CLI, crucible's own defaults) could write under HOME, besides
# the credentials of the deny list: none of it may change while a test runs with the machine's HOME.
HOME_WATCHED = (
    ".gitconfig",
    ".config/git",
    ".local/share/crucible",
    ".config/crucible",
    ".aider.chat.history.md",
    ".aider.input.history",
    *DENIED_IN_HOME,
)


def home_footprint(home: Path) -> dict[str, tuple[int, int] | None]:
    """(mtime, size) of each watched path under ``home`` (None when absent)."""
    found: dict[str, tuple[int, int] | None] = {}
    for rel in HOME_WATCHED:
        try:
            info = (home / rel).lstat()
        except OSError:
            found[rel] = None
            continue
        found[rel] = (info.st_mtime_ns, info.st_size)
    return found


@contextmanager
def watched_machine_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """HOME set to the machine's own; raises at the end if anything under HOME_WATCHED changed
    meanwhile (a ``git config --global``, crucible's default state, an agent's state or a credential
    file)."""
    monkeypatch.setenv("HOME", str(MACHINE_HOME))
    before = home_footprint(MACHINE_HOME)
    yield MACHINE_HOME
    after = home_footprint(MACHINE_HOME)
    changed = sorted(rel for rel in HOME_WATCHED if before[rel] != after[rel])
    assert not changed, f"the test wrote into the machine's HOME ({MACHINE_HOME}): {changed}"


@pytest.fixture
def machine_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The machine's own HOME for this test (CRUCIBLE_HOME stays in tmp); fails the test if anything
    under HOME_WATCHED changed meanwhile."""
    with watched_machine_home(monkeypatch) as home:
        yield home


def isolate_environment(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """No inherited GIT_* or CRUCIBLE_* variable; HOME and CRUCIBLE_HOME under ``root``."""
    for name in list(os.environ):
        if name.startswith("GIT_") or name.startswith("CRUCIBLE_"):
            monkeypatch.delenv(name, raising=False)
    home = root / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CRUCIBLE_HOME", str(root / "crucible-home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_environment(monkeypatch, tmp_path)


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` and return stdout; raise with stderr on failure."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


def make_repo(path: Path, files: dict[str, str], *, branch: str = "main") -> Path:
    """Create a git repository at ``path`` with one commit holding ``files``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    for rel, text in files.items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def repo_factory(tmp_path: Path) -> Callable[..., Path]:
    """``repo_factory(files, name="repo")`` -> path of a fresh committed repository."""

    def factory(files: dict[str, str], name: str = "repo", branch: str = "main") -> Path:
        return make_repo(tmp_path / name, files, branch=branch)

    return factory


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test, dropped afterwards.

    Fails (does not skip) when the server is down: CI starts it, and a silently skipped
    backend would hide exactly the bugs these tests exist for.
    """
    yield from _postgres_database(template=None)


@pytest.fixture
def migrated_postgres_url(migrated_postgres: str) -> Iterator[str]:
    """Like ``postgres_url``, but the database starts at the schema's head: a copy of
    ``migrated_postgres``, for a test that opens it with ``upgrade=True`` first thing."""
    yield from _postgres_database(template=migrated_postgres)


@pytest.fixture(scope="session")
def migrated_postgres() -> Iterator[str]:
    """The name of a PostgreSQL database at the schema's head, migrated once per test process (each
    xdist worker its own, so no two ``CREATE DATABASE ... TEMPLATE`` copy one while it is open).

    Copying it costs a test what creating an empty database does, where running every migration
    cost each PostgreSQL test another 0.2-0.5 s on a busy machine (issue 23). Migrations from an
    empty database are tested on their own (``tests/store``) on ``postgres_url``."""
    import sqlalchemy as sa

    from controller.store import Store

    name = f"crucible_template_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        with Store.open(_database_url(name), upgrade=True):
            pass
        yield name
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _database_url(name: str) -> str:
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def _postgres_database(template: str | None) -> Iterator[str]:
    """A new database (a copy of ``template`` when given) for the test, dropped afterwards; the test
    fails at its teardown when it left a connection to it open."""
    import sqlalchemy as sa

    name = f"crucible_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        copy = f' TEMPLATE "{template}"' if template else ""
        conn.execute(sa.text(f'CREATE DATABASE "{name}"{copy}'))
    left_open = 0
    try:
        yield _database_url(name)
        left_open = connections_left_open(admin, name)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    if left_open:
        # A Store or engine the test never closed: its pooled psycopg connection would be collected
        # later, inside whichever test runs then, as a ResourceWarning far from its cause (issue 22).
        pytest.fail(
            f"{left_open} connection(s) to the test's database still open after it: close every Store"
        )


def connections_left_open(admin: Any, database: str, grace: float = 10.0) -> int:
    """Connections to ``database`` once the test is over, after ``grace`` seconds for processes the test
    started to exit; ``DROP DATABASE ... WITH (FORCE)`` would end them silently."""
    import sqlalchemy as sa

    query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = :name")

    def count() -> int:
        with admin.connect() as conn:
            return int(conn.execute(query, {"name": database}).scalar_one())

    try:
        wait_until(lambda: count() == 0, f"{database}'s connections to close", timeout=grace, interval=0.1)
    except AssertionError:
        return count()
    return 0


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Parametrises a test over both supported databases.

    A test that takes the ``store`` fixture gets its PostgreSQL database at the schema's head (the
    fixture upgrades it before the test anyway), copied from ``migrated_postgres``; as on SQLite
    (``seed_sqlite``), the store's own upgrade then has nothing to do."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'crucible.db'}"
    elif "store" in request.fixturenames:
        yield request.getfixturevalue("migrated_postgres_url")
    else:
        yield request.getfixturevalue("postgres_url")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

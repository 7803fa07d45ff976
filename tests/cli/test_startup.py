"""Start-up cost, pinned by what is imported: ``crucible --help`` and ``crucible runs list`` import neither
FastAPI nor the forge (PyGithub) nor Alembic; ``--help`` not even SQLAlchemy, and ``runs list`` on an
up-to-date SQLite database neither SQLAlchemy nor pydantic (issue 8, deliverable 10; ADR-0013). Timing is
``bench/cli_start.py``'s business; a module list cannot be noisy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
from controller.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
roots = {name.split(".")[0] for name in sys.modules}
print(json.dumps(sorted(roots | {n for n in sys.modules if n.startswith("controller.")})))
"""

HEAVY = {"fastapi", "starlette", "github", "alembic", "uvicorn", "httpx", "prometheus_client"}


def _imported(args: list[str], home: Path, database_url: str | None = None) -> set[str]:
    env = {**os.environ, "CRUCIBLE_HOME": str(home)}
    env.pop("CRUCIBLE_DATABASE_URL", None)
    if database_url is not None:
        env["CRUCIBLE_DATABASE_URL"] = database_url
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_help_imports_no_framework_no_forge_no_database(tmp_path: Path) -> None:
    modules = _imported(["--help"], tmp_path)
    assert "click" in modules  # the probe does see imports
    assert not modules & (HEAVY | {"sqlalchemy", "pydantic"})
    assert "controller.store.store" not in modules


def test_runs_list_on_the_first_run_creates_the_schema_through_the_store(tmp_path: Path) -> None:
    modules = _imported(["runs", "list"], tmp_path)
    assert {"sqlalchemy", "alembic", "controller.store.store"} <= modules
    assert not modules & (HEAVY - {"alembic"})


def test_runs_list_reads_an_up_to_date_sqlite_file_without_sqlalchemy_or_pydantic(
    tmp_path: Path, migrated_sqlite: Path
) -> None:
    # A home whose database is at the schema's head (a copy of one, where a probe of ``crucible db
    # upgrade`` was a second process start; that command's own test is test_cli_contract's).
    shutil.copyfile(migrated_sqlite, tmp_path / "crucible.db")
    modules = _imported(["runs", "list"], tmp_path)
    assert "controller.store.listing" in modules  # the probe sees the read it made
    assert not modules & (HEAVY | {"sqlalchemy", "pydantic", "pydantic_settings"})


@pytest.mark.postgres
def test_runs_list_on_postgresql_imports_the_store_but_no_framework_forge_or_alembic(
    tmp_path: Path, migrated_postgres_url: str
) -> None:
    modules = _imported(["runs", "list"], tmp_path, migrated_postgres_url)  # at the schema's head
    assert "sqlalchemy" in modules  # it touches the store, as it must
    assert not modules & HEAVY


def test_a_server_command_does_not_import_the_store(tmp_path: Path) -> None:
    # --server talks HTTP: httpx yes, the database no (the server is unreachable here: exit 1).
    modules = _imported(["runs", "list", "--server", "http://127.0.0.1:9"], tmp_path)
    assert "httpx" in modules
    assert "sqlalchemy" not in modules and "fastapi" not in modules


def test_a_loop_without_a_webhook_endpoint_imports_no_web_framework(tmp_path: Path) -> None:
    from tests.conftest import make_repo

    bench = 'printf "METRIC score=%s\\n" "$(cat value.txt)"\n'
    make_repo(tmp_path / "repo", {"value.txt": "10\n", "bench.sh": bench, "agent.sh": "echo 9 > value.txt\n"})
    spec = tmp_path / "crucible.toml"
    spec.write_text(
        'objective = "lower"\nturns = 1\n[agent]\ncommand = "sh agent.sh"\n[sandbox]\nmode = "none"\n'
        '[metric]\ncommand = "sh bench.sh"\nname = "score"\ndirection = "minimize"\nsamples = 1\n'
        'confidence = 0.0\ninterleave = false\n[[component]]\nname = "app"\nrepo = "repo"\n'
        'mutable = ["value.txt"]\nprotected = ["bench.sh", "agent.sh"]\n'
    )
    modules = _imported(["loop", "--spec", str(spec), "--json"], tmp_path / "home")
    assert "controller.services.execution.loop" in modules  # the probe saw the run
    assert not modules & {"fastapi", "starlette", "uvicorn"}

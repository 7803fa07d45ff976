"""Start-up cost, pinned by what is imported: ``crucible --help`` and ``crucible runs list`` import neither
FastAPI nor the forge (PyGithub) nor Alembic, and ``--help`` not even SQLAlchemy (issue 8, deliverable
10). Timing is ``bench/cli_start.py``'s business; a module list cannot be noisy.
"""

from __future__ import annotations

import json
import os
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


def _imported(args: list[str], home: Path) -> set[str]:
    env = {**os.environ, "CRUCIBLE_HOME": str(home)}
    env.pop("CRUCIBLE_DATABASE_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_help_imports_no_framework_no_forge_no_database(tmp_path: Path) -> None:
    modules = _imported(["--help"], tmp_path)
    assert "click" in modules  # the probe does see imports
    assert not modules & (HEAVY | {"sqlalchemy", "pydantic"})
    assert "controller.store.store" not in modules


@pytest.mark.parametrize("first", [True, False], ids=["fresh-home", "migrated"])
def test_runs_list_imports_the_store_but_no_framework_forge_or_alembic(tmp_path: Path, first: bool) -> None:
    if not first:
        _imported(["db", "upgrade"], tmp_path)
    modules = _imported(["runs", "list"], tmp_path)
    assert "sqlalchemy" in modules  # it touches the store, as it must
    expected_absent = HEAVY if not first else HEAVY - {"alembic"}  # a first run creates the schema
    assert not modules & expected_absent


def test_a_server_command_does_not_import_the_store(tmp_path: Path) -> None:
    # --server talks HTTP: httpx yes, the database no (the server is unreachable here: exit 1).
    modules = _imported(["runs", "list", "--server", "http://127.0.0.1:9"], tmp_path)
    assert "httpx" in modules
    assert "sqlalchemy" not in modules and "fastapi" not in modules

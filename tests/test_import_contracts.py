"""The import contracts have no holes: one wrong import per rule, injected into a copy, breaks its contract.

A contract that is never seen failing may be enforcing nothing: the layers contract once ranked the engine
above the store, so ``engine -> store`` passed, and ``psycopg`` or ``uvicorn`` could be imported anywhere
(issue 22: of 22 wrong imports injected, 10 were caught; every one it names as passing is a case below).
This test copies ``controller/`` and ``.importlinter`` once per session, then for each rule appends one
import that the rule forbids to one module, runs ``lint-imports`` on the copy and checks that the
contract naming the rule is the one broken.
The injection is reverted after each case, so the cases share one copy (``lint-imports`` takes about a
second on the tree; its cache is keyed by file modification, so only the touched module is re-read).
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# (contract id in .importlinter, module file under controller/, the import it must not have)
INJECTIONS = [
    # the layer order
    ("layers", "engine/policy.py", "import controller.store.store"),
    ("layers", "store/errors.py", "import controller.engine.policy"),
    ("layers", "stats/keep.py", "import controller.workspace"),
    ("layers", "forge/__init__.py", "import controller.services"),
    ("layers", "domain/enums.py", "import controller.config"),
    ("layers", "config/spec.py", "import controller.stats"),
    ("layers", "services/views/schemas.py", "import controller.wiring"),
    # the services packages and the execution package's distance from the Store
    ("services", "services/views/schemas.py", "import controller.services.control"),
    ("execution-store", "services/execution/measure.py", "import controller.store.store"),
    ("execution-store", "services/execution/turn.py", "from controller.store import Store"),
    ("execution-store", "services/views/reads.py", "from controller.store import Store"),
    ("localforge", "services/feedback/publish.py", "import controller.localforge.app"),
    ("localforge", "api/app.py", "import controller.localforge"),
    # the pure deciders
    ("pure", "engine/policy.py", "import subprocess"),
    ("pure", "stats/keep.py", "import httpx"),
    # the database
    ("sqlalchemy", "services/views/reads.py", "import psycopg"),
    ("sqlalchemy", "api/runs.py", "import sqlalchemy"),
    ("sqlalchemy", "cli/main.py", "import psycopg"),
    # web server, command line, templates
    ("web", "engine/policy.py", "import uvicorn"),
    ("web", "config/spec.py", "import uvicorn"),
    ("web", "services/control/service.py", "import click"),
    ("web", "services/feedback/publish.py", "import uvicorn"),
    ("web", "stats/keep.py", "import jinja2"),
    # HTTP clients
    ("http-clients", "services/feedback/publish.py", "import httpx"),
    ("http-clients", "workspace/git.py", "import requests"),
    ("http-clients", "workspace/git.py", "import httpx"),
    ("http-clients", "store/store.py", "import httpx"),
    # processes
    ("no-subprocess", "domain/enums.py", "import subprocess"),
    ("no-subprocess", "store/store.py", "import subprocess"),
    ("no-subprocess", "config/settings.py", "import subprocess"),
    # one SDK per adapter
    ("pygithub", "services/feedback/publish.py", "import github"),
    ("fastapi", "services/control/service.py", "import fastapi"),
    ("kubernetes", "wiring.py", "import kubernetes"),
]


def contract_names() -> dict[str, str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    prefix = "importlinter:contract:"
    return {
        section.removeprefix(prefix): parser[section]["name"]
        for section in parser.sections()
        if section.startswith(prefix)
    }


def lint(copy: Path) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH puts the copy ahead of the installed (editable) package.
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run(
        [str(LINT_IMPORTS), str(copy / ".importlinter")],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def breaks(output: str, name: str) -> bool:
    """Whether ``lint-imports`` reports the contract ``name`` as broken.

    Its summary wraps long names to the terminal's width, so words are compared, not lines.
    """
    # A name of exactly the width runs into the verdict with no space between them.
    pattern = re.escape(" ".join(name.split())) + " ?BROKEN"
    return re.search(pattern, " ".join(output.split())) is not None


@pytest.fixture(scope="session")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    copy = tmp_path_factory.mktemp("contracts")
    shutil.copytree(ROOT / "controller", copy / "controller", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / ".importlinter", copy / ".importlinter")
    clean = lint(copy)
    assert clean.returncode == 0, f"the copy must pass before anything is injected:\n{clean.stdout}"
    yield copy


def test_every_contract_has_an_injection() -> None:
    assert set(contract_names()) == {contract for contract, _, _ in INJECTIONS}


@pytest.mark.parametrize(("contract", "module", "statement"), INJECTIONS)
def test_a_wrong_import_breaks_its_contract(
    tree_copy: Path, contract: str, module: str, statement: str
) -> None:
    path = tree_copy / "controller" / module
    original = path.read_text(encoding="utf-8")
    try:
        path.write_text(f"{original}\n{statement}  # injected\n", encoding="utf-8")
        proc = lint(tree_copy)
    finally:
        path.write_text(original, encoding="utf-8")
    name = contract_names()[contract]
    assert proc.returncode != 0, f"{statement} in {module} passed every contract:\n{proc.stdout}"
    assert breaks(proc.stdout, name), f"{statement} in {module} did not break {name!r}:\n{proc.stdout}"

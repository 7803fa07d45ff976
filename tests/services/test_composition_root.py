"""The composition root is the only builder of the process's big parts, and it cannot be misused.

``controller.wiring`` builds the store, the forge clients and the brokers; everything else is handed
them (ADR-0003, ADR-0030). The scan below reads every module of ``controller`` and fails on a call
that constructs one of those parts anywhere else, naming the file and line, so a command or a
service that starts building its own store (the first sign of the god-object controller) fails here
the day it is written. The exceptions are listed with why each process or tool builds its own.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from controller.config.settings import Settings
from controller.domain.errors import SpecError
from controller.store.http_ledger import HttpLedger
from controller.wiring import Mode, Root, build
from tests.support import root_for
from tests.support.fixtures import migrated_sqlite_url

PACKAGE = Path(__file__).resolve().parents[2] / "controller"

# What only the root constructs: forge clients, stores (and the worker's HTTP ledger), brokers.
BUILT_BY_THE_ROOT = {
    "GithubForge",
    "Store",
    "Store.open",
    "HttpLedger",
    "LocalBroker",
    "SubprocessBroker",
    "KubernetesBroker",
    "RoutedBroker",
    "HypothesisPods",
    "RunService",
}
ALLOWED = {
    "wiring.py": "the composition root",
    # A class's own module may name it (a classmethod such as ``Store.open`` builds ``cls``).
    "store/store.py": "Store.open is the store's own constructor",
    # Separate processes and tools, each its own (small) root:
    "api/writer_process.py": "the webhook writer is a child process; it opens its own store from the URL",
    "api/docs.py": "renders the OpenAPI document from an in-memory store, no process behind it",
}


def _name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return None


def constructions() -> list[tuple[str, int, str]]:
    """(module path under controller/, line, what) of every construction of a root-built part."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED or rel.startswith("localforge/"):  # the local forge is its own application
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _name(node) in BUILT_BY_THE_ROOT:
                found.append((rel, node.lineno, str(_name(node))))
    return found


def test_nothing_outside_the_root_builds_a_store_a_forge_client_or_a_broker() -> None:
    assert constructions() == []


def test_the_scan_sees_a_construction() -> None:
    tree = ast.parse("from controller.store.store import Store\nstore = Store.open('sqlite://')\n")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert [_name(c) for c in calls] == ["Store.open"], "the scan would catch this line"


# Who may name the concrete ``Store`` at all (ADR-0030, "The boundary of the ports"): the store itself,
# the root, and the app's composition, which needs one attribute beyond the ports (``url``, the
# database a second reader or a second process opens). Every services module and router takes a port.
# ``lint-imports`` cannot hold this line: ``from controller.store import Store`` is an import of the
# package, whose ``__init__`` reaches ``store.store`` only indirectly, so the ``execution-store``
# contract (indirect imports allowed) lets it through. This scan reads the names.
TAKES_THE_STORE = {
    "wiring.py": "the composition root builds it",
    "api/app.py": "hands it to the routers as their ports; its url chooses the hot path's reads",
    "api/serve.py": "passes the root's store on to create_app",
    "cli/listen.py": "its url, for the webhook writer's child process",
    "api/writer_process.py": "that child process opens its own store from the URL",
    "api/docs.py": "renders the OpenAPI document from an in-memory store",
}
STORE_MODULES = {"controller.store", "controller.store.store"}


def names_the_store(tree: ast.AST) -> bool:
    """Whether a module imports the concrete ``Store`` (by name) or its module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in STORE_MODULES:
            names = {alias.name for alias in node.names}
            if "Store" in names or (node.module == "controller.store" and "store" in names):
                return True
        if isinstance(node, ast.Import) and any(a.name == "controller.store.store" for a in node.names):
            return True
    return False


def test_only_the_root_and_the_apps_composition_name_the_concrete_store() -> None:
    naming = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if not path.relative_to(PACKAGE).as_posix().startswith("store/")
        and names_the_store(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert naming == set(TAKES_THE_STORE), "a module outside the boundary takes the concrete Store"


@pytest.mark.parametrize(
    "line",
    [
        "from controller.store import Store",
        "from controller.store.store import Store as S",
        "import controller.store.store",
        "from controller.store import store",
    ],
)
def test_the_boundary_scan_sees_each_way_of_naming_the_store(line: str) -> None:
    assert names_the_store(ast.parse(line))
    assert not names_the_store(ast.parse("from controller.store import NewRun, StoreError"))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", database_url=migrated_sqlite_url(tmp_path / "crucible.db"))


def test_a_built_root_is_frozen(settings: Settings) -> None:
    root = build({}, settings=settings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        root.inline = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        root.mode = Mode.SERVE  # type: ignore[misc]
    assert root.inline and not build({}, settings=settings, mode=Mode.SERVE).inline


@pytest.mark.parametrize("first", ["service", "worker_api"])
def test_a_serve_root_is_wired_whichever_part_is_asked_for_first(settings: Settings, first: str) -> None:
    root = build({}, settings=settings, mode=Mode.SERVE, listen_url="http://127.0.0.1:8080")
    try:
        if first == "service":
            service = root.service()
            remote = root.worker_api()
        else:
            remote = root.worker_api()
            service = root.service()
        assert service is root.service() and remote is root.worker_api()
        assert service.reader is root.reader() and service.store is root.store() is remote.store
        assert remote.controller_url == "http://127.0.0.1:8080"
        assert root.admission is not None, "a server admits specs from API clients by the operator's rules"
    finally:
        root.close()


def test_a_loop_root_serves_no_worker_api_and_says_so(settings: Settings) -> None:
    root: Root = build({}, settings=settings)
    with pytest.raises(SpecError, match="serves no worker API"):
        root.worker_api()
    assert root.admission is None
    root.close()


def test_only_a_worker_root_builds_the_workers_http_ledger(tmp_path: Path) -> None:
    """``crucible worker`` gets its HTTP ledger from a ``worker`` root (nothing else builds one, per the
    scan above; ``tests/worker`` plays rounds through it); a controller's root refuses, its record
    being its store."""
    ledgers = root_for(tmp_path, mode=Mode.WORKER).worker_ledgers("http://127.0.0.1:9/", "tok")
    with ledgers() as ledger:
        assert isinstance(ledger, HttpLedger)
    for mode in (Mode.LOOP, Mode.SERVE, Mode.DEMO):
        with pytest.raises(ValueError, match="not a worker's HTTP ledger"):
            root_for(tmp_path, mode=mode).worker_ledgers("http://127.0.0.1:9/", "tok")

"""``crucible worker`` starts lean: a real round, run by the worker as its own process through the
subprocess broker, imports none of the controller's server machinery (ADR-0035).

A warm hypothesis pod starts once per slot of a parallel round (ADR-0034), a loop pod once per round;
what its Python imports is paid on the pod's core before the first command runs. The worker talks
to the controller over HTTP and keeps no database, so a web framework, an ORM, a template engine, the
forge client, the Kubernetes client or pydantic-settings in it is dead weight (measured in ADR-0035:
pydantic-settings alone took 0.1-1 s to import). The module list comes from ``python -X importtime``,
whose report goes to the worker's log: what the process imported from its start to its exit, lazy
imports included, with no hook in the product. Timing is not asserted (a list cannot be noisy).
On SQLite only (issue 23): the controller's database is not the worker's, which keeps none.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from controller.brokers.subprocess import SubprocessBroker
from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import RunStatus
from controller.store import Store
from controller.wiring import compose_service
from tests.api.sqlite_only import SQLITE_ONLY
from tests.conftest import git, make_repo
from tests.worker.conftest import Controller
from tests.worker.knobs_round import BENCH, KNOBS_SPEC

pytestmark = pytest.mark.slow

# Top-level packages a worker has no use for: the server (FastAPI, Starlette, uvicorn, jinja2, the
# metrics), the store (SQLAlchemy, Alembic, psycopg), the forge (PyGithub), the cluster client, the
# settings library the groups no longer use, and httpx's own command-line tool (rich, pygments).
# tomlkit and PyYAML stay out too: this round's knob file is JSON (knobs in TOML/YAML import them).
SERVER_SIDE = {
    "fastapi",
    "starlette",
    "uvicorn",
    "jinja2",
    "prometheus_client",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "github",
    "kubernetes",
    "pydantic_settings",
    "rich",
    "pygments",
    "tomlkit",
    "yaml",
}


def _imported(log: str) -> set[str]:
    """The modules ``-X importtime`` reported in a process's output (``import time: self | cum | name``)."""
    names = set()
    for line in log.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":  # the report's header line
                names.add(name)
    return names


@SQLITE_ONLY
def test_a_worker_round_imports_no_server_store_or_forge_machinery(
    controller: Controller, store: Store, database_url: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "app", {"conf.json": json.dumps({"a": 1}), "bench.py": BENCH})
    spec_path = repo / "crucible.toml"
    spec_path.write_text(KNOBS_SPEC.replace("turns = 4", "turns = 2"))
    git(repo, "add", "crucible.toml")
    git(repo, "commit", "-q", "-m", "spec")
    pods = tmp_path / "pods"
    broker = SubprocessBroker(
        mint_worker_env=controller.remote.mint_worker_env,
        remote_outcome=controller.remote.remote_outcome,
        revoke=controller.remote.revoke,
        root=pods,
        environ={k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")},
        command=(sys.executable, "-X", "importtime", "-m", "controller.cli.main", "worker"),
    )
    settings = Settings(home=tmp_path / "home-remote", database_url=database_url)
    service = compose_service(settings, store, environ={}, forge_for=_no_forge, broker=lambda _r: broker)
    spec = load_spec(spec_path)
    run_id = service.create(spec, spec_path.read_text(), spec_path, RunOptions())
    result = service.drive(run_id)
    assert result.status is RunStatus.COMPLETED, result.message
    assert len(store.list_turns(run_id)) == 2, "the worker ran the round's turns"
    (log,) = pods.rglob("worker.log")
    modules = _imported(log.read_text())
    # The probe sees what the worker used: the spec's models, the HTTP client, the turn's code.
    assert {"pydantic", "httpx", "controller.services.remote.worker", "controller.store.http_ledger"} <= (
        modules
    )
    assert {"controller.engine.knobfiles", "controller.services.execution.turn"} <= modules
    roots = {name.split(".")[0] for name in modules}
    assert roots & SERVER_SIDE == set()
    assert not any(name.startswith(("controller.api", "controller.store.store")) for name in modules)


def _no_forge(spec: object) -> object:
    raise AssertionError("this run does not publish")

"""Ledger implementations under test (Optuna's ``StorageSupplier`` pattern).

Each implementation is a ``LedgerHarness``: the ledger the turn path would be given, plus a way to
seed a run the way the controller creates one (the ledger itself never creates runs). To add an
implementation, add its name to ``IMPLEMENTATIONS`` and a branch to ``harness`` that yields its
client with the controller-side store seeding behind it; every test in ``test_contract.py`` then
runs against it unchanged.

``memory`` is the fake the round engine's unit tests use (``tests.support.memory_ledger``): it seeds
itself, standing in for the controller's store, and must pass every test the real ledgers pass.

The HTTP ledger (``store.http_ledger``, what ``crucible worker`` uses) runs against the controller's
real app served by uvicorn on a loopback socket, over SQLite and PostgreSQL. Each seeded run gets a
worker token of its own (minted as the remote broker would); a run the test never seeded is asked
about with the token of a run that exists, so the route must answer "no such run" (404), not 403.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pytest

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.config.settings import Settings
from controller.domain.enums import RunStatus
from controller.domain.jobs import RoundJob
from controller.localforge.server import serve_in_thread
from controller.services.remote.remote_rounds import RemoteRounds, token_hash
from controller.services.views.schemas import RoundRequest
from controller.store import ComponentRecord, NewRun, RunRecord, Store
from controller.store.http_ledger import HttpLedger
from controller.store.ledger import Ledger
from controller.store.records import Sample
from tests.support.fixtures import migrated_sqlite_url
from tests.support.memory_ledger import MemoryLedger

# The run's spec as the controller reads it: the HTTP ledger's routes recompute a worker's verdicts
# with its keep rule (``services.remote.recount``), so the suite's decisions are what its samples give.
SPEC = """
objective = "Cut latency"
[agent]
command = "true"
[metric]
command = "true"
name = "p50_ms"
direction = "minimize"
samples = 3
sequential = false
[[component]]
name = "app"
repo = "."
"""

IMPLEMENTATIONS = [
    "memory",
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgres),
    "http-sqlite",
    pytest.param("http-postgresql", marks=pytest.mark.postgres),
]


class Seeder(Protocol):
    """What the suite asks of the controller's side: create a run and its components, move it, and
    store samples the way a cut-off attempt left them (``Store``; the memory ledger itself)."""

    def create_run(self, new: NewRun) -> RunRecord: ...
    def add_component(self, rec: ComponentRecord) -> None: ...
    def set_run_status(self, run_id: str, status: RunStatus) -> RunRecord: ...
    def add_samples(self, run_id: str, turn: int, samples: list[Sample]) -> None: ...
    def get_run(self, run_id: str) -> RunRecord: ...


@dataclass
class LedgerHarness:
    ledger: Ledger
    store: Seeder  # the controller's own store, for seeding runs
    worker: bool = False  # the ledger is a worker's: the controller checks what it reports
    on_seed: Callable[[str], None] = field(default=lambda _run: None)  # mint a worker token

    def seed_run(self, run_id: str = "r1", *, components: tuple[str, ...] = ("app",), turns: int = 5) -> str:
        """A RUNNING run with ``components``, as ``crucible loop`` leaves it before the baseline."""
        self.store.create_run(
            NewRun(
                id=run_id,
                spec_text=SPEC,
                spec_fingerprint="fp",
                spec_path=None,
                objective="Cut latency",
                metric_name="p50_ms",
                direction="minimize",
                turns_planned=turns,
                options={},
            )
        )
        for name in components:
            self.store.add_component(
                ComponentRecord(
                    run_id=run_id,
                    name=name,
                    repo=f"/src/{name}",
                    base_ref="main",
                    base_sha="a" * 40,
                    head_sha="a" * 40,
                    user_head="a" * 40,
                    user_state="digest",
                    upstream=None,
                    extra={},
                )
            )
        self.store.set_run_status(run_id, RunStatus.RUNNING)
        self.on_seed(run_id)
        return run_id


def _sql(url: str) -> Iterator[LedgerHarness]:
    store = Store.open(url, upgrade=True)
    try:
        yield LedgerHarness(ledger=store, store=store)
    finally:
        store.close()


def _http(url: str, home: Path) -> Iterator[LedgerHarness]:
    """The HTTP ledger against ``crucible serve``'s app (worker routes on), tokens per seeded run."""
    tokens: dict[str, str] = {}
    with Store.open(url, upgrade=True) as store:
        settings = Settings(home=home, database_url=url)
        remote = RemoteRounds(settings, store, controller_url="http://unused")
        app = create_app(settings, store, ApiTokens("operator-token-0123456789"), _NoControl(), remote=remote)
        with serve_in_thread(app) as base:
            remote.controller_url = base

            def mint(run_id: str) -> None:
                job = RoundJob(run_id=run_id, round=0, turns=5, first_turn=1, heads={"app": "a" * 40})
                token = remote.mint_worker_env(job)["CRUCIBLE_WORKER_TOKEN"]
                tokens[run_id] = token
                # The suite's kept commits stand for ones a verified bundle of this round brought in
                # (the routes refuse heads no bundle proved; tests/worker checks that part).
                for sha in ("b" * 40, "c" * 40):
                    store.prove_worker_heads(token_hash(token), {"app": sha})

            ledger = HttpLedger(base, lambda run_id: tokens.get(run_id) or tokens["home"])
            harness = LedgerHarness(ledger=ledger, store=store, on_seed=mint, worker=True)
            harness.seed_run("home")  # the token asked about runs nobody seeded
            try:
                yield harness
            finally:
                ledger.close()


class _NoControl:
    """The operator routes' run control; the ledger suite never calls it."""

    def cancel(self, run_id: str) -> str:
        raise AssertionError("not used")

    def resume(self, run_id: str) -> str:
        raise AssertionError("not used")

    def steer(self, run_id: str, text: str, component: str | None = None) -> RoundRequest:
        raise AssertionError("not used")

    def wake(self) -> None:
        raise AssertionError("not used")


@pytest.fixture(params=IMPLEMENTATIONS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerHarness]:
    if request.param == "memory":
        memory = MemoryLedger()
        yield LedgerHarness(ledger=memory, store=memory)
    elif request.param == "sqlite":
        yield from _sql(migrated_sqlite_url(tmp_path / "ledger.db"))
    elif request.param == "postgresql":
        yield from _sql(request.getfixturevalue("migrated_postgres_url"))
    elif request.param == "http-sqlite":
        yield from _http(migrated_sqlite_url(tmp_path / "ledger.db"), tmp_path / "home")
    elif request.param == "http-postgresql":
        yield from _http(request.getfixturevalue("migrated_postgres_url"), tmp_path / "home")
    else:  # pragma: no cover - a new implementation must say how it is built
        raise AssertionError(f"no harness for {request.param}")

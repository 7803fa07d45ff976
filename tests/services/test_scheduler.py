"""The server's scheduler drives runs through the run service and its (threaded) broker (ADR-0012).

A run cancelled through the scheduler mid-turn and resumed is driven again *by the same process*:
its round 0 is launched a second time, as a new attempt, and finishes with every turn decided once.
Before attempts existed the broker answered the second launch with the first one's report (or a
conflict), so the run never went on. Real parts: git, SQLite, the agent and metric as shell commands.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import EventKind, RunStatus
from controller.domain.errors import NotFoundError
from controller.domain.jobs import RoundState
from controller.services.control.scheduler import Scheduler
from controller.store.store import Store
from controller.wiring import Mode, Root, build
from tests.conftest import make_repo
from tests.support import root_for, wait_until
from tests.support.fixtures import migrated_sqlite_url

SPEC = """
objective = "count up"
turns = 3
[agent]
command = "if [ -f {gate} ] && [ $CRUCIBLE_TURN = 2 ]; then sleep 120; fi; echo $CRUCIBLE_TURN > src/a.txt"
[sandbox]
mode = "none"
[metric]
command = "echo METRIC m=$(cat src/a.txt)"
name = "m"
direction = "maximize"
samples = 1
warmups = 0
confidence = 0
interleave = false
[[component]]
name = "app"
repo = "."
base = "main"
mutable = ["src/**"]
"""
DECISIONS = (EventKind.ACCEPTED, EventKind.REJECTED, EventKind.FAILED, EventKind.NO_CHANGE)
BOUND_S = 120.0  # a bound for a broken scheduler, never reached by a working one


def _until(check: Callable[[], bool], what: str) -> None:
    wait_until(check, what, timeout=BOUND_S)


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Root]:
    home = tmp_path / "home"
    settings = Settings(home=home, database_url=migrated_sqlite_url(tmp_path / "crucible.db"))
    built = build(dict(os.environ), settings=settings, mode=Mode.SERVE)
    yield built
    built.close()


def test_a_run_cancelled_and_resumed_in_one_process_is_driven_again_as_a_new_attempt(
    tmp_path: Path, root: Root
) -> None:
    gate = tmp_path / "gate"
    gate.write_text("")
    repo = make_repo(tmp_path / "app", {"src/a.txt": "0\n", "crucible.toml": SPEC.format(gate=gate)})
    spec_path = repo / "crucible.toml"
    service = root.service()
    run_id = service.create(load_spec(spec_path), spec_path.read_text(), spec_path, RunOptions())
    store = root.store()
    scheduler = Scheduler(service, max_concurrent_runs=2, tick_s=0.05)
    scheduler.start()
    try:

        def started(turn: int) -> bool:
            kinds = store.list_events(run_id, kinds=[EventKind.TURN_STARTED])
            return any(e.payload.get("turn") == turn for e in kinds)

        _until(lambda: started(2), "turn 2 to start")
        assert scheduler.driving() == [run_id]
        scheduler.cancel(run_id)
        _until(lambda: store.get_run(run_id).status is RunStatus.CANCELLED, "the cancel")
        _until(lambda: scheduler.driving() == [], "the driving thread to end")
        first = service.broker.status(run_id, 0)
        assert first.outcome is not None and first.outcome.run_status is RunStatus.CANCELLED

        gate.unlink()
        scheduler.resume(run_id)
        _until(lambda: store.get_run(run_id).status is RunStatus.COMPLETED, "the resumed run to finish")
    finally:
        assert scheduler.stop(30) == []
    events = store.list_events(run_id)
    decided = Counter(e.payload["turn"] for e in events if e.kind in DECISIONS)
    assert decided == {1: 1, 2: 1, 3: 1}, decided
    assert [e.kind for e in events].count(EventKind.RESUMED) == 1
    assert service.broker.status(run_id, 0).state is RoundState.SUCCEEDED, "the second attempt ran"
    assert service.rounds_launched == 2
    run = store.get_run(run_id)
    assert (run.stop_reason, run.champion_value, run.lease_owner) == ("max_turns", 3.0, None)


def test_the_scheduler_needs_a_concurrent_broker(tmp_path: Path) -> None:
    inline = root_for(tmp_path, mode=Mode.LOOP)
    with pytest.raises(ValueError, match="concurrent broker"):
        Scheduler(inline.service(), max_concurrent_runs=1)
    inline.close()


def test_a_tick_claims_at_most_a_batch(tmp_path: Path, root: Root) -> None:
    """A replica starting with many claimable runs starts them a batch per tick (ADR-0012)."""
    gate = tmp_path / "gate"
    repo = make_repo(tmp_path / "app", {"src/a.txt": "0\n", "crucible.toml": SPEC.format(gate=gate)})
    spec_path = repo / "crucible.toml"
    service = root.service()
    ids = [
        service.create(load_spec(spec_path), spec_path.read_text(), spec_path, RunOptions()) for _ in range(5)
    ]
    scheduler = Scheduler(service, max_concurrent_runs=10, tick_s=3600, claim_batch=2)
    try:
        assert len(scheduler.tick()) == 2
    finally:
        assert scheduler.stop(60) == []
    store = root.store()
    assert sum(store.get_run(r).status is not RunStatus.PENDING for r in ids) == 2


def test_stop_waits_for_a_finished_runs_lease_to_be_handed_back(
    tmp_path: Path, root: Root, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's thread hands its lease back after the run ended; ``stop`` returns only once it has,
    so a caller that closes the store next is not written through afterwards (on PostgreSQL that
    write left a connection open in the closed store, collected unclosed at exit)."""
    spec_text = SPEC.format(gate=tmp_path / "no").replace("turns = 3", "turns = 1")
    repo = make_repo(tmp_path / "app", {"src/a.txt": "0\n", "crucible.toml": spec_text})
    spec_path = repo / "crucible.toml"
    service = root.service()
    run_id = service.create(load_spec(spec_path), spec_path.read_text(), spec_path, RunOptions())
    handing_back, handed_back = threading.Event(), threading.Event()
    release = service.store.release_lease

    def slow_release(run: str, owner: str) -> None:
        handing_back.set()
        time.sleep(0.3)  # long beside a stop that does not wait (microseconds)
        release(run, owner)
        handed_back.set()

    monkeypatch.setattr(service.store, "release_lease", slow_release)
    scheduler = Scheduler(service, max_concurrent_runs=2, tick_s=0.05)
    scheduler.start()
    try:
        _until(handing_back.is_set, "the run's thread to hand its lease back")
    finally:
        assert scheduler.stop(30) == []
    assert handed_back.is_set(), "stop returned while the run's thread still wrote"
    assert root.store().get_run(run_id).status is RunStatus.COMPLETED


@pytest.mark.postgres
def test_a_busy_database_inside_a_round_hands_the_run_back_and_decides_no_turn_twice(
    tmp_path: Path, postgres_url: str
) -> None:
    """The run's row is locked by another session while turn 2 ends; with a 1 s ``lock_timeout`` the
    round's next write fails as a busy database does. The run is not failed: it is handed back,
    taken up again once its lease runs out, and every turn is decided once."""
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"ALTER DATABASE \"{postgres_url.rsplit('/', 1)[1]}\" SET lock_timeout = '1s'"))
    admin.dispose()
    ready, go = tmp_path / "ready", tmp_path / "go"
    wait = (
        f"if [ $CRUCIBLE_TURN = 2 ] && [ ! -f {go} ]; then touch {ready}; i=0; "
        f"while [ ! -f {go} ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; fi; "
    )
    spec_text = SPEC.replace("if [ -f {gate} ] && [ $CRUCIBLE_TURN = 2 ]; then sleep 120; fi; ", wait)
    repo = make_repo(tmp_path / "app", {"src/a.txt": "0\n", "crucible.toml": spec_text})
    spec_path = repo / "crucible.toml"
    settings = Settings(home=tmp_path / "home", database_url=postgres_url, lease_ttl_s=2.0)
    built = build(dict(os.environ), settings=settings, mode=Mode.SERVE)
    store = built.upgraded_store()
    service = built.service()
    run_id = service.create(load_spec(spec_path), spec_path.read_text(), spec_path, RunOptions())
    scheduler = Scheduler(service, max_concurrent_runs=2, tick_s=0.05)
    scheduler.start()
    locker = sa.create_engine(postgres_url)
    try:
        _until(ready.exists, "turn 2's agent to wait")
        with locker.connect() as conn:
            conn.execute(sa.text("SELECT id FROM runs WHERE id = :id FOR UPDATE"), {"id": run_id})
            go.write_text("")

            def cut_off() -> bool:
                try:
                    return service.broker.status(run_id, 0).state is RoundState.FAILED
                except NotFoundError:
                    return False

            _until(cut_off, "the round to be cut off by the locked row")
        _until(lambda: store.get_run(run_id).status is RunStatus.COMPLETED, "the run to finish")
    finally:
        assert scheduler.stop(30) == []
        locker.dispose()
        built.close()
    events = Store.open(postgres_url)
    try:
        kinds = events.list_events(run_id)
        decided = Counter(e.payload["turn"] for e in kinds if e.kind in DECISIONS)
        run = events.get_run(run_id)
    finally:
        events.close()
    assert decided == {1: 1, 2: 1, 3: 1}, decided
    assert [e.kind for e in kinds].count(EventKind.RESUMED) == 1, "handed back and taken up once"
    assert (run.stop_reason, run.champion_value) == ("max_turns", 3.0), run.stop_message

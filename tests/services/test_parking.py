"""Watching runs parked by the server's scheduler (ADR-0020), against the local forge over HTTP.

A run waiting for review feedback holds no thread and no context, only its lease (renewed with the
others in one statement) and its subscription in the feedback hub; it does not count against
``max_concurrent_runs``. It is woken by a review the hub's poller routes to it, by news another
replica stored (a steer taken through another process: only the database knows), and by a cancel;
a shutdown hands its lease back and another scheduler takes it up and parks it again. Real parts:
git, SQLite, the forge over HTTP, the agent and metric as shell commands.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import parse_spec
from controller.domain.enums import EventKind, RunPhase, RunStatus
from controller.services.control.scheduler import Scheduler
from controller.services.feedback.steer import queue_steer
from controller.store.store import Store
from controller.wiring import Mode, Root, build
from tests.forgekit import (
    REVIEW_AGENT,
    TOKENS,
    AppForge,
    app_forge,
    github_as,
    review_round_spec,
    write_agent,
    write_spec,
)
from tests.support import wait_until
from tests.support.fixtures import migrated_sqlite_url

BOUND_S = 120.0  # a bound for a broken scheduler, never reached by a working one

pytestmark = pytest.mark.slow


def _until(check: Callable[[], bool], what: str) -> None:
    wait_until(check, what, timeout=BOUND_S)


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[AppForge]:
    with app_forge(tmp_path) as app:
        yield app


@pytest.fixture
def root(tmp_path: Path, forge: AppForge) -> Iterator[Root]:
    environ = {
        **os.environ,
        "CRUCIBLE_HOME": str(tmp_path / "home"),
        "CRUCIBLE_DATABASE_URL": migrated_sqlite_url(tmp_path / "crucible.db"),
        "CRUCIBLE_GITHUB_TOKEN": TOKENS["alice"],
        "CRUCIBLE_FORGE_WRITE_INTERVAL": "0",
        # As an operator configures a controller that publishes to the local forge (serve mode).
        "CRUCIBLE_FORGE_HOSTS": forge.handle.api_url,
        "CRUCIBLE_ALLOW_UNSANDBOXED": "1",
        "CRUCIBLE_OWN_LOGINS": "alice",
    }
    built = build(environ, settings=Settings.from_env(environ), mode=Mode.SERVE)
    yield built
    built.close()


def _submit(root: Root, tmp_path: Path, forge: AppForge, count: int) -> list[str]:
    text = review_round_spec(write_agent(tmp_path, REVIEW_AGENT), forge.handle.api_url, max_rounds=1)
    options = RunOptions(publish_prs=True, watch_feedback=True)
    path = write_spec(tmp_path, text)
    service = root.service()
    return [service.create(parse_spec(text, tmp_path), text, path, options) for _ in range(count)]


def _run_threads(run_id: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"crucible-run-{run_id}" and t.is_alive()]


def _parked(scheduler: Scheduler, store: Store, ids: list[str]) -> Callable[[], bool]:
    def check() -> bool:
        watching = all(store.get_run(r).phase is RunPhase.WATCHING for r in ids)
        return watching and scheduler.parked() == sorted(ids)

    return check


def test_watching_runs_hold_no_thread_and_a_review_wakes_one_for_its_round(
    tmp_path: Path, forge: AppForge, root: Root
) -> None:
    ids = _submit(root, tmp_path, forge, 2)
    store, service = root.store(), root.service()
    # One run at a time: the second is only claimed because the first, parked, leaves the room.
    scheduler = Scheduler(service, max_concurrent_runs=1, tick_s=0.05)
    scheduler.start()
    try:
        _until(_parked(scheduler, store, ids), "both runs to park")
        # A run is parked before its thread is through its last lines: the thread ends right after.
        _until(lambda: not any(_run_threads(r) for r in ids), "a parked run to hold no thread")
        for run_id in ids:
            assert service.rounds.context(run_id) is None, "nor a live context"
            assert store.get_run(run_id).lease_owner == scheduler.owner, "but its lease"
        assert service.hub.subscribed() == sorted(ids), "and its feedback subscription"
        assert scheduler.leases_held() == 2

        reviewed, quiet = ids
        [pull] = store.list_pulls(reviewed)
        with github_as(forge.handle.api_url, "bob") as bob:
            bob.get_repo("alice/app").get_pull(pull.number).create_issue_comment("please tidy the value")
        # The hub's poller routes the comment to the run's PR, which rings its bell.
        _until(lambda: store.get_run(reviewed).status is RunStatus.COMPLETED, "the reviewed run's round")
        _until(lambda: scheduler.parked() == [quiet], "the other run to be parked (it may have looked)")
        _until(lambda: scheduler.driving() == [quiet], "the finished run to be let go")
        _until(lambda: _run_threads(reviewed) == [], "its thread to end")
        assert store.get_run(quiet).round == 0
    finally:
        assert scheduler.stop(30) == []
    run = store.get_run(reviewed)
    assert (run.stop_reason, run.round, run.lease_owner) == ("max_rounds", 1, None), run.stop_message
    kinds = [e.kind for e in store.list_events(reviewed)]
    assert kinds.count(EventKind.ROUND_STARTED) == kinds.count(EventKind.ROUND_FINISHED) == 1
    assert EventKind.RESUMED not in kinds, "woken, not taken over"
    still = store.get_run(quiet)
    assert (still.status, still.phase, still.lease_owner) == (RunStatus.RUNNING, RunPhase.WATCHING, None)


def test_news_only_the_database_knows_wakes_a_parked_run(tmp_path: Path, forge: AppForge, root: Root) -> None:
    """A steer stored by another process (another replica's API) rings no bell here: the scheduler's
    read of new events finds it."""
    [run_id] = _submit(root, tmp_path, forge, 1)
    store = root.store()
    scheduler = Scheduler(root.service(), max_concurrent_runs=2, tick_s=0.05)
    scheduler.start()
    try:
        _until(_parked(scheduler, store, [run_id]), "the run to park")
        queue_steer(store, run_id, "keep the value file tidy")
        _until(lambda: store.get_run(run_id).status is RunStatus.COMPLETED, "the steered round")
    finally:
        assert scheduler.stop(30) == []
    [item] = store.list_feedback(run_id)
    assert (item.source, item.verdict, item.round) == ("steer", "accepted", 1)


def test_a_parked_run_is_cancelled_and_a_shutdown_hands_parked_leases_back(
    tmp_path: Path, forge: AppForge, root: Root
) -> None:
    cancelled, handed_back = _submit(root, tmp_path, forge, 2)
    store, service = root.store(), root.service()
    first = Scheduler(service, max_concurrent_runs=2, tick_s=0.05)
    first.start()
    try:
        _until(_parked(first, store, [cancelled, handed_back]), "both runs to park")
        first.cancel(cancelled)
        _until(lambda: store.get_run(cancelled).status is RunStatus.CANCELLED, "the cancel")
        _until(lambda: first.driving() == [handed_back], "the cancelled run to be let go")
    finally:
        assert first.stop(30) == []
    run = store.get_run(handed_back)
    assert (run.status, run.phase, run.lease_owner) == (RunStatus.RUNNING, RunPhase.WATCHING, None)
    assert store.get_run(cancelled).lease_owner is None
    assert service.hub.subscribed() == []

    # A takeover (here: another scheduler at once, the lease handed back) parks it again.
    second = Scheduler(service, max_concurrent_runs=2, tick_s=0.05)
    second.start()
    try:
        _until(_parked(second, store, [handed_back]), "the run to park under the new scheduler")
        queue_steer(store, handed_back, "keep the value file tidy")
        _until(lambda: store.get_run(handed_back).status is RunStatus.COMPLETED, "the steered round")
    finally:
        assert second.stop(30) == []
    assert [e.kind for e in store.list_events(handed_back)].count(EventKind.RESUMED) == 1

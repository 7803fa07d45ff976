"""Leases, the cancel flag and the run phase (``store/leases.py``), on SQLite and PostgreSQL.

The clock is a hand-set one: expiry is a comparison with the store's clock, so a test moves time
instead of sleeping.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from controller.domain.enums import EventKind, RunPhase, RunStatus, StopReason
from controller.domain.errors import ConflictError, LeaseHeldError, LeaseLostError, NotFoundError
from controller.store import Store
from tests.support import Clock, new_run
from tests.webhooks.helpers import comment_event, publish

T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
TTL = 30.0


@pytest.fixture
def store_clock(clock: Clock) -> Clock:
    """The store reads the test's clock: expiry is tested by moving it, never by sleeping."""
    return clock


def test_a_live_lease_keeps_others_out_until_it_expires(store: Store, clock: Clock) -> None:
    store.create_run(new_run())
    assert store.claim_run("r1", "host-a:1", TTL) == T0 + timedelta(seconds=TTL)
    clock.advance(TTL - 1)
    with pytest.raises(LeaseHeldError) as held:
        store.claim_run("r1", "host-b:2", TTL)
    assert held.value.owner == "host-a:1" and "host-a:1" in str(held.value)
    assert held.value.expires_in_s == pytest.approx(1.0)
    run = store.get_run("r1")
    assert (run.lease_owner, run.lease_expires_at) == ("host-a:1", T0 + timedelta(seconds=TTL))

    clock.advance(1)  # expired: a takeover
    assert store.claim_run("r1", "host-b:2", TTL) == clock.now + timedelta(seconds=TTL)
    assert store.get_run("r1").lease_owner == "host-b:2"
    with pytest.raises(LeaseLostError):
        store.renew_lease("r1", "host-a:1", TTL)
    assert store.get_run("r1").lease_owner == "host-b:2", "a lost holder's renewal changes nothing"


def test_the_holder_renews_and_reclaims_its_own_lease(store: Store, clock: Clock) -> None:
    store.create_run(new_run())
    store.claim_run("r1", "a", TTL)
    clock.advance(20)
    renewal = store.renew_lease("r1", "a", TTL)
    assert (renewal.expires_at, renewal.cancel_requested) == (clock.now + timedelta(seconds=TTL), False)
    clock.advance(TTL + 5)  # expired, but nobody took it: still the holder's
    assert store.renew_lease("r1", "a", TTL).expires_at == clock.now + timedelta(seconds=TTL)
    assert store.claim_run("r1", "a", 5) == clock.now + timedelta(seconds=5)


def test_a_released_lease_can_be_taken_at_once(store: Store) -> None:
    store.create_run(new_run())
    store.claim_run("r1", "a", TTL)
    assert not store.release_lease("r1", "b"), "only the holder hands a lease back"
    assert store.release_lease("r1", "a")
    assert (store.get_run("r1").lease_owner, store.get_run("r1").lease_expires_at) == (None, None)
    store.claim_run("r1", "b", TTL)
    with pytest.raises(LeaseLostError):
        store.renew_lease("r1", "a", TTL)


def test_leases_refuse_finished_runs_and_bad_durations(store: Store) -> None:
    store.create_run(new_run())
    with pytest.raises(ValueError):
        store.claim_run("r1", "a", 0)
    store.set_run_status("r1", RunStatus.RUNNING)
    store.set_run_status("r1", RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
    with pytest.raises(ConflictError):
        store.claim_run("r1", "a", TTL)
    with pytest.raises(ConflictError):
        store.request_cancel("r1")


def test_cancel_is_a_flag_the_holder_reads_when_it_renews(store: Store) -> None:
    store.create_run(new_run())
    store.claim_run("r1", "a", TTL)
    store.request_cancel("r1")
    assert store.get_run("r1").cancel_requested
    assert store.renew_lease("r1", "a", TTL).cancel_requested
    store.set_run_status("r1", RunStatus.RUNNING)
    store.set_run_status("r1", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)
    assert not store.get_run("r1").cancel_requested, "a cancelled run's request is honoured"
    with pytest.raises(ConflictError):
        store.request_cancel("r1")
    store.set_run_status("r1", RunStatus.RUNNING)  # resumed on purpose
    assert not store.renew_lease("r1", "a", TTL).cancel_requested


def test_claim_runs_takes_unheld_runs_oldest_first_and_expired_ones_again(store: Store, clock: Clock) -> None:
    for n in range(5):
        store.create_run(new_run(f"r{n}"))
        clock.advance(1)
    store.set_run_status("r4", RunStatus.RUNNING)
    store.set_run_status("r4", RunStatus.FAILED, stop_reason=StopReason.ERROR)
    store.claim_run("r0", "resumer", TTL)

    assert store.claim_runs("a", TTL, limit=2) == ["r1", "r2"]
    assert store.claim_runs("b", TTL, limit=10) == ["r3"]
    assert store.claim_runs("b", TTL, limit=10) == []
    assert store.claim_runs("b", TTL, limit=0) == []

    store.set_run_status("r1", RunStatus.RUNNING)
    store.renew_lease("r2", "a", TTL + 10)
    clock.advance(TTL)  # a stopped heart-beating: r1 and r0 expired, r2 was renewed longer
    assert store.claim_runs("b", TTL, limit=10) == ["r0", "r1", "r3"]
    assert [store.get_run(r).lease_owner for r in ("r0", "r1", "r2", "r3", "r4")] == [
        "b",
        "b",
        "a",
        "b",
        None,
    ]


def test_concurrent_claimers_split_the_runs_without_overlap(database_url: str, clock: Clock) -> None:
    with Store.open(database_url, upgrade=True, clock=clock) as setup:
        for n in range(30):
            setup.create_run(new_run(f"r{n:02d}"))
    stores = [Store.open(database_url, clock=clock) for _ in range(3)]
    claimed: dict[str, list[str]] = {f"owner-{i}": [] for i in range(3)}
    start = threading.Barrier(3)

    def claimer(owner: str, store: Store) -> None:
        start.wait()
        while batch := store.claim_runs(owner, TTL, limit=2):
            claimed[owner].extend(batch)

    threads = [
        threading.Thread(target=claimer, args=(owner, store))
        for owner, store in zip(claimed, stores, strict=True)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        every = [run for runs in claimed.values() for run in runs]
        assert sorted(every) == [f"r{n:02d}" for n in range(30)], "each run claimed exactly once"
        for owner, runs in claimed.items():
            assert all(stores[0].get_run(run).lease_owner == owner for run in runs)
    finally:
        for store in stores:
            store.close()


def test_the_phase_moves_only_along_its_table(store: Store) -> None:
    store.create_run(new_run())
    with pytest.raises(ConflictError):
        store.set_phase("r1", RunPhase.ROUND)
    store.set_phase("r1", RunPhase.WATCHING)
    store.set_phase("r1", RunPhase.WATCHING)  # a resumed run re-entering its phase
    assert store.get_run("r1").phase is RunPhase.WATCHING
    with pytest.raises(ConflictError):
        store.set_phase("r1", RunPhase.SEARCH)
    store.set_run_status("r1", RunStatus.RUNNING)
    store.set_run_status("r1", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)
    assert store.get_run("r1").phase is RunPhase.WATCHING, "a cancelled run keeps its phase"
    store.set_run_status("r1", RunStatus.RUNNING)
    store.set_run_status("r1", RunStatus.COMPLETED, stop_reason=StopReason.FEEDBACK_CLOSED)
    assert store.get_run("r1").phase is RunPhase.FINISHED
    with pytest.raises(ConflictError):
        store.set_phase("r1", RunPhase.WATCHING)


def test_a_round_starts_and_finishes_in_one_transaction_each(store: Store) -> None:
    publish(store)
    first = store.add_feedback("r1", "router", comment_event(external_id=1))
    second = store.add_feedback("r1", "router", comment_event(external_id=2))
    assert first is not None and second is not None
    with pytest.raises(ConflictError):
        store.start_round("r1", 1, [first.id], {"round": 1})  # still searching
    store.set_phase("r1", RunPhase.WATCHING)
    with pytest.raises(ConflictError):
        store.start_round("r1", 2, [first.id], {"round": 2})  # not the next round
    events_before = store.list_events("r1")
    with pytest.raises(NotFoundError):
        store.start_round("r1", 1, [first.id, 999_999], {"round": 1})
    run = store.get_run("r1")
    assert (run.round, run.phase) == (0, RunPhase.WATCHING), "a refused start leaves no phantom round"
    assert store.list_events("r1") == events_before
    assert store.list_feedback("r1", round=1) == []

    store.start_round("r1", 1, [first.id], {"round": 1, "feedback": [first.id]})
    run = store.get_run("r1")
    assert (run.round, run.phase) == (1, RunPhase.ROUND)
    assert [i.id for i in store.list_feedback("r1", round=1)] == [first.id]
    assert store.list_events("r1")[-1].kind == EventKind.ROUND_STARTED
    with pytest.raises(ConflictError):
        store.start_round("r1", 2, [second.id], {"round": 2})  # one round at a time
    with pytest.raises(ConflictError):
        store.finish_round("r1", 2, [])

    store.finish_round(
        "r1",
        1,
        [(EventKind.REPLY_DRAFTED, {"feedback": first.id}), (EventKind.ROUND_FINISHED, {"round": 1})],
    )
    run = store.get_run("r1")
    assert (run.round, run.phase) == (1, RunPhase.WATCHING)
    assert [e.kind for e in store.list_events("r1")[-2:]] == [
        EventKind.REPLY_DRAFTED,
        EventKind.ROUND_FINISHED,
    ]
    with pytest.raises(ConflictError):
        store.finish_round("r1", 1, [])


def test_one_statement_renews_every_lease_of_an_owner_and_names_the_lost(store: Store, clock: Clock) -> None:
    for run in ("a1", "a2", "a3", "b1"):
        store.create_run(new_run(run))
    for run in ("a1", "a2", "a3"):
        store.claim_run(run, "a", TTL)
    store.claim_run("b1", "b", TTL)
    store.request_cancel("a2")
    clock.advance(TTL + 1)
    store.claim_run("a3", "thief", TTL)  # a3 expired and was taken over

    renewed = store.renew_leases("a", TTL, ["a1", "a2", "a3", "b1", "nope"])

    assert sorted(renewed) == ["a1", "a2"], "a3 was taken, b1 is someone else's, nope does not exist"
    assert [renewed[r].cancel_requested for r in ("a1", "a2")] == [False, True]
    assert renewed["a1"].expires_at == clock.now + timedelta(seconds=TTL)
    assert store.get_run("a1").lease_expires_at == clock.now + timedelta(seconds=TTL)
    assert store.get_run("b1").lease_expires_at == T0 + timedelta(seconds=TTL), "others' leases untouched"
    assert store.renew_leases("a", TTL, []) == {}


def test_one_statement_hands_back_many_leases_of_an_owner(store: Store) -> None:
    for run in ("a1", "a2", "b1"):
        store.create_run(new_run(run))
    store.claim_run("a1", "a", TTL)
    store.claim_run("a2", "a", TTL)
    store.claim_run("b1", "b", TTL)
    assert store.release_leases("a", ["a1", "a2", "b1", "nope"]) == 2
    assert [store.get_run(r).lease_owner for r in ("a1", "a2", "b1")] == [None, None, "b"]
    assert store.release_leases("a", []) == 0


def test_newest_events_name_the_runs_with_news_since_an_id(store: Store) -> None:
    for run in ("r1", "r2", "r3"):
        store.create_run(new_run(run))
    store.append_event("r1", EventKind.RESUMED, {})
    mark = store.newest_event_id()
    assert mark > 0
    store.append_event("r2", EventKind.RESUMED, {})
    last = store.append_event("r2", EventKind.RESUMED, {}).id
    assert store.newest_events(mark) == {"r2": last}, "r1's event is older, r3 has none"
    assert store.newest_events(last) == {}
    assert store.newest_event_id() == last


def test_the_pulls_of_many_runs_in_one_read(store: Store) -> None:
    first, second = publish(store, "r1", 7), publish(store, "r2", 8)
    store.create_run(new_run("r3"))
    assert sorted(p.number for p in store.pulls_of(["r1", "r2", "r3", "nope"])) == [7, 8]
    assert store.pulls_of(["r2"]) == [second] and store.pulls_of([]) == []
    assert first.run_id == "r1"

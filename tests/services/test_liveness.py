"""``services/execution/liveness.py`` on SQLite and PostgreSQL: the heartbeat that holds a run's lease,
reads the cancel flag and notices a takeover, and ``await_takeover``, which tells a dead holder from a
live one by watching the lease. Beats are called directly and the clock is a hand-set one: nothing sleeps."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from controller.domain.errors import LeaseHeldError, LeaseLostError, RefusedError
from controller.services.execution.liveness import Heartbeat, await_takeover, process_owner
from controller.store import Store
from tests.support import Clock, new_run

T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
TTL = 30.0


@pytest.fixture
def store_clock(clock: Clock) -> Clock:
    """The store reads the test's clock: expiry is tested by moving it, never by sleeping."""
    return clock


@pytest.fixture
def store(store: Store) -> Store:
    """The shared store (``tests/support``) with run ``r1`` in it."""
    store.create_run(new_run())
    return store


def test_the_owner_id_names_host_and_pid_and_is_stable_in_a_process() -> None:
    import os
    import socket

    owner = process_owner()
    assert owner.startswith(f"{socket.gethostname()}:{os.getpid()}:") and owner == process_owner()


def test_a_heartbeat_holds_the_lease_and_hands_it_back(store: Store) -> None:
    cancel = threading.Event()
    with Heartbeat(store, "r1", cancel=cancel, ttl_s=TTL, owner="me") as beat:
        assert store.get_run("r1").lease_owner == "me"
        with pytest.raises(LeaseHeldError):
            Heartbeat(store, "r1", cancel=threading.Event(), ttl_s=TTL, owner="other").start()
        beat.beat()
        beat.check()
    assert store.get_run("r1").lease_owner is None
    assert not cancel.is_set()


def test_a_cancel_request_reaches_the_holder_at_its_next_beat(store: Store) -> None:
    cancel, woken = threading.Event(), threading.Event()
    beat = Heartbeat(store, "r1", cancel=cancel, ttl_s=TTL, owner="me", on_cancel=woken.set)
    beat.start()
    try:
        assert not cancel.is_set()
        store.request_cancel("r1")  # from any host: a flag in the run row
        beat.beat()
        assert cancel.is_set() and woken.is_set() and beat.cancel_requested
        beat.check()  # a cancel is not a lost lease: the holder still records the stop
    finally:
        beat.stop()


def test_a_request_made_before_the_claim_is_read_at_once(store: Store) -> None:
    store.request_cancel("r1")
    cancel = threading.Event()
    with Heartbeat(store, "r1", cancel=cancel, ttl_s=TTL, owner="taker"):
        assert cancel.is_set(), "a takeover honours a cancel asked of the dead holder"


def test_a_holder_whose_lease_was_taken_over_stops_without_writing(store: Store, clock: Clock) -> None:
    cancel = threading.Event()
    beat = Heartbeat(store, "r1", cancel=cancel, ttl_s=TTL, owner="stalled")
    beat.start()
    clock.sleep(TTL + 1)  # it missed every renewal (a frozen VM, a long GC pause)
    store.claim_run("r1", "taker", TTL)
    beat.beat()
    assert beat.lost and cancel.is_set()
    with pytest.raises(LeaseLostError):
        beat.check()
    beat.stop()
    assert store.get_run("r1").lease_owner == "taker", "a lost holder hands back nothing"


def test_await_takeover_returns_at_once_for_a_free_lease(store: Store, clock: Clock) -> None:
    await_takeover(store, "r1", clock=clock, sleep=clock.sleep)
    assert clock.now == T0


def test_await_takeover_waits_out_a_dead_holders_lease(store: Store, clock: Clock) -> None:
    store.claim_run("r1", "dead:42:x", TTL)
    clock.sleep(10)
    told: list[tuple[str, float]] = []

    await_takeover(store, "r1", clock=clock, sleep=clock.sleep, on_wait=lambda o, s: told.append((o, s)))

    assert told == [("dead:42:x", TTL - 10)]
    assert clock.now >= T0 + timedelta(seconds=TTL), "it waited until the lease ran out"
    store.claim_run("r1", "resumer", TTL)  # and now it can be taken


def test_await_takeover_refuses_when_the_holder_renews(store: Store, clock: Clock) -> None:
    store.claim_run("r1", "alive:7:y", TTL)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.sleep(seconds)
        if sum(slept) >= TTL / 3:  # the live holder's heartbeat
            store.renew_lease("r1", "alive:7:y", TTL)

    with pytest.raises(RefusedError) as refused:
        await_takeover(store, "r1", clock=clock, sleep=sleep)
    assert "alive:7:y" in str(refused.value) and "still running" in str(refused.value)
    assert sum(slept) < TTL, "a live holder is recognised within a heartbeat, not a whole lease"


def test_one_keeper_renews_every_lease_of_the_process_in_one_beat(store: Store, clock: Clock) -> None:
    from controller.services.execution.liveness import _Keeper

    for run in ("r2", "r3"):
        store.create_run(new_run(run))
    cancels = {run: threading.Event() for run in ("r1", "r2", "r3")}
    beats = [Heartbeat(store, run, cancel=cancels[run], ttl_s=TTL, owner="me") for run in cancels]
    for beat in beats:
        beat.start()
    try:
        keeper = _Keeper.of(store, "me", TTL)
        assert all(beat._keeper is keeper for beat in beats), "one keeper for the process's leases"
        clock.sleep(20)
        store.request_cancel("r2")
        clock.sleep(TTL)
        store.claim_run("r3", "thief", TTL)  # r3's lease had run out: taken over

        keeper.renew()

        assert store.get_run("r1").lease_expires_at == clock.now + timedelta(seconds=TTL)
        assert [cancels[r].is_set() for r in ("r1", "r2", "r3")] == [False, True, True]
        assert [b.lost for b in beats] == [False, False, True]
        assert store.get_run("r3").lease_owner == "thief"
    finally:
        for beat in beats:
            beat.stop()
    assert [store.get_run(r).lease_owner for r in ("r1", "r2", "r3")] == [None, None, "thief"]


def test_await_takeover_does_not_wait_for_a_lease_this_process_claimed(store: Store, clock: Clock) -> None:
    """A scheduler claims expired runs with ``claim_runs(process_owner(), …)`` and then resumes them."""
    assert store.claim_runs(process_owner(), TTL, limit=5) == ["r1"]
    await_takeover(store, "r1", clock=clock, sleep=clock.sleep)
    assert clock.now == T0


def test_adopting_the_lease_a_claim_took_writes_nothing_and_reads_its_cancel(
    store: Store, clock: Clock
) -> None:
    """The scheduler's ``claim_runs`` took the lease: the heartbeat renews it from there on without
    claiming it again, a cancel asked before the claim stops the run at once, and a lease another
    owner holds by then is refused as ``start`` refuses it."""
    for run in ("r2", "r3"):
        store.create_run(new_run(run))
    store.request_cancel("r2")
    assert store.claim_runs("me", TTL, limit=2) == ["r1", "r2"]
    claimed = {run: store.get_run(run) for run in ("r1", "r2")}
    clock.sleep(5)  # a claim again would move the expiry: adopting leaves it where the claim put it
    cancels = {run: threading.Event() for run in claimed}
    beats = [Heartbeat(store, run, cancel=cancels[run], ttl_s=TTL, owner="me") for run in claimed]
    for beat in beats:
        beat.adopt(claimed[beat.run_id])
    try:
        assert [store.get_run(r).lease_expires_at for r in claimed] == [T0 + timedelta(seconds=TTL)] * 2
        assert [cancels[r].is_set() for r in claimed] == [False, True]
        assert beats[0]._keeper is not None, "the process's keeper renews it"
        beats[0]._keeper.renew()
        assert store.get_run("r1").lease_expires_at == clock.now + timedelta(seconds=TTL)
    finally:
        for beat in beats:
            beat.stop()
    assert [store.get_run(r).lease_owner for r in claimed] == [None, None]

    store.claim_run("r3", "other", TTL)
    with pytest.raises(LeaseHeldError):
        Heartbeat(store, "r3", cancel=threading.Event(), ttl_s=TTL, owner="me").adopt(store.get_run("r3"))

"""The Store contract (its class docstring), on SQLite and PostgreSQL alike.

Every test runs against both backends through the ``database_url`` fixture; the schema is
created by the real migrations, so these tests also exercise migration 0001.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from controller.domain.enums import (
    EventKind,
    Outcome,
    Reason,
    RunPhase,
    RunStatus,
    SampleArm,
    StopReason,
    TurnPhase,
)
from controller.domain.errors import ConflictError, NotFoundError, RetryLaterError, SchemaOutdatedError
from controller.store import (
    ChampionUpdate,
    Store,
    TurnDecision,
)
from tests.support import Ticker, component, new_run

T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture
def store_clock() -> Ticker:
    """A second per reading: rows written one after another have times in that order."""
    return Ticker()


ACCEPT = TurnDecision(
    outcome=Outcome.ACCEPTED,
    reason=Reason.IMPROVED,
    value=101.5,
    p_value=0.004,
    hypothesis="cache the route table",
    changed_paths=("src/a.py", "src/b.py"),
    commits={"router": "b" * 40},
    cost_usd=0.25,
    tokens=1200,
    duration_s=12.5,
    detail="improved by 1.5%",
)
REJECT = TurnDecision(Outcome.REJECTED, Reason.NOT_IMPROVED, value=130.0, cost_usd=0.1, tokens=10)


def running_run(store: Store, run_id: str = "r1") -> None:
    store.create_run(new_run(run_id))
    store.add_component(component(run_id=run_id))
    store.set_run_status(run_id, RunStatus.RUNNING)


def decide_accept(store: Store, number: int = 1) -> None:
    store.decide_turn(
        "r1",
        number,
        ACCEPT,
        champion=ChampionUpdate(value=101.5, turn=number),
        component_heads={"router": "b" * 40},
        event=(EventKind.ACCEPTED, {"turn": number}),
    )


# -- runs -------------------------------------------------------------------------------------


def test_create_run_round_trips_every_field(store: Store) -> None:
    created = store.create_run(new_run())
    got = store.get_run("r1")
    assert got == created
    assert got.status is RunStatus.PENDING
    assert got.spec_text == 'objective = "x"\n'
    assert (got.spec_fingerprint, got.spec_path) == ("fp-1", "/tmp/crucible.toml")
    assert (got.objective, got.metric_name, got.direction) == ("Cut latency", "p50_ms", "minimize")
    assert got.turns_planned == 10
    assert got.options == {"publish_prs": False, "nested": {"a": [1, 2]}}
    assert got.stop_reason is None and got.stop_message is None and got.finished_at is None
    assert got.baseline_value is None and got.champion_value is None and got.champion_turn is None
    assert (got.cost_usd, got.tokens, got.round, got.phase) == (0.0, 0, 0, RunPhase.SEARCH)
    assert (got.lease_owner, got.lease_expires_at, got.cancel_requested) == (None, None, False)
    assert got.created_at == got.updated_at == T0 + timedelta(seconds=1)
    assert got.created_at.tzinfo is not None and got.created_at.utcoffset() == timedelta(0)


def test_create_run_twice_conflicts_and_keeps_the_first(store: Store) -> None:
    store.create_run(new_run())
    with pytest.raises(ConflictError):
        store.create_run(new_run(objective="other"))
    assert store.get_run("r1").objective == "Cut latency"


def test_create_run_refuses_an_unknown_direction(store: Store) -> None:
    with pytest.raises(ValueError):
        store.create_run(new_run(direction="sideways"))
    assert store.list_runs() == []


def test_every_method_raises_not_found_for_an_unknown_run(store: Store) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.get_run("nope"),
        lambda: store.set_run_status("nope", RunStatus.RUNNING),
        lambda: store.claim_run("nope", "me", 10),
        lambda: store.renew_lease("nope", "me", 10),
        lambda: store.release_lease("nope", "me"),
        lambda: store.request_cancel("nope"),
        lambda: store.set_phase("nope", RunPhase.WATCHING),
        lambda: store.start_round("nope", 1, [], {}),
        lambda: store.finish_round("nope", 1, []),
        lambda: store.add_usage("nope", cost_usd=1.0, tokens=1),
        lambda: store.add_component(component(run_id="nope")),
        lambda: store.list_components("nope"),
        lambda: store.start_turn("nope", 1, 0),
        lambda: store.get_turn("nope", 1),
        lambda: store.list_turns("nope"),
        lambda: store.start_baseline("nope"),
        lambda: store.set_baseline("nope", 1.0, {}),
        lambda: store.add_samples("nope", 0, []),
        lambda: store.list_samples("nope"),
        lambda: store.append_event("nope", EventKind.COMPLETED, {}),
        lambda: store.list_events("nope"),
        lambda: store.record_process_group("nope", 1, "x"),
        lambda: store.clear_process_group("nope", 1),
        lambda: store.list_process_groups("nope"),
    ]
    for call in calls:
        with pytest.raises(NotFoundError):
            call()


def test_list_runs_is_newest_first_and_pages(store: Store) -> None:
    for run_id in ("ra", "rc", "rb"):
        store.create_run(new_run(run_id))
    assert [r.id for r in store.list_runs()] == ["rb", "rc", "ra"]
    assert [r.id for r in store.list_runs(limit=1, offset=1)] == ["rc"]
    assert store.list_runs(offset=3) == []


def test_run_status_moves_forward_and_finishing_records_the_stop(store: Store) -> None:
    store.create_run(new_run())
    running = store.set_run_status("r1", RunStatus.RUNNING)
    assert running.status is RunStatus.RUNNING and running.finished_at is None
    assert store.set_run_status("r1", RunStatus.RUNNING).status is RunStatus.RUNNING  # resume after a crash
    done = store.set_run_status(
        "r1", RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS, stop_message="turn budget spent"
    )
    assert done.status is RunStatus.COMPLETED
    assert (done.stop_reason, done.stop_message) == (StopReason.MAX_TURNS, "turn budget spent")
    assert done.finished_at is not None and done.finished_at == done.updated_at
    assert store.get_run("r1") == done


@pytest.mark.parametrize("final", [RunStatus.COMPLETED, RunStatus.FAILED])
def test_a_finished_run_cannot_go_back_to_running(store: Store, final: RunStatus) -> None:
    store.create_run(new_run())
    store.set_run_status("r1", RunStatus.RUNNING)
    before = store.set_run_status("r1", final)
    for target in (RunStatus.RUNNING, RunStatus.PENDING, RunStatus.CANCELLED):
        with pytest.raises(ConflictError):
            store.set_run_status("r1", target)
    assert store.get_run("r1") == before


def test_a_cancelled_run_may_be_resumed_and_is_no_longer_finished(store: Store) -> None:
    store.create_run(new_run())
    cancelled = store.set_run_status("r1", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)
    assert cancelled.finished_at is not None and cancelled.stop_reason is StopReason.CANCELLED
    resumed = store.set_run_status("r1", RunStatus.RUNNING)
    assert resumed.status is RunStatus.RUNNING
    assert (resumed.stop_reason, resumed.stop_message, resumed.finished_at) == (None, None, None)


def test_a_stop_reason_must_match_the_status(store: Store) -> None:
    store.create_run(new_run())
    store.set_run_status("r1", RunStatus.RUNNING)
    with pytest.raises(ValueError):
        store.set_run_status("r1", RunStatus.COMPLETED, stop_reason=StopReason.ERROR)
    with pytest.raises(ValueError):
        store.set_run_status("r1", RunStatus.RUNNING, stop_reason=StopReason.MAX_TURNS)
    assert store.get_run("r1").status is RunStatus.RUNNING


def test_usage_adds_up(store: Store) -> None:
    store.create_run(new_run())
    store.add_usage("r1", cost_usd=0.5, tokens=100)
    after = store.add_usage("r1", cost_usd=0.25, tokens=50)
    assert (after.cost_usd, after.tokens) == (0.75, 150)
    with pytest.raises(ValueError):
        store.add_usage("r1", cost_usd=float("nan"), tokens=0)


# -- components -------------------------------------------------------------------------------


def test_components_keep_insertion_order_and_every_field(store: Store) -> None:
    store.create_run(new_run())
    first, second = component("zeta"), component("alpha", upstream=None, user_head=None, user_state=None)
    store.add_component(first)
    store.add_component(second)
    assert store.list_components("r1") == [first, second]
    with pytest.raises(ConflictError):
        store.add_component(component("zeta", repo="/elsewhere"))
    assert store.list_components("r1")[0].repo == "/src/router"


def test_a_run_created_with_its_components_has_them_from_its_first_commit(store: Store) -> None:
    """A server's scheduler may claim a pending run the moment it is committed (ADR-0012)."""
    first, second = component("zeta"), component("alpha")
    store.create_run(new_run(), [first, second])
    assert store.list_components("r1") == [first, second]
    third = component("beta")
    store.add_component(third)
    assert [c.name for c in store.list_components("r1")] == ["zeta", "alpha", "beta"]
    with pytest.raises(ConflictError):
        store.create_run(new_run(), [component("other")])
    assert len(store.list_components("r1")) == 3


def test_component_head_and_extra(store: Store) -> None:
    store.create_run(new_run())
    store.add_component(component())
    store.set_component_head("r1", "router", "c" * 40)
    store.update_component_extra("r1", "router", {"second_base": "d" * 40})
    (got,) = store.list_components("r1")
    assert got.head_sha == "c" * 40 and got.base_sha == "a" * 40
    assert got.extra == {"fork": None, "second_base": "d" * 40}
    with pytest.raises(NotFoundError):
        store.set_component_head("r1", "ghost", "c" * 40)
    with pytest.raises(NotFoundError):
        store.update_component_extra("r1", "ghost", {})


# -- turns ------------------------------------------------------------------------------------


def test_start_turn_creates_a_started_turn(store: Store) -> None:
    running_run(store)
    turn = store.start_turn("r1", 1, 0)
    assert (turn.run_id, turn.number, turn.round, turn.phase) == ("r1", 1, 0, TurnPhase.STARTED)
    assert turn.decided_at is None and turn.outcome is None and turn.reason is None
    assert (turn.changed_paths, turn.commits, turn.cost_usd, turn.tokens, turn.detail) == ((), {}, 0.0, 0, "")
    assert store.get_turn("r1", 1) == turn
    with pytest.raises(NotFoundError):
        store.get_turn("r1", 2)
    with pytest.raises(ValueError):
        store.start_turn("r1", 0, 0)


def test_start_turn_again_returns_it_and_drops_the_cut_off_samples(store: Store) -> None:
    running_run(store)
    first = store.start_turn("r1", 1, 0)
    store.add_samples("r1", 0, [(SampleArm.BASELINE, 0, {"p50_ms": 120.0}, True)])
    store.add_samples("r1", 1, [(SampleArm.CANDIDATE, 0, {"p50_ms": 100.0}, True)])
    again = store.start_turn("r1", 1, 0)
    assert again == first
    assert [(s.turn, s.arm) for s in store.list_samples("r1")] == [(0, SampleArm.BASELINE)]
    # The re-run may store its samples under the same indexes.
    store.add_samples("r1", 1, [(SampleArm.CANDIDATE, 0, {"p50_ms": 99.0}, True)])
    assert store.list_samples("r1", 1)[0].values == {"p50_ms": 99.0}


def test_a_new_turns_start_sends_its_insert_and_its_event_and_no_read(store: Store) -> None:
    """ADR-0053: the turn is inserted unless it exists, in one statement; PostgreSQL locks the run's
    row first, SQLite sends its BEGIN IMMEDIATE as a statement. Three either way, where a read of the
    turn made it four."""
    running_run(store)
    before = store.statements
    started = store.start_turn("r1", 1, 0, event=(EventKind.TURN_STARTED, {"turn": 1}))
    assert store.statements - before == 3
    assert store.get_turn("r1", 1) == started
    assert [e.kind for e in store.list_events("r1")][-1] is EventKind.TURN_STARTED


def test_start_turn_conflicts_once_decided_or_in_another_round(store: Store) -> None:
    running_run(store)
    store.start_turn("r1", 1, 0)
    with pytest.raises(ConflictError):
        store.start_turn("r1", 1, 1)
    decide_accept(store)
    with pytest.raises(ConflictError):
        store.start_turn("r1", 1, 0)
    assert store.get_turn("r1", 1).phase is TurnPhase.DECIDED


def test_decide_turn_writes_decision_champion_heads_usage_and_event_together(store: Store) -> None:
    running_run(store)
    store.start_turn("r1", 1, 0)
    store.add_usage("r1", cost_usd=1.0, tokens=5)
    decided = store.decide_turn(
        "r1",
        1,
        ACCEPT,
        champion=ChampionUpdate(value=101.5, turn=1),
        component_heads={"router": "b" * 40},
        event=(EventKind.ACCEPTED, {"turn": 1, "value": 101.5}),
    )
    assert decided.phase is TurnPhase.DECIDED and decided.decided_at is not None
    assert (decided.outcome, decided.reason, decided.value, decided.p_value) == (
        Outcome.ACCEPTED,
        Reason.IMPROVED,
        101.5,
        0.004,
    )
    assert decided.hypothesis == "cache the route table"
    assert decided.changed_paths == ("src/a.py", "src/b.py") and decided.commits == {"router": "b" * 40}
    assert (decided.cost_usd, decided.tokens, decided.duration_s, decided.detail) == (
        0.25,
        1200,
        12.5,
        "improved by 1.5%",
    )
    assert store.get_turn("r1", 1) == decided
    run = store.get_run("r1")
    assert (run.champion_value, run.champion_turn) == (101.5, 1)
    assert (run.cost_usd, run.tokens) == (1.25, 1205)
    assert store.list_components("r1")[0].head_sha == "b" * 40
    events = store.list_events("r1")
    assert [(e.kind, e.payload) for e in events] == [(EventKind.ACCEPTED, {"turn": 1, "value": 101.5})]


def test_decide_turn_without_champion_leaves_the_champion(store: Store) -> None:
    running_run(store)
    store.set_baseline("r1", 120.0, {})
    store.start_turn("r1", 1, 0)
    store.decide_turn("r1", 1, REJECT, champion=None, component_heads={}, event=(EventKind.REJECTED, {}))
    run = store.get_run("r1")
    assert (run.champion_value, run.champion_turn) == (120.0, 0)
    assert store.list_components("r1")[0].head_sha == "a" * 40


def test_second_decide_conflicts_and_changes_nothing(store: Store) -> None:
    running_run(store)
    store.start_turn("r1", 1, 0)
    decide_accept(store)
    turn, run, events = store.get_turn("r1", 1), store.get_run("r1"), store.list_events("r1")
    with pytest.raises(ConflictError):
        store.decide_turn(
            "r1",
            1,
            REJECT,
            champion=ChampionUpdate(value=1.0, turn=1),
            component_heads={"router": "e" * 40},
            event=(EventKind.REJECTED, {}),
        )
    assert store.get_turn("r1", 1) == turn
    assert store.get_run("r1") == run
    assert store.list_events("r1") == events
    assert store.list_components("r1")[0].head_sha == "b" * 40


def test_a_failed_decide_rolls_back_entirely(store: Store) -> None:
    running_run(store)
    store.start_turn("r1", 1, 0)
    with pytest.raises(NotFoundError):
        store.decide_turn(
            "r1",
            1,
            ACCEPT,
            champion=ChampionUpdate(value=101.5, turn=1),
            component_heads={"ghost": "b" * 40},
            event=(EventKind.ACCEPTED, {}),
        )
    assert store.get_turn("r1", 1).phase is TurnPhase.STARTED
    assert store.get_run("r1").champion_value is None and store.get_run("r1").cost_usd == 0.0
    assert store.list_events("r1") == []
    decide_accept(store)  # the turn can still be decided once
    assert store.get_turn("r1", 1).outcome is Outcome.ACCEPTED


def test_decide_an_unknown_turn_is_not_found(store: Store) -> None:
    running_run(store)
    with pytest.raises(NotFoundError):
        decide_accept(store, number=7)
    assert store.list_events("r1") == []


def test_concurrent_decides_have_exactly_one_winner(database_url: str) -> None:
    with Store.open(database_url, upgrade=True) as setup:
        running_run(setup)
        setup.start_turn("r1", 1, 0)
    stores = [Store.open(database_url) for _ in range(2)]
    barrier = threading.Barrier(2)
    results: list[str] = []

    def contend(store: Store, heads: str) -> None:
        barrier.wait()
        try:
            store.decide_turn(
                "r1",
                1,
                ACCEPT,
                champion=ChampionUpdate(value=101.5, turn=1),
                component_heads={"router": heads},
                event=(EventKind.ACCEPTED, {"by": heads}),
            )
            results.append("won")
        except ConflictError:
            results.append("conflict")

    threads = [threading.Thread(target=contend, args=(s, c * 40)) for s, c in zip(stores, "bc", strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert sorted(results) == ["conflict", "won"]
        (event,) = stores[0].list_events("r1")
        assert stores[0].list_components("r1")[0].head_sha == event.payload["by"]
        assert stores[0].get_run("r1").tokens == ACCEPT.tokens
    finally:
        for s in stores:
            s.close()


def test_turn_decision_refuses_an_outcome_the_reason_does_not_imply() -> None:
    with pytest.raises(ValueError):
        TurnDecision(outcome=Outcome.ACCEPTED, reason=Reason.TIMEOUT)


def test_list_turns_is_by_number(store: Store) -> None:
    running_run(store)
    for number in (2, 1, 3):
        store.start_turn("r1", number, 0)
    assert [t.number for t in store.list_turns("r1")] == [1, 2, 3]


# -- baseline ---------------------------------------------------------------------------------


def test_set_baseline_records_champion_and_event_exactly_once(store: Store) -> None:
    running_run(store)
    store.set_baseline("r1", 123.0, {"samples": [123.1, 122.9, 123.0]})
    run = store.get_run("r1")
    assert (run.baseline_value, run.champion_value, run.champion_turn) == (123.0, 123.0, 0)
    (event,) = store.list_events("r1")
    assert (event.kind, event.payload) == (EventKind.BASELINE, {"samples": [123.1, 122.9, 123.0]})
    with pytest.raises(ConflictError):
        store.set_baseline("r1", 1.0, {})
    assert store.get_run("r1").baseline_value == 123.0 and len(store.list_events("r1")) == 1


def test_start_baseline_drops_cut_off_baseline_samples_until_recorded(store: Store) -> None:
    running_run(store)
    store.add_samples("r1", 0, [(SampleArm.BASELINE, 0, {"p50_ms": 120.0}, True)])
    store.start_baseline("r1")
    assert store.list_samples("r1") == []
    store.add_samples("r1", 0, [(SampleArm.BASELINE, 0, {"p50_ms": 121.0}, True)])
    store.set_baseline("r1", 121.0, {})
    with pytest.raises(ConflictError):
        store.start_baseline("r1")
    with pytest.raises(ConflictError):
        store.add_samples("r1", 0, [(SampleArm.BASELINE, 1, {"p50_ms": 1.0}, True)])
    assert [s.values for s in store.list_samples("r1", 0)] == [{"p50_ms": 121.0}]


# -- samples ----------------------------------------------------------------------------------


def test_samples_round_trip_in_insertion_order(store: Store) -> None:
    running_run(store)
    store.start_turn("r1", 1, 0)
    batch = [
        (SampleArm.CHAMPION, 0, {"p50_ms": 110.0, "rss_mb": 50.5}, True),
        (SampleArm.CANDIDATE, 0, {"p50_ms": 100.0, "rss_mb": 51.0}, True),
        (SampleArm.CANDIDATE, 1, {}, False),
        (SampleArm.CHAMPION, 1, {"p50_ms": 111.0, "rss_mb": 50.0}, True),
    ]
    store.add_samples("r1", 1, batch)
    store.add_samples("r1", 0, [(SampleArm.BASELINE, 0, {"p50_ms": 120.0, "rss_mb": 50.0}, True)])
    got = store.list_samples("r1", 1)
    assert [(s.arm, s.index, dict(s.values), s.valid) for s in got] == batch
    assert all(s.run_id == "r1" and s.turn == 1 for s in got)
    assert [s.turn for s in store.list_samples("r1")] == [0, 1, 1, 1, 1]


def test_bad_samples_are_refused_and_nothing_is_written(store: Store) -> None:
    running_run(store)
    store.start_turn("r1", 1, 0)
    good = (SampleArm.CANDIDATE, 0, {"p50_ms": 1.0}, True)
    for bad in (
        (SampleArm.CANDIDATE, 1, {"p50_ms": float("nan")}, True),
        (SampleArm.CANDIDATE, 1, {"p50_ms": float("inf")}, True),
        (SampleArm.CANDIDATE, 1, {"p50_ms": 1.0}, False),
    ):
        with pytest.raises(ValueError):
            store.add_samples("r1", 1, [good, bad])
    assert store.list_samples("r1") == []
    store.add_samples("r1", 1, [good])
    with pytest.raises(ConflictError):
        store.add_samples("r1", 1, [good])
    assert len(store.list_samples("r1")) == 1


def test_samples_need_a_started_turn(store: Store) -> None:
    running_run(store)
    sample = (SampleArm.CANDIDATE, 0, {"p50_ms": 1.0}, True)
    with pytest.raises(NotFoundError):
        store.add_samples("r1", 1, [sample])
    store.start_turn("r1", 1, 0)
    decide_accept(store)
    with pytest.raises(ConflictError):
        store.add_samples("r1", 1, [sample])
    assert store.list_samples("r1") == []


# -- events -----------------------------------------------------------------------------------


def test_events_are_ordered_resumable_and_per_run(store: Store) -> None:
    running_run(store, "r1")
    running_run(store, "r2")
    appended = []
    for i, run_id in enumerate(["r1", "r2", "r1", "r1", "r2"]):
        appended.append(store.append_event(run_id, EventKind.TURN_STARTED, {"i": i, "note": "é"}))
    ids = [e.id for e in appended]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    r1 = store.list_events("r1")
    assert r1 == [e for e in appended if e.run_id == "r1"]
    assert [e.payload["i"] for e in r1] == [0, 2, 3]
    assert r1[0].created_at < r1[1].created_at
    assert store.list_events("r1", after_id=r1[0].id) == r1[1:]
    assert store.list_events("r1", after_id=r1[0].id, limit=1) == r1[1:2]
    assert store.list_events("r1", after_id=r1[-1].id) == []


def test_a_payload_that_is_not_json_is_refused(store: Store) -> None:
    running_run(store)
    with pytest.raises(ValueError):
        store.append_event("r1", EventKind.COMPLETED, {"value": float("nan")})
    assert store.list_events("r1") == []


# -- process groups ---------------------------------------------------------------------------


def test_process_groups_are_recorded_listed_and_cleared_idempotently(store: Store) -> None:
    running_run(store)
    store.record_process_group("r1", 900, "bench")
    store.record_process_group("r1", 100, "agent")
    store.record_process_group("r1", 900, "bench --again")
    assert store.list_process_groups("r1") == [(900, "bench --again"), (100, "agent")]
    store.clear_process_group("r1", 900)
    store.clear_process_group("r1", 900)
    assert store.list_process_groups("r1") == [(100, "agent")]


# -- errors from the database itself ----------------------------------------------------------


def test_a_database_without_schema_reads_as_schema_outdated(database_url: str) -> None:
    raw = Store(database_url)  # no startup check: the first query finds no tables
    try:
        with pytest.raises(SchemaOutdatedError):
            raw.get_run("r1")
    finally:
        raw.close()


def test_an_unreachable_database_is_retry_later() -> None:
    store = Store("postgresql://postgres@127.0.0.1:1/nothing")
    try:
        with pytest.raises(RetryLaterError):
            store.get_run("r1")
    finally:
        store.close()


def test_an_exhausted_connection_pool_is_retry_later_not_a_crash() -> None:
    """A server driving many runs at once can wait out the pool's timeout; that is a busy database,
    which the scheduler answers by handing the run back (ADR-0012), not an unknown error."""
    from sqlalchemy import exc as sa_exc

    from controller.domain.errors import RetryLaterError
    from controller.store.errors import translate_errors

    with pytest.raises(RetryLaterError, match="no free connection"), translate_errors():
        raise sa_exc.TimeoutError("QueuePool limit of size 20 overflow 20 reached")

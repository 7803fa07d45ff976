"""The ledger contract (``controller.store.ledger.Ledger``'s docstring), for every implementation.

Only the ledger's own methods are called here (seeding aside), so an implementation that talks to
the controller over HTTP is held to exactly what the SQL store promises the turn path.
"""

from __future__ import annotations

import dataclasses
import math
import threading

import pytest

from controller.domain.enums import (
    Direction,
    EventKind,
    Outcome,
    Reason,
    RunStatus,
    SampleArm,
    StopReason,
    TurnPhase,
)
from controller.domain.errors import ConflictError, ForbiddenError, NotFoundError
from controller.stats import Arm, KeepRule, decide_keep
from controller.store import ChampionUpdate, HypothesisReport, TurnDecision
from tests.ledger.conftest import LedgerHarness

KEEP = TurnDecision(
    outcome=Outcome.ACCEPTED,
    reason=Reason.IMPROVED,
    value=90.0,
    p_value=0.05,  # 3 against 3 samples, all better: the keep rule's p (the HTTP ledger recomputes it)
    hypothesis="cache it",
    changed_paths=("src/a.py",),
    commits={"app": "b" * 40},
    cost_usd=0.5,
    tokens=100,
    duration_s=3.0,
    detail="improved",
)
FAIL = TurnDecision(Outcome.FAILED, Reason.AGENT_FAILED, cost_usd=0.25, tokens=7, detail="exit 1")


def _decided(turn: int, decision: TurnDecision) -> dict[str, object]:
    """A decision event's payload as the turn path writes it (``domain.events.TurnDecidedPayload``)."""
    return {"turn": turn, "round": 0, "outcome": str(decision.outcome), "reason": str(decision.reason)}


def _progress(**extra: object) -> tuple[EventKind, dict[str, object]]:
    """A progress event of the running turn, the kind a worker appends on its own (ADR-0031)."""
    return EventKind.TURN_STEP, {"turn": 1, "round": 0, "step": "measuring", **extra}


def _samples(arm: SampleArm, *values: float) -> list[tuple[SampleArm, int, dict[str, float], bool]]:
    return [(arm, i, {"p50_ms": v}, True) for i, v in enumerate(values)]


def _keep(h: LedgerHarness, run_id: str, number: int) -> None:
    h.ledger.decide_turn(
        run_id,
        number,
        KEEP,
        champion=ChampionUpdate(value=90.0, turn=number),
        component_heads={"app": "b" * 40},
        event=(EventKind.ACCEPTED, _decided(number, KEEP)),
        samples=_samples(SampleArm.CHAMPION, 100.0, 101.0, 99.0)
        + _samples(SampleArm.CANDIDATE, 90.0, 91.0, 89.0),
    )


# -- reads ------------------------------------------------------------------------------------


def test_every_method_names_an_unknown_run(harness: LedgerHarness) -> None:
    ledger = harness.ledger
    calls = [
        lambda: ledger.get_run("nope"),
        lambda: ledger.turn_snapshot("nope", last=3),
        lambda: ledger.start_baseline("nope"),
        lambda: ledger.set_baseline("nope", 1.0, {"value": 1.0}),
        lambda: ledger.add_samples("nope", 0, _samples(SampleArm.BASELINE, 1.0)),
        lambda: ledger.list_samples("nope"),
        lambda: ledger.start_turn("nope", 1, 0),
        lambda: ledger.append_event("nope", *_progress()),
        lambda: ledger.append_events("nope", [_progress()]),
        lambda: ledger.list_events("nope"),
    ]
    if not harness.worker:  # a worker never moves the run (test_a_worker_never_moves_the_run)
        calls.append(lambda: ledger.set_run_status("nope", RunStatus.CANCELLED))
    for call in calls:
        with pytest.raises(NotFoundError):
            call()


def test_a_fresh_run_has_no_turns_and_no_baseline(harness: LedgerHarness) -> None:
    run_id = harness.seed_run()
    snap = harness.ledger.turn_snapshot(run_id, last=5)
    assert snap.run.id == run_id and snap.run.status is RunStatus.RUNNING
    assert snap.run.baseline_value is None and snap.run.champion_turn is None
    assert snap.counts.highest == 0 and snap.counts.started == () and dict(snap.counts.decided) == {}
    assert snap.recent == ()


# -- baseline ---------------------------------------------------------------------------------


def test_the_baseline_is_recorded_once_with_its_event_and_samples(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    ledger.start_baseline(run_id)
    ledger.add_samples(run_id, 0, _samples(SampleArm.BASELINE, 100.0, 101.0, 99.0))
    ledger.set_baseline(run_id, 100.0, {"value": 100.0})
    run = ledger.get_run(run_id)
    assert (run.baseline_value, run.champion_value, run.champion_turn) == (100.0, 100.0, 0)
    assert [e.kind for e in ledger.list_events(run_id)] == [EventKind.BASELINE]
    assert [s.values["p50_ms"] for s in ledger.list_samples(run_id, 0)] == [100.0, 101.0, 99.0]
    with pytest.raises(ConflictError):
        ledger.set_baseline(run_id, 50.0, {"value": 50.0})
    with pytest.raises(ConflictError):
        ledger.start_baseline(run_id)
    with pytest.raises(ConflictError):
        ledger.add_samples(run_id, 0, _samples(SampleArm.BASELINE, 1.0))
    assert ledger.get_run(run_id).baseline_value == 100.0, "a refused write changes nothing"


def test_start_baseline_drops_the_samples_of_a_cut_off_attempt(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    ledger.start_baseline(run_id)
    ledger.add_samples(run_id, 0, _samples(SampleArm.BASELINE, 100.0))
    ledger.start_baseline(run_id)  # recovery: the attempt was cut off
    assert ledger.list_samples(run_id, 0) == []


def test_measurements_must_be_finite(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    with pytest.raises(ValueError):
        ledger.set_baseline(run_id, math.nan, {"value": 1.0})
    with pytest.raises(ValueError):
        ledger.add_samples(run_id, 0, _samples(SampleArm.BASELINE, math.inf))
    assert ledger.get_run(run_id).baseline_value is None
    assert ledger.list_samples(run_id) == []


# -- turns ------------------------------------------------------------------------------------


def test_a_turn_is_started_then_decided_exactly_once(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    started = ledger.start_turn(run_id, 1, 0, event=(EventKind.TURN_STARTED, {"turn": 1, "round": 0}))
    assert (started.number, started.round, started.phase) == (1, 0, TurnPhase.STARTED)
    _keep(harness, run_id, 1)
    turn = ledger.turn_snapshot(run_id, last=1).recent[0]
    assert (turn.phase, turn.outcome, turn.reason, turn.value) == (
        TurnPhase.DECIDED,
        Outcome.ACCEPTED,
        Reason.IMPROVED,
        90.0,
    )
    run = ledger.get_run(run_id)
    assert (run.champion_value, run.champion_turn, run.cost_usd, run.tokens) == (90.0, 1, 0.5, 100)
    kinds = [e.kind for e in ledger.list_events(run_id)]
    assert kinds == [EventKind.TURN_STARTED, EventKind.ACCEPTED]
    stored = [s.values["p50_ms"] for s in ledger.list_samples(run_id, 1) if s.arm is SampleArm.CANDIDATE]
    assert stored == [90.0, 91.0, 89.0]
    with pytest.raises(ConflictError):
        _keep(harness, run_id, 1)
    with pytest.raises(ConflictError):
        ledger.start_turn(run_id, 1, 0)
    with pytest.raises(ConflictError):
        ledger.add_samples(run_id, 1, _samples(SampleArm.CANDIDATE, 1.0))
    assert ledger.get_run(run_id).cost_usd == 0.5, "the refused second decision added nothing"
    assert len(ledger.list_events(run_id)) == 2


def test_a_decision_appends_the_turns_pending_progress_before_its_own_event(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    ledger.start_turn(run_id, 1, 0, event=(EventKind.TURN_STARTED, {"turn": 1, "round": 0}))
    progress = [_progress(n=1), _progress(n=2)]
    ledger.decide_turn(
        run_id,
        1,
        FAIL,
        champion=None,
        component_heads={},
        event=(EventKind.FAILED, _decided(1, FAIL)),
        progress=progress,
    )
    stored = ledger.list_events(run_id)
    assert [(e.kind, e.payload.get("n")) for e in stored] == [
        (EventKind.TURN_STARTED, None),
        (EventKind.TURN_STEP, 1),
        (EventKind.TURN_STEP, 2),
        (EventKind.FAILED, None),
    ]
    assert [e.id for e in stored] == sorted(e.id for e in stored)
    if harness.worker:
        return  # the HTTP ledger sends the progress first, as append_events does (the contract allows it)
    with pytest.raises(ConflictError):
        ledger.decide_turn(
            run_id,
            1,
            FAIL,
            champion=None,
            component_heads={},
            event=(EventKind.FAILED, _decided(1, FAIL)),
            progress=[_progress(n=3)],
        )
    assert len(ledger.list_events(run_id)) == 4, "a refused decision wrote none of its progress"


def test_restarting_a_started_turn_returns_it_and_drops_its_samples(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    ledger.start_turn(run_id, 1, 0)
    # A turn's samples reach the store with its decision (a worker may not add them apart); these stand
    # for the samples of a turn whose decision the crash cut off.
    harness.store.add_samples(run_id, 1, _samples(SampleArm.CANDIDATE, 1.0, 2.0))
    again = ledger.start_turn(run_id, 1, 0, event=(EventKind.TURN_STARTED, {"turn": 1, "round": 0}))
    assert again.phase is TurnPhase.STARTED
    assert ledger.list_samples(run_id, 1) == []
    with pytest.raises(ConflictError):
        ledger.start_turn(run_id, 1, 1)  # started in round 0, not 1
    snap = ledger.turn_snapshot(run_id, last=5)
    assert snap.counts.started == (1,) and snap.counts.highest == 1


def test_deciding_an_unknown_turn_is_not_found_and_turn_zero_is_a_caller_bug(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    with pytest.raises(NotFoundError):
        _keep(harness, run_id, 7)
    with pytest.raises(ValueError):
        ledger.start_turn(run_id, 0, 0)


def test_a_failed_turn_adds_its_usage_and_keeps_the_champion(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    ledger.add_samples(run_id, 0, _samples(SampleArm.BASELINE, 100.0))
    ledger.set_baseline(run_id, 100.0, {"value": 100.0})
    ledger.start_turn(run_id, 1, 0)
    ledger.decide_turn(
        run_id, 1, FAIL, champion=None, component_heads={}, event=(EventKind.FAILED, _decided(1, FAIL))
    )
    run = ledger.get_run(run_id)
    assert (run.champion_value, run.champion_turn, run.cost_usd, run.tokens) == (100.0, 0, 0.25, 7)


def test_the_snapshot_counts_rounds_and_bounds_the_recent_turns(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    for number in (1, 2, 3):
        ledger.start_turn(run_id, number, 0)
        ledger.decide_turn(
            run_id,
            number,
            FAIL,
            champion=None,
            component_heads={},
            event=(EventKind.FAILED, _decided(number, FAIL)),
        )
    ledger.start_turn(run_id, 4, 1)
    snap = ledger.turn_snapshot(run_id, last=2)
    assert [t.number for t in snap.recent] == [3, 4]
    assert dict(snap.counts.decided) == {0: 3}
    assert snap.counts.started == (4,) and snap.counts.highest == 4


# -- events and status ------------------------------------------------------------------------


def test_events_page_in_id_order(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    appended = [ledger.append_event(run_id, *_progress(n=n)) for n in range(5)]
    ids = [e.id for e in appended]
    assert ids == sorted(ids) and len(set(ids)) == 5
    page = ledger.list_events(run_id, after_id=ids[1], limit=2)
    assert [e.payload["n"] for e in page] == [2, 3]
    assert ledger.list_events(run_id, after_id=ids[-1]) == []
    sample = {"turn": 1, "round": 0, "arm": "candidate", "index": 0, "value": 1.0, "valid": True, "n": 5}
    ledger.append_event(run_id, EventKind.SAMPLE, sample)
    assert [e.payload["n"] for e in ledger.list_events(run_id, kinds={EventKind.SAMPLE})] == [5]
    assert ledger.list_events(run_id, kinds=set()) == []


def test_grouped_events_are_appended_in_their_order(harness: LedgerHarness) -> None:
    """A turn's progress events written together (``execution.progress``) keep their order among
    the events appended one by one around them."""
    ledger, run_id = harness.ledger, harness.seed_run()
    first = ledger.append_event(run_id, *_progress(n=0))
    grouped = ledger.append_events(run_id, [_progress(n=1), _progress(n=2), _progress(n=3)])
    last = ledger.append_event(run_id, *_progress(n=4))
    assert [e.payload["n"] for e in grouped] == [1, 2, 3]
    ids = [first.id, *(e.id for e in grouped), last.id]
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert [(e.id, e.payload["n"]) for e in ledger.list_events(run_id)] == list(
        zip(ids, range(5), strict=True)
    )
    assert ledger.append_events(run_id, []) == []


def test_concurrent_appends_get_distinct_increasing_ids(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    errors: list[BaseException] = []

    def append(n: int) -> None:
        try:
            for i in range(5):
                ledger.append_event(run_id, *_progress(writer=n, i=i))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    events = ledger.list_events(run_id)
    assert len(events) == 20 and len({e.id for e in events}) == 20
    for writer in range(4):
        mine = [e.payload["i"] for e in events if e.payload["writer"] == writer]
        assert mine == list(range(5)), "one writer's events keep their order"


def test_run_status_follows_the_transition_table(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    if harness.worker:  # a worker never moves the run: the controller records its stop (ADR-0031)
        with pytest.raises(ForbiddenError, match="does not set run"):
            ledger.set_run_status(run_id, RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
        assert harness.store.get_run(run_id).status is RunStatus.RUNNING
        return
    done = ledger.set_run_status(
        run_id, RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS, stop_message="turn budget spent"
    )
    assert (done.status, done.stop_reason, done.stop_message) == (
        RunStatus.COMPLETED,
        StopReason.MAX_TURNS,
        "turn budget spent",
    )
    with pytest.raises(ConflictError):
        ledger.set_run_status(run_id, RunStatus.RUNNING)
    with pytest.raises(ValueError):
        ledger.set_run_status(run_id, RunStatus.FAILED, stop_reason=StopReason.MAX_TURNS)
    assert ledger.get_run(run_id).status is RunStatus.COMPLETED


def test_two_writers_racing_to_decide_one_turn_one_wins(harness: LedgerHarness) -> None:
    ledger, run_id = harness.ledger, harness.seed_run()
    ledger.start_turn(run_id, 1, 0)
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def decide() -> None:
        barrier.wait()
        try:
            _keep(harness, run_id, 1)
            outcomes.append("won")
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=decide) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict", "won"]
    assert ledger.get_run(run_id).cost_usd == 0.5
    assert [e.kind for e in ledger.list_events(run_id)] == [EventKind.ACCEPTED]


# -- parallel hypotheses (ADR-0016) ---------------------------------------------------------------


def _report(index: int, reason: Reason, delta: float | None = None) -> HypothesisReport:
    """A hypothesis's report; with ``delta``, one measured 5 against 5 samples whose figures are what
    the keep rule gives them (the HTTP ledger's routes recompute them)."""
    champion = (100.0, 101.0, 99.0, 102.0, 98.5)
    candidate = () if delta is None else tuple(v - delta for v in (100.0, 101.0, 99.0, 102.0, 98.0))
    verdict = decide_keep(KeepRule(Direction.MINIMIZE), Arm(candidate), Arm(champion)) if candidate else None
    samples = _samples(SampleArm.CHAMPION, *champion) + _samples(SampleArm.CANDIDATE, *candidate)
    return HypothesisReport(
        index=index,
        reason=reason,
        value=verdict.candidate_median if verdict else None,
        reference_value=verdict.champion_median if verdict else None,
        delta=verdict.delta if verdict else None,
        p_value=verdict.p_value if verdict else None,
        hypothesis=f"idea {index}",
        proposal={"file": "k.toml", "key": "a", "old": 1, "new": index},
        changed_paths=("src/a.py",),
        commits={"app": "c" * 40} if reason is Reason.IMPROVED else {},
        samples=tuple(samples) if verdict else (),
        cost_usd=0.1,
        tokens=3,
        detail="own verdict",
    )


def test_hypotheses_are_reported_one_by_one_and_finalised_with_the_decision(harness: LedgerHarness) -> None:
    run_id = harness.seed_run()
    ledger = harness.ledger
    ledger.start_turn(run_id, 1, 0)
    ledger.report_hypothesis(run_id, 1, _report(1, Reason.IMPROVED, 4.0))
    first = ledger.report_hypothesis(run_id, 1, _report(0, Reason.IMPROVED, 9.0))
    assert (first.phase, first.reason, first.outcome) == (
        TurnPhase.STARTED,
        Reason.IMPROVED,
        Outcome.ACCEPTED,
    )
    assert first.samples[5] == (SampleArm.CANDIDATE, 0, {"p50_ms": 91.0}, True)
    assert first.proposal == {"file": "k.toml", "key": "a", "old": 1, "new": 0}
    with pytest.raises(ConflictError, match="already reported"):
        ledger.report_hypothesis(run_id, 1, _report(0, Reason.NOT_IMPROVED))
    final = {0: (Reason.IMPROVED, "best of 2"), 1: (Reason.SUPERSEDED, "superseded by 0")}
    if harness.worker:  # the controller decides a parallel turn from the reports (ADR-0018)
        with pytest.raises(ForbiddenError, match="parallel"):
            _keep_parallel(harness, run_id, final)
        assert ledger.turn_snapshot(run_id, last=1).recent[0].phase is TurnPhase.STARTED
        return
    with pytest.raises(ConflictError, match="hypotheses"):
        ledger.decide_turn(
            run_id,
            1,
            FAIL,
            champion=None,
            component_heads={},
            event=(EventKind.FAILED, _decided(1, FAIL)),
            hypotheses={0: (Reason.IMPROVED, "x")},
        )
    _keep_parallel(harness, run_id, final)
    rows = ledger.list_hypotheses(run_id, 1)
    assert [(h.index, h.phase, h.reason, h.outcome, h.detail) for h in rows] == [
        (0, TurnPhase.DECIDED, Reason.IMPROVED, Outcome.ACCEPTED, "best of 2"),
        (1, TurnPhase.DECIDED, Reason.SUPERSEDED, Outcome.REJECTED, "superseded by 0"),
    ]
    assert ledger.list_hypotheses(run_id) == rows
    with pytest.raises(ConflictError, match="decided"):
        ledger.report_hypothesis(run_id, 1, _report(2, Reason.NO_DIFF))


def _keep_parallel(harness: LedgerHarness, run_id: str, final: dict[int, tuple[Reason, str]]) -> None:
    harness.ledger.decide_turn(
        run_id,
        1,
        KEEP,
        champion=ChampionUpdate(value=91.0, turn=1),
        component_heads={"app": "c" * 40},
        event=(EventKind.ACCEPTED, _decided(1, KEEP)),
        hypotheses=final,
    )


def test_a_restarted_turn_forgets_its_reported_hypotheses(harness: LedgerHarness) -> None:
    run_id = harness.seed_run()
    harness.ledger.start_turn(run_id, 1, 0)
    harness.ledger.report_hypothesis(run_id, 1, _report(0, Reason.AGENT_FAILED))
    harness.ledger.start_turn(run_id, 1, 0)
    assert harness.ledger.list_hypotheses(run_id, 1) == []


def test_a_hypothesis_report_is_checked_before_anything_is_written(harness: LedgerHarness) -> None:
    run_id = harness.seed_run()
    with pytest.raises(NotFoundError):
        harness.ledger.report_hypothesis(run_id, 3, _report(0, Reason.NO_DIFF))
    harness.ledger.start_turn(run_id, 1, 0)
    bad = dataclasses.replace(_report(0, Reason.IMPROVED, 1.0), p_value=math.nan)
    with pytest.raises(ValueError, match="p_value"):
        harness.ledger.report_hypothesis(run_id, 1, bad)
    with pytest.raises(ValueError, match="superseded"):
        _report(0, Reason.SUPERSEDED)
    with pytest.raises(NotFoundError):
        harness.ledger.list_hypotheses("nope")
    assert harness.ledger.list_hypotheses(run_id) == []

"""The paged reads the API serves (``store/reads.py``): a page of turns with its samples and metric in
one read, the version that tells a cached page is still current, and the runs list's summaries."""

from __future__ import annotations

import pytest

from controller.domain.enums import Outcome, Reason, RunStatus, SampleArm, StopReason
from controller.domain.errors import NotFoundError
from controller.store import Store, TurnDecision
from controller.store.records import Sample
from tests.support import component, new_run


@pytest.fixture
def store(store: Store) -> Store:
    """The shared store (``tests/support``) with run ``r1`` running, its one component added."""
    store.create_run(new_run())  # metric p50_ms
    store.add_component(component())
    store.set_run_status("r1", RunStatus.RUNNING)
    return store


def _decide(store: Store, number: int, *, kept: bool = False, samples: list[Sample] | None = None) -> None:
    decision = TurnDecision(
        outcome=Outcome.ACCEPTED if kept else Outcome.REJECTED,
        reason=Reason.IMPROVED if kept else Reason.NOT_IMPROVED,
        value=float(number),
        p_value=0.5,
        hypothesis=f"idea {number}",
        changed_paths=("src/a.py",),
        commits={"router": "b" * 40},
        cost_usd=0.25,
        tokens=7,
        duration_s=0.1,
        detail="",
    )
    store.decide_turn(
        "r1",
        number,
        decision,
        champion=None,
        component_heads={},
        event=("rejected", {}),
        samples=samples or [],
    )


def _samples(number: int) -> list[Sample]:
    return [
        (SampleArm.CANDIDATE, 0, {"p50_ms": float(number)}, True),
        (SampleArm.CANDIDATE, 1, {}, False),  # invalid: not shown
        (SampleArm.CHAMPION, 0, {"p50_ms": 9.0, "other": 1.0}, True),
        (SampleArm.CHAMPION, 1, {"other": 2.0}, True),  # without the metric: not shown
        (SampleArm.CHAMPION, 2, {"p50_ms": 8.0}, True),
    ]


def test_a_turn_page_is_the_turns_their_metric_samples_and_the_metric(store: Store) -> None:
    for n in range(1, 7):
        store.start_turn("r1", n, 0 if n < 5 else 1)
        if n != 3:  # turn 3 stays started: a page shows decided turns only
            _decide(store, n, kept=n == 4, samples=_samples(n))
    page = store.turn_page("r1", after=1, limit=3)
    assert page.metric_name == "p50_ms"
    assert page.turns == [store.get_turn("r1", n) for n in (2, 4, 5)]
    assert page.samples == {
        (n, arm): values
        for n in (2, 4, 5)
        for arm, values in ((SampleArm.CANDIDATE, [float(n)]), (SampleArm.CHAMPION, [9.0, 8.0]))
    }
    assert [t.number for t in store.turn_page("r1", round=1).turns] == [5, 6]
    assert [t.number for t in store.turn_page("r1", outcome=Outcome.ACCEPTED).turns] == [4]
    empty = store.turn_page("r1", after=6)
    assert (empty.turns, dict(empty.samples)) == ([], {})
    with pytest.raises(NotFoundError):
        store.turn_page("nope")


def test_the_turns_version_moves_with_every_decision_and_nothing_else_a_page_shows(store: Store) -> None:
    with pytest.raises(NotFoundError):
        store.turns_version("nope")
    first = store.turns_version("r1")
    store.start_turn("r1", 1, 0)
    store.add_samples("r1", 1, [(SampleArm.CANDIDATE, 0, {"p50_ms": 1.0}, True)])
    assert store.turns_version("r1") == first, "a started turn is on no page"
    _decide(store, 1)
    decided = store.turns_version("r1")
    assert decided > first
    store.create_run(new_run("r2"))
    _other_run_decides(store)
    assert store.turns_version("r1") == decided, "another run's events are not this run's"


# A rejected decision with nothing to keep: what the page reads here need of a decided turn.
_REJECTED = TurnDecision(
    outcome=Outcome.REJECTED,
    reason=Reason.NOT_IMPROVED,
    value=1.0,
    p_value=None,
    hypothesis=None,
    changed_paths=(),
    commits={},
    cost_usd=0.0,
    tokens=0,
    duration_s=0.1,
    detail="",
)


def _other_run_decides(store: Store) -> None:
    store.set_run_status("r2", RunStatus.RUNNING)
    store.start_turn("r2", 1, 0)
    store.decide_turn(
        "r2",
        1,
        _REJECTED,
        champion=None,
        component_heads={},
        event=("rejected", {}),
    )


def test_run_summaries_are_the_runs_pages_columns(store: Store) -> None:
    for i in range(2, 6):
        store.create_run(new_run(f"r{i}", objective=f"goal {i}"))
    store.set_run_status("r3", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)
    for status in (None, RunStatus.CANCELLED, RunStatus.PENDING):
        for limit, offset in ((2, 0), (2, 2), (50, 1)):
            full = store.page_runs(limit=limit, offset=offset, status=status)
            brief = store.run_summaries(limit=limit, offset=offset, status=status)
            assert [
                (r.id, r.status, r.stop_reason, r.objective, r.baseline_value, r.champion_value, r.created_at)
                for r in full
            ] == [
                (r.id, r.status, r.stop_reason, r.objective, r.baseline_value, r.champion_value, r.created_at)
                for r in brief
            ]
            assert full or (status is RunStatus.CANCELLED and offset)


def _decide_parallel(store: Store, n: int) -> None:
    """Turn ``n`` with two hypotheses, both rejected in the end."""
    from tests.ledger.test_contract import _report

    store.start_turn("r1", n, 0)
    store.report_hypothesis("r1", n, _report(0, Reason.IMPROVED, 9.0))
    store.report_hypothesis("r1", n, _report(1, Reason.NOT_IMPROVED, 1.0))
    final = {0: (Reason.NOT_IMPROVED, "not enough"), 1: (Reason.NOT_IMPROVED, "no")}
    store.decide_turn(
        "r1",
        n,
        _REJECTED,
        champion=None,
        component_heads={},
        event=("rejected", {}),
        hypotheses=final,
    )


def test_a_turn_page_carries_its_turns_hypotheses_as_the_store_lists_them(store: Store) -> None:
    for n in (1, 2):
        _decide_parallel(store, n)
    page = store.turn_page("r1", after=1)
    assert page.hypotheses == store.list_hypotheses("r1", 2) and len(page.hypotheses) == 2
    assert store.turn_page("r1").hypotheses == store.list_hypotheses("r1")


def test_the_run_page_reads_outcomes_of_every_parallel_turn_and_samples_of_the_turns_it_names(
    store: Store,
) -> None:
    from tests.ledger.test_contract import _report

    store.start_turn("r1", 1, 0)
    _decide(store, 1)  # a turn of one: no hypotheses
    for n in (2, 3):
        _decide_parallel(store, n)
    store.start_turn("r1", 4, 0)  # still running: its reported hypothesis is not final yet
    store.report_hypothesis("r1", 4, _report(0, Reason.IMPROVED, 9.0))
    rejected = {0: Outcome.REJECTED, 1: Outcome.REJECTED}
    assert store.hypothesis_outcomes("r1") == {2: rejected, 3: rejected}
    assert store.hypotheses_of_turns("r1", [3, 1]) == store.list_hypotheses("r1", 3)
    assert store.hypotheses_of_turns("r1", []) == []
    assert store.hypothesis_outcomes("nope") == {}

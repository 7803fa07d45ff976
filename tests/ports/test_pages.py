"""The ``RunPages``, ``TurnPages`` and ``OpsCounts`` contracts (``controller.store.ports.pages``) for
every implementation: pages the API serves, limited and filtered by the backend, and the counters of
``/metrics``."""

from __future__ import annotations

import pytest

from controller.domain.enums import EventKind, Outcome, Reason, RunStatus, SampleArm, StopReason
from controller.domain.errors import NotFoundError
from controller.store.ports import OpsCounts, RunPages, TurnPages, TurnReads
from controller.store.records import TurnDecision
from tests.ledger.test_contract import _report
from tests.ports.conftest import PortHarness
from tests.ports.test_reads import FAIL, KEEP, _play


def test_runs_come_newest_first_in_pages_and_by_status(harness: PortHarness) -> None:
    pages: RunPages = harness.impl
    for run_id in ("r1", "r2", "r3"):
        harness.seed_run(run_id, objective=f"objective {run_id}")
        harness.clock.advance(1)
    harness.impl.set_run_status("r2", RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
    assert [r.id for r in pages.page_runs()] == ["r3", "r2", "r1"]
    assert [r.id for r in pages.page_runs(limit=1, offset=1)] == ["r2"]
    assert [r.id for r in pages.page_runs(status=RunStatus.RUNNING)] == ["r3", "r1"]
    summaries = pages.run_summaries(status=RunStatus.COMPLETED)
    assert [(s.id, s.objective, s.stop_reason) for s in summaries] == [
        ("r2", "objective r2", StopReason.MAX_TURNS)
    ]
    assert [s.id for s in pages.run_summaries(limit=2)] == ["r3", "r2"]

    _play(harness, "r1", 1, KEEP)
    _play(harness, "r1", 2, FAIL)
    tallies = pages.run_tallies(["r1", "r3"])
    assert (tallies["r1"].decided, tallies["r1"].kept, tallies["r1"].pulls) == (2, 1, 0)
    assert (tallies["r3"].decided, tallies["r3"].kept) == (0, 0)
    assert pages.run_tallies([]) == {}


def test_metric_samples_are_the_valid_values_of_one_metric_by_turn_and_arm(harness: PortHarness) -> None:
    pages: TurnPages = harness.impl
    harness.seed_run("r1")
    harness.impl.start_baseline("r1")
    baseline = [(SampleArm.BASELINE, i, {"p50_ms": 100.0 - i, "rss": 7.0}, True) for i in range(2)]
    harness.impl.add_samples("r1", 0, baseline)
    harness.impl.set_baseline("r1", 99.5, {"value": 99.5})
    _play(harness, "r1", 1, KEEP)
    harness.impl.start_turn("r1", 2, 0)
    samples = [
        (SampleArm.CHAMPION, 0, {"p50_ms": 0.1 + 0.2}, True),  # a value that a text round trip would change
        (SampleArm.CANDIDATE, 0, {"p50_ms": 1e-300}, True),
        (SampleArm.CANDIDATE, 1, {}, False),  # invalid: no values
        (SampleArm.CANDIDATE, 2, {"rss": 3.0}, True),  # without the metric
        (SampleArm.CANDIDATE, 3, {"p50_ms": 88.25}, True),
    ]
    harness.impl.add_samples("r1", 2, samples)
    assert pages.metric_samples("r1", "p50_ms") == {
        (0, SampleArm.BASELINE): [100.0, 99.0],
        (1, SampleArm.CANDIDATE): [90.0, 91.0],
        (2, SampleArm.CHAMPION): [0.1 + 0.2],
        (2, SampleArm.CANDIDATE): [1e-300, 88.25],
    }
    assert pages.metric_samples("r1", "rss") == {
        (0, SampleArm.BASELINE): [7.0, 7.0],
        (2, SampleArm.CANDIDATE): [3.0],
    }
    assert pages.metric_samples("nope", "p50_ms") == {}


def test_turn_pages_follow_the_event_stream(harness: PortHarness) -> None:
    pages: TurnPages = harness.impl
    harness.seed_run("r1")
    assert pages.turns_version("r1") == 0 and pages.last_event_id("r1") == 0
    assert pages.last_event_of("r1", EventKind.TURN_STARTED) is None
    _play(harness, "r1", 1, KEEP)
    version = pages.turns_version("r1")
    assert version > 0 and version == pages.last_event_id("r1")
    _play(harness, "r1", 2, FAIL)
    _play(harness, "r1", 3, KEEP)
    assert pages.turns_version("r1") > version, "a decided turn changes the version"
    started = pages.last_event_of("r1", EventKind.TURN_STARTED)
    assert started is not None and started.payload == {"turn": 3}

    page = pages.turn_page("r1", after=1, limit=1)
    assert page.metric_name == "p50_ms" and [t.number for t in page.turns] == [2]
    assert dict(page.samples) == {(2, SampleArm.CANDIDATE): [90.0, 91.0]}
    assert [t.number for t in pages.turn_page("r1", outcome=Outcome.ACCEPTED).turns] == [1, 3]
    assert pages.turn_page("r1", round=1).turns == []
    with pytest.raises(NotFoundError):
        pages.turns_version("nope")


def _decide_parallel(harness: PortHarness, number: int) -> None:
    """Turn ``number`` with two hypotheses reported, both rejected in the end."""
    harness.impl.start_turn("r1", number, 0)
    harness.impl.report_hypothesis("r1", number, _report(0, Reason.IMPROVED, 9.0))
    harness.impl.report_hypothesis("r1", number, _report(1, Reason.NOT_IMPROVED, 1.0))
    harness.impl.decide_turn(
        "r1",
        number,
        TurnDecision(Outcome.REJECTED, Reason.NOT_IMPROVED),
        champion=None,
        component_heads={},
        event=(EventKind.REJECTED, {"turn": number}),
        hypotheses={0: (Reason.NOT_IMPROVED, "not enough"), 1: (Reason.NOT_IMPROVED, "no")},
    )


def test_turn_pages_read_the_hypotheses_of_parallel_turns(harness: PortHarness) -> None:
    """What the dashboard's run page reads: every decided parallel turn's outcomes by index, and the
    hypotheses (with their samples) of the turns it names only."""
    pages: TurnPages = harness.impl
    reads: TurnReads = harness.impl
    harness.seed_run("r1")
    _play(harness, "r1", 1, KEEP)  # a turn of one: no hypotheses
    for number in (2, 3):
        _decide_parallel(harness, number)
    harness.impl.start_turn("r1", 4, 0)  # still running: its reported hypothesis is not final
    harness.impl.report_hypothesis("r1", 4, _report(0, Reason.IMPROVED, 9.0))
    rejected = {0: Outcome.REJECTED, 1: Outcome.REJECTED}
    assert pages.hypothesis_outcomes("r1") == {2: rejected, 3: rejected}
    assert pages.hypothesis_outcomes("nope") == {}
    named = pages.hypotheses_of_turns("r1", [3, 1])
    assert named == reads.list_hypotheses("r1", 3) and [h.index for h in named] == [0, 1]
    assert all(h.samples for h in named), "with their samples"
    assert pages.hypotheses_of_turns("r1", []) == []


def test_the_counters_of_metrics(harness: PortHarness) -> None:
    counts: OpsCounts = harness.impl
    assert counts.count_runs_by_status() == {} and counts.count_turns_by_outcome() == {}
    assert counts.count_deliveries() == (0, 0)
    harness.seed_run("r1")
    harness.seed_run("r2", status=RunStatus.PENDING)
    _play(harness, "r1", 1, KEEP)
    _play(harness, "r1", 2, FAIL)
    harness.impl.start_turn("r1", 3, 0)  # undecided: not counted
    harness.impl.save_delivery("d1", "ping", None, {})
    harness.impl.save_delivery("d2", "ping", None, {})
    harness.impl.mark_delivery_processed("d1")
    assert counts.count_runs_by_status() == {RunStatus.RUNNING: 1, RunStatus.PENDING: 1}
    assert counts.count_turns_by_outcome() == {Outcome.ACCEPTED: 1, Outcome.FAILED: 1}
    assert counts.count_deliveries() == (2, 1)

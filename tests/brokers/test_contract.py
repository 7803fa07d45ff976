"""The broker contract (``controller.brokers.base.Broker``'s docstring), for every implementation.

Brokers are built around a scripted runner (``Script``): a real function run the way the broker
runs rounds, whose steps the test releases with events, so no timing decides an assertion. To add
an implementation (the Kubernetes broker), add a factory to ``BROKERS`` that runs the script's
rounds (for Kubernetes: a fake cluster at the HTTP level whose pods call the same runner).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from controller.brokers.base import Broker, RoundOutcome
from controller.brokers.local import LocalBroker, RoundRunner
from controller.brokers.routing import RoutedBroker
from controller.domain.enums import RunStatus, StopReason
from controller.domain.errors import ConflictError, CrucibleError, NotFoundError
from controller.domain.jobs import RoundJob, RoundState

WAIT = 30.0  # seconds: a bound for a broken broker, never reached by a working one


@dataclass
class Script:
    """A runner whose rounds block until released; records what it ran."""

    ran: list[tuple[str, int, int]] = field(default_factory=list)
    started: dict[tuple[str, int, int], threading.Event] = field(default_factory=dict)
    release: dict[tuple[str, int, int], threading.Event] = field(default_factory=dict)
    fail: set[tuple[str, int, int]] = field(default_factory=set)
    blocking: bool = True

    def gate(self, key: tuple[str, int, int]) -> tuple[threading.Event, threading.Event]:
        started = self.started.setdefault(key, threading.Event())
        release = self.release.setdefault(key, threading.Event())
        return started, release

    def __call__(self, job: RoundJob, cancel: threading.Event) -> RoundOutcome:
        self.ran.append(job.launch_key)
        started, release = self.gate(job.launch_key)
        started.set()
        if self.blocking:
            while not release.wait(0.01):
                if cancel.is_set():
                    return RoundOutcome(RunStatus.CANCELLED, StopReason.CANCELLED, "cancelled")
        if job.launch_key in self.fail:
            raise CrucibleError(f"round {job.round} broke")
        return RoundOutcome(RunStatus.RUNNING, StopReason.MAX_TURNS, f"round {job.round} done", kept=True)


@dataclass
class Subject:
    broker: Broker
    script: Script
    concurrent: bool

    def launch(self, job: RoundJob) -> None:
        """Launch ``job`` to run through (released up front: an inline broker runs it right here)."""
        self.script.gate(job.launch_key)[1].set()
        self.broker.launch(job)


BROKERS: dict[str, Callable[[RoundRunner], Broker]] = {
    "local-inline": lambda runner: LocalBroker(runner, inline=True),
    "local-threads": lambda runner: LocalBroker(runner, inline=False),
    "routed-local": lambda runner: RoutedBroker(
        {"local": lambda: LocalBroker(runner, inline=False)}, lambda *_: "local", concurrent=True
    ),
}


@pytest.fixture(params=sorted(BROKERS))
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    script = Script()
    broker = BROKERS[request.param](script)
    yield Subject(broker, script, broker.capabilities.concurrent)
    for release in script.release.values():
        release.set()


def job(run_id: str = "r1", round: int = 0, **changes: object) -> RoundJob:
    fields: dict[str, object] = {
        "run_id": run_id,
        "round": round,
        "turns": 3,
        "first_turn": 1,
        "heads": {"a": "0" * 40},
    }
    fields.update(changes)
    return RoundJob(**fields)  # type: ignore[arg-type]


def test_a_launched_round_runs_once_and_reports_its_outcome(subject: Subject) -> None:
    subject.launch(job())
    report = subject.broker.wait("r1", 0, WAIT)
    assert report.state is RoundState.SUCCEEDED and report.finished
    assert report.outcome == RoundOutcome(RunStatus.RUNNING, StopReason.MAX_TURNS, "round 0 done", kept=True)
    assert subject.script.ran == [("r1", 0, 0)]
    assert subject.broker.status("r1", 0) == report


def test_launching_the_same_round_again_starts_nothing(subject: Subject) -> None:
    subject.launch(job())
    subject.broker.wait("r1", 0, WAIT)
    again = subject.broker.launch(job())
    assert again.state is RoundState.SUCCEEDED
    assert subject.script.ran == [("r1", 0, 0)], "idempotent per (run, round), even after it finished"


def test_the_same_key_with_a_different_job_is_a_conflict(subject: Subject) -> None:
    subject.launch(job())
    with pytest.raises(ConflictError):
        subject.broker.launch(job(turns=9))


def test_rounds_are_told_apart_by_run_and_round(subject: Subject) -> None:
    for key in [("r1", 0), ("r1", 1), ("r2", 0)]:
        subject.launch(job(*key))
        assert subject.broker.wait(*key, WAIT).state is RoundState.SUCCEEDED
    assert sorted(subject.script.ran) == [("r1", 0, 0), ("r1", 1, 0), ("r2", 0, 0)]


def test_unknown_rounds_are_not_found(subject: Subject) -> None:
    for call in (subject.broker.status, subject.broker.cancel, subject.broker.wait):
        with pytest.raises(NotFoundError):
            call("nope", 0)


def test_a_round_whose_runner_raises_is_failed_with_the_reason(subject: Subject) -> None:
    subject.script.fail.add(("r1", 0, 0))
    subject.launch(job())
    report = subject.broker.wait("r1", 0, WAIT)
    assert report.state is RoundState.FAILED
    # A remote broker may add where it learnt it ("worker_failed: crucible worker exited 1: ...").
    assert report.error is not None and report.error.endswith("round 0 broke") and report.outcome is None


def test_cancelling_a_finished_round_changes_nothing(subject: Subject) -> None:
    subject.launch(job())
    done = subject.broker.wait("r1", 0, WAIT)
    assert subject.broker.cancel("r1", 0) == done
    assert subject.broker.status("r1", 0) == done


def test_a_running_round_is_cancelled_through_its_event(subject: Subject) -> None:
    if not subject.concurrent:
        pytest.skip("an inline broker returns from launch only when the round is over")
    subject.broker.launch(job())
    assert subject.script.gate(("r1", 0, 0))[0].wait(WAIT), "the round started"
    assert subject.broker.status("r1", 0).state is RoundState.RUNNING
    subject.broker.cancel("r1", 0)
    report = subject.broker.wait("r1", 0, WAIT)
    assert report.state is RoundState.CANCELLED
    assert report.outcome is not None and report.outcome.stop_reason is StopReason.CANCELLED


def test_wait_with_a_timeout_returns_the_current_report(subject: Subject) -> None:
    if not subject.concurrent:
        pytest.skip("an inline broker returns from launch only when the round is over")
    subject.broker.launch(job())
    assert subject.script.gate(("r1", 0, 0))[0].wait(WAIT)
    assert subject.broker.wait("r1", 0, 0.01).state is RoundState.RUNNING
    subject.script.gate(("r1", 0, 0))[1].set()
    assert subject.broker.wait("r1", 0, WAIT).state is RoundState.SUCCEEDED


def test_concurrent_brokers_run_rounds_side_by_side(subject: Subject) -> None:
    if not subject.concurrent:
        pytest.skip("this broker runs one round at a time (capabilities.concurrent is false)")
    subject.broker.launch(job("r1"))
    subject.broker.launch(job("r2"))
    for run_id in ("r1", "r2"):
        assert subject.script.gate((run_id, 0, 0))[0].wait(WAIT), "both started before either was released"
    for run_id in ("r1", "r2"):
        subject.script.gate((run_id, 0, 0))[1].set()
        assert subject.broker.wait(run_id, 0, WAIT).state is RoundState.SUCCEEDED


def test_an_inline_broker_cancelled_from_another_thread_stops_the_round(subject: Subject) -> None:
    """Ctrl-C's path in ``crucible loop``: the signal handler cancels while launch runs the round."""
    if subject.concurrent:
        pytest.skip("threaded brokers are covered by the running-round test")
    started = subject.script.gate(("r1", 0, 0))[0]

    def cancel_when_started() -> None:
        assert started.wait(WAIT)
        subject.broker.cancel("r1", 0)

    helper = threading.Thread(target=cancel_when_started)
    helper.start()
    report = subject.broker.launch(job())
    helper.join()
    assert report.state is RoundState.CANCELLED
    assert report.outcome is not None and report.outcome.stop_reason is StopReason.CANCELLED


def test_a_new_attempt_of_a_finished_round_runs_again(subject: Subject) -> None:
    """A run re-driven after a cancel or a takeover launches its round again with a higher attempt;
    status, wait and cancel then address that attempt (ADR-0012)."""
    subject.launch(job())
    assert subject.broker.wait("r1", 0, WAIT).state is RoundState.SUCCEEDED
    subject.launch(job(attempt=1, turns=2, first_turn=2))
    report = subject.broker.wait("r1", 0, WAIT)
    assert report.state is RoundState.SUCCEEDED
    assert subject.script.ran == [("r1", 0, 0), ("r1", 0, 1)]
    again = subject.broker.launch(job(attempt=1, turns=2, first_turn=2))
    assert again == report and len(subject.script.ran) == 2, "idempotent per attempt too"


def test_a_stale_attempt_is_a_conflict(subject: Subject) -> None:
    subject.launch(job(attempt=2))
    subject.broker.wait("r1", 0, WAIT)
    with pytest.raises(ConflictError):
        subject.broker.launch(job(attempt=1))
    assert subject.script.ran == [("r1", 0, 2)]


def test_a_new_attempt_while_the_round_still_runs_is_a_conflict(subject: Subject) -> None:
    if not subject.concurrent:
        pytest.skip("an inline broker returns from launch only when the round is over")
    subject.broker.launch(job())
    assert subject.script.gate(("r1", 0, 0))[0].wait(WAIT), "the round started"
    with pytest.raises(ConflictError):
        subject.broker.launch(job(attempt=1))
    subject.broker.cancel("r1", 0)
    assert subject.broker.wait("r1", 0, WAIT).state is RoundState.CANCELLED
    subject.launch(job(attempt=1))
    assert subject.broker.wait("r1", 0, WAIT).state is RoundState.SUCCEEDED
    assert subject.script.ran == [("r1", 0, 0), ("r1", 0, 1)]

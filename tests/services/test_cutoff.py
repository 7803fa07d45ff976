"""The turn a remote round was in when its pod was lost is decided ``failed``, naming why (ADR-0015)."""

from __future__ import annotations

import pytest

from controller.domain.enums import EventKind, Outcome, Reason, RunStatus, TurnPhase
from controller.services.remote.cutoff import cut_off_reason, fail_cut_off_turn, relaunchable
from controller.store import Store
from tests.support import component, new_run


@pytest.fixture
def store(store: Store) -> Store:
    """The shared store (``tests/support``, closed after the test) with run ``r1`` running, one component."""
    store.create_run(new_run(turns_planned=3))
    store.add_component(component("app"))
    store.set_run_status("r1", RunStatus.RUNNING)
    return store


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ("evicted: EvictionByEvictionAPI: Eviction API: evicting", Reason.LOST),
        ("pod_lost: the pod was deleted before it finished", Reason.LOST),
        ("oom_killed: the worker ran out of its memory limit", Reason.LOST),
        ("deadline_exceeded: Job was active longer than specified deadline", Reason.TIMEOUT),
    ],
)
def test_the_started_turn_of_a_lost_pod_fails_naming_the_reason(
    store: Store, error: str, reason: Reason
) -> None:
    store.start_turn("r1", 1, 0)
    decided = fail_cut_off_turn(store, "r1", 0, error)
    assert decided is not None and decided.phase is TurnPhase.DECIDED
    assert (decided.outcome, decided.reason, decided.detail) == (Outcome.FAILED, reason, error)
    (event,) = [e for e in store.list_events("r1") if e.kind is EventKind.FAILED]
    assert event.payload["lost"] == error.split(":")[0] and event.payload["turn"] == 1
    store.close()


def test_nothing_is_decided_for_a_failure_of_the_worker_itself_or_without_an_open_turn(store: Store) -> None:
    store.start_turn("r1", 1, 0)
    assert fail_cut_off_turn(store, "r1", 0, "worker_failed: crucible worker exited 1: boom") is None
    assert fail_cut_off_turn(store, "r1", 1, "pod_lost: deleted") is None, "no open turn in round 1"
    assert store.get_turn("r1", 1).phase is TurnPhase.STARTED
    assert cut_off_reason(None) is None and cut_off_reason("evicted: x") == "evicted"
    store.close()


@pytest.mark.parametrize(
    ("error", "again"),
    [
        ("evicted: EvictionByEvictionAPI", True),
        ("oom_killed: OOMKilled", True),
        ("pod_lost: deleted", True),
        ("no_outcome: exited 0", True),
        ("deadline_exceeded: past broker.deadline", False),
        ("job_deleted: Job ns/x was deleted", False),
        ("start_failed: ErrImagePull", False),
        ("worker_failed: crucible worker exited 1: boom", False),
        ("policy_violation: bundle refused", False),
        ("pod_lost_but_not_quite: x", False),
        (None, False),
    ],
)
def test_only_losses_a_new_pod_may_not_meet_again_are_relaunched(error: str | None, again: bool) -> None:
    assert relaunchable(error) is again

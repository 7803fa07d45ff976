"""The ``RunLifecycle``, ``ComponentHeads``, ``Scheduling``, ``WorkerRoundRecords`` and
``ProcessGroupRecords`` contracts (``controller.store.ports``) for every implementation."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.domain.errors import ConflictError, NotFoundError
from controller.store.ports import (
    ComponentHeads,
    ProcessGroupRecords,
    RunLifecycle,
    Scheduling,
    WorkerRoundRecords,
)
from tests.ports.conftest import SHA_A, SHA_B, SHA_C, PortHarness

TTL = 30.0


def test_a_run_moves_only_along_its_transitions(harness: PortHarness) -> None:
    runs: RunLifecycle = harness.impl
    harness.seed_run("r1", status=RunStatus.PENDING)
    with pytest.raises(ConflictError):
        harness.seed_run("r1")  # the id exists
    with pytest.raises(ValueError):
        runs.set_run_status("r1", RunStatus.RUNNING, stop_reason=StopReason.MAX_TURNS)
    assert runs.set_run_status("r1", RunStatus.RUNNING).status is RunStatus.RUNNING
    runs.request_cancel("r1")
    assert harness.impl.get_run("r1").cancel_requested is True
    done = runs.set_run_status(
        "r1", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED, stop_message="bye"
    )
    assert (done.stop_reason, done.stop_message, done.cancel_requested) == (
        StopReason.CANCELLED,
        "bye",
        False,
    )
    assert done.finished_at is not None
    with pytest.raises(ConflictError):
        runs.request_cancel("r1")
    harness.seed_run("r2")
    runs.set_run_status("r2", RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
    with pytest.raises(ConflictError):
        runs.set_run_status("r2", RunStatus.RUNNING)
    first = runs.append_event("r2", EventKind.RESUMED, {"n": 1})
    second = runs.append_event("r2", EventKind.RESUMED, {"n": 2})
    assert second.id > first.id
    with pytest.raises(NotFoundError):
        runs.append_event("nope", EventKind.RESUMED, {})


def test_component_heads_move_with_their_events(harness: PortHarness) -> None:
    heads: ComponentHeads = harness.impl
    harness.seed_run("r1")
    heads.set_component_head("r1", "app", SHA_B)
    heads.update_component_extra("r1", "app", {"note": "kept"})
    heads.update_component_extra("r1", "app", {"other": 1})
    app = harness.impl.list_components("r1")[0]
    assert (app.head_sha, dict(app.extra)) == (SHA_B, {"note": "kept", "other": 1})
    heads.follow_base("r1", "app", new_base=SHA_C, head_sha=SHA_C, event={"base": SHA_C})
    app = harness.impl.list_components("r1")[0]
    assert (app.base_sha, app.head_sha, app.extra["bases"]) == (SHA_C, SHA_C, [SHA_A, SHA_C])
    heads.build_on_adopted("r1", "app", head_sha=SHA_B, value=12.5, event={"head": SHA_B})
    app = harness.impl.list_components("r1")[0]
    assert (app.head_sha, app.extra["head_value"]) == (SHA_B, {"sha": SHA_B, "value": 12.5})
    kinds = [e.kind for e in harness.impl.list_events("r1")]
    assert EventKind.BASE_FOLLOWED in kinds and EventKind.BUILT_ON_ADOPTED in kinds
    with pytest.raises(NotFoundError):
        heads.set_component_head("r1", "nope", SHA_B)


def test_schedulers_claim_runs_nobody_drives_and_see_which_have_news(harness: PortHarness) -> None:
    sched: Scheduling = harness.impl
    assert sched.newest_event_id() == 0 and sched.newest_events(0) == {}
    for run_id in ("r1", "r2", "r3"):
        harness.seed_run(run_id, status=RunStatus.PENDING)
        harness.clock.advance(1)  # created in this order: claimed oldest first
    harness.impl.claim_run("r2", "other", TTL)  # driven by someone else
    assert sched.claim_runs("a", TTL, limit=1) == ["r1"]
    assert sched.claim_runs("a", TTL, limit=5) == ["r3"]
    assert sched.claim_runs("a", TTL, limit=0) == []
    harness.clock.advance(TTL + 1)  # every lease expired: all three claimable again
    assert sched.claim_runs("b", TTL, limit=5) == ["r1", "r2", "r3"]
    assert sched.release_leases("b", ["r1", "r3", "nope"]) == 2
    assert sched.release_leases("b", []) == 0
    assert harness.impl.get_run("r1").lease_owner is None and harness.impl.get_run("r2").lease_owner == "b"

    mark = sched.newest_event_id()
    news = harness.impl.append_event("r2", EventKind.RESUMED, {})
    assert sched.newest_events(mark) == {"r2": news.id} and sched.newest_event_id() == news.id


def test_only_the_newest_attempt_of_a_remote_round_may_write(harness: PortHarness) -> None:
    workers: WorkerRoundRecords = harness.impl
    harness.seed_run("r1")
    expires = harness.clock.now + timedelta(hours=1)
    first = workers.add_worker_round("r1", 0, token_hash="h1", job={"round": 0}, expires_at=expires)
    assert (first.attempt, first.revoked_at, first.outcome) == (1, None, None)
    with pytest.raises(ConflictError):
        workers.add_worker_round("r1", 0, token_hash="h1", job={}, expires_at=expires)
    second = workers.add_worker_round("r1", 0, token_hash="h2", job={"round": 0}, expires_at=expires)
    assert second.attempt == 2
    revoked = workers.worker_round_by_token("h1")
    assert revoked is not None and revoked.revoked_at is not None, "a new attempt revokes the old"
    with pytest.raises(ConflictError):
        workers.prove_worker_heads("h1", {"app": SHA_B})  # its attempt is over
    with pytest.raises(NotFoundError):
        workers.prove_worker_heads("never-minted", {"app": SHA_B})
    assert workers.prove_worker_heads("h2", {"app": SHA_B}).heads == {"app": (SHA_B,)}
    workers.prove_worker_heads("h2", {"app": SHA_B})  # the same commit once
    assert workers.proved_heads("r1", 0) == {"app": {SHA_B}}
    assert workers.worker_outcome("r1", 0) is None
    done = workers.finish_worker_round("h2", {"status": "running"})
    assert done.outcome == {"status": "running"} and done.revoked_at is not None
    outcome = workers.worker_outcome("r1", 0)
    assert outcome is not None and outcome.token_hash == "h2"
    workers.add_worker_round("r1", 1, token_hash="h3", job={"round": 1}, expires_at=expires)
    assert workers.revoke_worker_rounds("r1", 1) == 1 and workers.revoke_worker_rounds("r1", 1) == 0
    assert workers.worker_round_by_token("nope") is None


def test_the_live_hypotheses_of_an_index_are_its_unrevoked_grants_oldest_first(harness: PortHarness) -> None:
    workers: WorkerRoundRecords = harness.impl
    harness.seed_run("r1")
    expires = harness.clock.now + timedelta(hours=1)

    def grant(token: str, job: dict[str, object]) -> None:
        workers.add_worker_round("r1", 0, token_hash=token, job=job, expires_at=expires)

    grant("slot", {"slot": 1})
    grant("t1", {"hypothesis": {"turn": 1, "index": 1}})
    grant("t1-other", {"hypothesis": {"turn": 1, "index": 0}})
    grant("t2", {"hypothesis": {"turn": 2, "index": 1}})
    grant("round", {"round": 0})
    assert [g.token_hash for g in workers.live_hypotheses("r1", 0, 1)] == ["t1", "t2"]
    grant("t1-again", {"hypothesis": {"turn": 1, "index": 1}})  # revokes "t1"
    assert [g.token_hash for g in workers.live_hypotheses("r1", 0, 1)] == ["t2", "t1-again"]
    assert workers.live_hypotheses("r1", 1, 1) == []
    # A grant that takes another over (a pod taking its offer) only while that one is live (ADR-0051).
    taken = {"hypothesis": {"turn": 2, "index": 1}}
    workers.add_worker_round("r1", 0, token_hash="t2-taken", job=taken, expires_at=expires, replacing="t2")
    with pytest.raises(ConflictError):  # "t2" was revoked by that take: nothing written
        workers.add_worker_round("r1", 0, token_hash="t2-late", job=taken, expires_at=expires, replacing="t2")
    with pytest.raises(ConflictError):
        workers.add_worker_round("r1", 0, token_hash="t2-x", job=taken, expires_at=expires, replacing="nope")
    assert workers.worker_round_by_token("t2-late") is None
    assert [g.token_hash for g in workers.live_hypotheses("r1", 0, 1)] == ["t1-again", "t2-taken"]


def test_process_groups_are_remembered_until_cleared(harness: PortHarness) -> None:
    groups: ProcessGroupRecords = harness.impl
    harness.seed_run("r1")
    groups.record_process_group("r1", 101, "make bench")
    groups.record_process_group("r1", 202, "agent")
    groups.record_process_group("r1", 101, "make bench again")  # updates the command
    assert groups.list_process_groups("r1") == [(101, "make bench again"), (202, "agent")]
    groups.clear_process_group("r1", 101)
    groups.clear_process_group("r1", 101)  # not recorded any more: not an error
    assert groups.list_process_groups("r1") == [(202, "agent")]
    with pytest.raises(NotFoundError):
        groups.record_process_group("nope", 1, "x")

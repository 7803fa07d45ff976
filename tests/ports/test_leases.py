"""The ``RunLeases`` contract (``controller.store.ports.runs``) for every implementation: who drives
a run, as a lease its holder renews and anyone may take over once it has expired (ADR-0004)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.domain.enums import RunStatus, StopReason
from controller.domain.errors import ConflictError, LeaseHeldError, LeaseLostError, NotFoundError
from controller.store.ports import RunLeases
from tests.ports.conftest import PortHarness

TTL = 30.0


def _leases(h: PortHarness) -> RunLeases:
    return h.impl


def test_a_live_lease_keeps_another_owner_out_until_it_expires(harness: PortHarness) -> None:
    leases, clock = _leases(harness), harness.clock
    harness.seed_run("r1")
    assert leases.claim_run("r1", "a", TTL) == clock.now + timedelta(seconds=TTL)
    clock.advance(TTL - 1)
    with pytest.raises(LeaseHeldError) as held:
        leases.claim_run("r1", "b", TTL)
    assert held.value.owner == "a" and held.value.expires_in_s == pytest.approx(1.0)
    run = leases.get_run("r1")
    assert run.lease_owner == "a" and run.lease_expires_at == harness.clock.now + timedelta(seconds=1)

    clock.advance(1)  # expired: anyone may take it over, and the old holder has lost it
    assert leases.claim_run("r1", "b", TTL) == clock.now + timedelta(seconds=TTL)
    with pytest.raises(LeaseLostError):
        leases.renew_lease("r1", "a", TTL)
    assert leases.get_run("r1").lease_owner == "b"


def test_the_holder_renews_and_claims_again_and_reads_the_cancel_flag(harness: PortHarness) -> None:
    leases, clock = _leases(harness), harness.clock
    harness.seed_run("r1")
    leases.claim_run("r1", "a", TTL)
    clock.advance(20)
    renewal = leases.renew_lease("r1", "a", TTL)
    assert (renewal.expires_at, renewal.cancel_requested) == (clock.now + timedelta(seconds=TTL), False)
    assert leases.claim_run("r1", "a", 5) == clock.now + timedelta(seconds=5)  # its own: renewed
    harness.impl.request_cancel("r1")
    assert leases.renew_lease("r1", "a", TTL).cancel_requested is True


def test_renewing_many_answers_only_the_leases_still_held(harness: PortHarness) -> None:
    leases, clock = _leases(harness), harness.clock
    for run_id in ("r1", "r2", "r3"):
        harness.seed_run(run_id)
        leases.claim_run(run_id, "a", TTL)
    assert leases.release_lease("r2", "a") is True
    clock.advance(TTL + 1)
    leases.claim_run("r3", "b", TTL)  # taken over after it expired
    harness.impl.request_cancel("r1")
    renewed = leases.renew_leases("a", TTL, ["r1", "r2", "r3", "no-such-run"])
    assert set(renewed) == {"r1"}, "handed back, taken over and unknown runs are absent, not errors"
    assert renewed["r1"].expires_at == clock.now + timedelta(seconds=TTL)
    assert renewed["r1"].cancel_requested is True
    assert leases.renew_leases("a", TTL, []) == {}


def test_releasing_is_idempotent_and_lets_anyone_claim_at_once(harness: PortHarness) -> None:
    leases = _leases(harness)
    harness.seed_run("r1")
    leases.claim_run("r1", "a", TTL)
    assert leases.release_lease("r1", "b") is False, "not b's to hand back"
    assert leases.release_lease("r1", "a") is True
    assert leases.release_lease("r1", "a") is False
    run = leases.get_run("r1")
    assert (run.lease_owner, run.lease_expires_at) == (None, None)
    with pytest.raises(LeaseLostError):
        leases.renew_lease("r1", "a", TTL)
    leases.claim_run("r1", "b", TTL)
    assert leases.get_run("r1").lease_owner == "b"


def test_a_completed_or_failed_run_cannot_be_claimed(harness: PortHarness) -> None:
    leases = _leases(harness)
    harness.seed_run("done")
    harness.impl.set_run_status("done", RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
    with pytest.raises(ConflictError):
        leases.claim_run("done", "a", TTL)
    assert leases.get_run("done").lease_owner is None


def test_bad_calls_change_nothing(harness: PortHarness) -> None:
    leases = _leases(harness)
    harness.seed_run("r1")
    for call in (
        lambda: leases.claim_run("nope", "a", TTL),
        lambda: leases.renew_lease("nope", "a", TTL),
        lambda: leases.release_lease("nope", "a"),
        lambda: leases.get_run("nope"),
    ):
        with pytest.raises(NotFoundError):
            call()
    with pytest.raises(ValueError, match="positive"):
        leases.claim_run("r1", "a", 0)
    with pytest.raises(ValueError, match="positive"):
        leases.renew_leases("a", -1, ["r1"])
    assert leases.get_run("r1").lease_owner is None

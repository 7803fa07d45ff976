"""The ``SessionRevocations`` contract (``controller.store.ports.pages``) for every implementation: the
SQL store over SQLite and PostgreSQL (what ``crucible serve``'s replicas share) and the dashboard's
in-memory one (a local loop's). A revoked session stays revoked until its cookie would have expired;
revoking again changes nothing; an expiry without a time zone is a caller bug."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from controller.api.dashboard.session import MemoryRevocations
from controller.store.ports import SessionRevocations
from controller.store.store import Store
from tests.ports.conftest import IMPLEMENTATIONS, PortHarness
from tests.support import T0, Clock

MEMORY = "memory"


@pytest.fixture(params=[*IMPLEMENTATIONS, MEMORY])
def revocations(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionRevocations]:
    if request.param == MEMORY:
        yield MemoryRevocations()
        return
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ports.db'}"
    else:
        url = request.getfixturevalue("migrated_postgres_url")
    store = Store.open(url, upgrade=True, clock=Clock())
    try:
        yield store
    finally:
        store.close()


def test_a_revoked_session_stays_revoked_and_others_are_not(revocations: SessionRevocations) -> None:
    far = T0 + timedelta(days=3650)
    assert not revocations.session_revoked("a" * 64)
    revocations.revoke_session("a" * 64, far)
    revocations.revoke_session("a" * 64, far)  # again: nothing changes
    revocations.revoke_session("b" * 64, far)
    assert revocations.session_revoked("a" * 64)
    assert revocations.session_revoked("b" * 64)
    assert not revocations.session_revoked("c" * 64)


def test_an_expiry_without_a_time_zone_is_refused(revocations: SessionRevocations) -> None:
    with pytest.raises(ValueError, match="timezone"):
        revocations.revoke_session("a" * 64, T0.replace(tzinfo=None))
    assert not revocations.session_revoked("a" * 64)


def test_the_store_drops_a_revocation_once_its_cookie_has_long_expired(harness: PortHarness) -> None:
    """The table holds about one session lifetime of logouts: each revocation drops those whose
    cookies expired over an hour ago (an hour: replicas' clocks may differ a little)."""
    store: SessionRevocations = harness.impl
    expires = harness.clock() + timedelta(hours=12)
    store.revoke_session("a" * 64, expires)
    harness.clock.advance(12.5 * 3600)
    store.revoke_session("b" * 64, expires + timedelta(hours=12))
    assert store.session_revoked("a" * 64), "within the hour after its expiry, kept"
    harness.clock.advance(3600)
    store.revoke_session("c" * 64, expires + timedelta(hours=12))
    assert not store.session_revoked("a" * 64)
    assert store.session_revoked("b" * 64) and store.session_revoked("c" * 64)

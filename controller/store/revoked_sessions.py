"""The store's record of dashboard sessions ended by a logout, so every replica refuses their cookies.

A mixin of ``Store`` in its own module; the session scope and transaction rules are ``Store``'s. The
dashboard's cookie is stateless (``api.dashboard.session``): only logged-out ones are recorded, by
the sha256 of their nonce (the nonce never reaches the database), until the cookie would have expired
anyway. Each revocation drops the rows an hour past that point (replicas' clocks may differ a little),
so the table holds the logouts of about one session lifetime.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

from controller.store.models import RevokedSessionRow

_GRACE = timedelta(hours=1)
_ROWS = RevokedSessionRow.__table__
_REVOKED = sa.select(_ROWS.c.nonce_hash).where(_ROWS.c.nonce_hash == sa.bindparam("nonce_hash"))


class RevokedSessions:
    """``revoke_session`` / ``session_revoked``; mixed into ``Store``."""

    def _now(self) -> datetime:
        raise NotImplementedError

    def _session(self, *, read_only: bool = False) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def revoke_session(self, nonce_hash: str, expires_at: datetime) -> None:
        """Record that the session whose nonce hashes to ``nonce_hash`` ended (ports.pages)."""
        if expires_at.tzinfo is None:
            raise ValueError("expires_at must be timezone-aware")
        with self._session() as s:
            s.execute(sa.delete(RevokedSessionRow).where(RevokedSessionRow.expires_at < self._now() - _GRACE))
            if s.get(RevokedSessionRow, nonce_hash) is None:
                s.add(RevokedSessionRow(nonce_hash=nonce_hash, expires_at=expires_at))

    def session_revoked(self, nonce_hash: str) -> bool:
        """Whether a logout ended that session (ports.pages)."""
        with self._session(read_only=True) as s:
            return s.execute(_REVOKED, {"nonce_hash": nonce_hash}).first() is not None

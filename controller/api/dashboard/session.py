"""Dashboard sessions: log in once with an API token, then a signed cookie, plus a CSRF token for forms.

A browser cannot send a bearer header on a link or an ``EventSource``, so the dashboard trades the token
for a session cookie (HttpOnly, SameSite=Strict, Secure over https). The cookie is stateless: ``role``,
expiry and a nonce, signed with HMAC-SHA256 under a key derived from *both* configured tokens, so a
reader cannot forge an admin session, no session table is needed, and rotating either token logs
everybody out. The CSRF token of a form is the HMAC of the session's nonce: a page from another origin
can neither read it nor guess it, and SameSite=Strict already keeps the cookie off cross-site posts.

Logging out ends the session on the server too, so a copy of its cookie stops working: the ended
sessions (their nonces' sha256) are in the database (``SessionRevocations``, the ``Store``), which
every ``crucible serve`` replica reads, so a logout on one is a logout on all (it was kept per process
before). A local loop's read-only dashboard, one process with no store of its own to write, keeps
them in memory (``MemoryRevocations``).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from controller.api.auth import ApiTokens
from controller.domain.errors import ConflictError
from controller.store.ports import SessionRevocations

COOKIE = "crucible_session"
TTL_S = 12 * 3600


class Role(StrEnum):
    ADMIN = "admin"
    READER = "reader"


@dataclass(frozen=True)
class Session:
    role: Role
    nonce: str
    expires: int = 0  # epoch seconds

    @property
    def can_write(self) -> bool:
        return self.role is Role.ADMIN


class MemoryRevocations:
    """``SessionRevocations`` in this process's memory, for a dashboard without a shared store."""

    def __init__(self) -> None:
        self._revoked: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def revoke_session(self, nonce_hash: str, expires_at: datetime) -> None:
        if expires_at.tzinfo is None:
            raise ValueError("expires_at must be timezone-aware")
        now = datetime.now(UTC)
        with self._lock:
            self._revoked = {n: e for n, e in self._revoked.items() if e >= now}  # drop what expired
            self._revoked[nonce_hash] = expires_at

    def session_revoked(self, nonce_hash: str) -> bool:
        with self._lock:
            return nonce_hash in self._revoked


def nonce_hash(nonce: str) -> str:
    """What a revocation records of a session: the nonce's sha256 (the cookie stays out of the
    database)."""
    return hashlib.sha256(nonce.encode()).hexdigest()


class Sessions:
    """Issues and checks session cookies and CSRF tokens for ``tokens``; logouts go to
    ``revocations`` (module docstring)."""

    def __init__(
        self,
        tokens: ApiTokens,
        *,
        revocations: SessionRevocations | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.tokens = tokens
        material = f"{tokens.admin}\0{tokens.readonly or ''}".encode()
        self._key = hmac.new(material, b"crucible dashboard session v1", hashlib.sha256).digest()
        self._clock = clock
        self._revocations: SessionRevocations = revocations or MemoryRevocations()

    def _sign(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    def role_of(self, token: str) -> Role | None:
        """The role a login token grants (constant-time comparisons), None for a wrong token."""
        given = token.strip().encode()
        if hmac.compare_digest(given, self.tokens.admin.encode()):
            return Role.ADMIN
        if self.tokens.readonly and hmac.compare_digest(given, self.tokens.readonly.encode()):
            return Role.READER
        return None

    def issue(self, role: Role) -> str:
        """A cookie value for a new session of ``role``."""
        body = f"{role.value}.{int(self._clock()) + TTL_S}.{secrets.token_hex(16)}"
        return f"{body}.{self._sign(body)}"

    def check(self, cookie: str | None) -> Session | None:
        """The session a cookie proves, or None (missing, tampered, expired, unknown role)."""
        if not cookie or cookie.count(".") != 3:
            return None
        body, _, signature = cookie.rpartition(".")
        if not hmac.compare_digest(signature, self._sign(body)):
            return None
        role, expires, nonce = body.split(".")
        if not expires.isdigit() or int(expires) < self._clock() or role not in Role.__members__.values():
            return None
        if self._revocations.session_revoked(nonce_hash(nonce)):
            return None
        return Session(Role(role), nonce, int(expires))

    def revoke(self, session: Session) -> None:
        """End ``session`` for good (logout): its cookie is refused from now on, wherever it is."""
        expires = datetime.fromtimestamp(session.expires, UTC)
        # ConflictError: a logout of the same session on another replica at the same moment.
        with contextlib.suppress(ConflictError):
            self._revocations.revoke_session(nonce_hash(session.nonce), expires)

    def csrf(self, session: Session) -> str:
        return self._sign(f"csrf.{session.nonce}")

    def csrf_ok(self, session: Session, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.csrf(session).encode())

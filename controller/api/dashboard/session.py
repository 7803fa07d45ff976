"""Dashboard sessions: log in once with an API token, then a signed cookie, plus a CSRF token for forms.

A browser cannot send a bearer header on a link or an ``EventSource``, so the dashboard trades the token
for a session cookie (HttpOnly, SameSite=Strict, Secure over https). The cookie is stateless: ``role``,
expiry and a nonce, signed with HMAC-SHA256 under a key derived from *both* configured tokens, so a
reader cannot forge an admin session, no session table is needed, and rotating either token logs
everybody out. The CSRF token of a form is the HMAC of the session's nonce: a page from another origin
can neither read it nor guess it, and SameSite=Strict already keeps the cookie off cross-site posts.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from controller.api.auth import ApiTokens

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


class Sessions:
    """Issues and checks session cookies and CSRF tokens for ``tokens``."""

    def __init__(self, tokens: ApiTokens, *, clock: Callable[[], float] = time.time) -> None:
        self.tokens = tokens
        material = f"{tokens.admin}\0{tokens.readonly or ''}".encode()
        self._key = hmac.new(material, b"crucible dashboard session v1", hashlib.sha256).digest()
        self._clock = clock
        # Logged-out sessions' nonces until their cookies would have expired anyway: logout ends the
        # session here, not only in the browser that held the cookie (a copied cookie dies too).
        self._revoked: dict[str, int] = {}
        self._lock = threading.Lock()

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
        with self._lock:
            if nonce in self._revoked:
                return None
        return Session(Role(role), nonce, int(expires))

    def revoke(self, session: Session) -> None:
        """End ``session`` for good (logout): its cookie is refused from now on, wherever it is."""
        now = self._clock()
        with self._lock:
            self._revoked = {n: e for n, e in self._revoked.items() if e >= now}  # drop what expired
            self._revoked[session.nonce] = session.expires

    def csrf(self, session: Session) -> str:
        return self._sign(f"csrf.{session.nonce}")

    def csrf_ok(self, session: Session, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.csrf(session).encode())

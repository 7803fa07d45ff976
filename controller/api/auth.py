"""Bearer tokens for the operator API: ``CRUCIBLE_API_TOKEN`` may do everything,
``CRUCIBLE_API_READONLY_TOKEN`` only read (GET/HEAD).

Tokens are compared in constant time (``hmac.compare_digest`` on bytes), so the answer's timing
tells nothing about how much of a guess was right. 401 without a valid token (with
``WWW-Authenticate: Bearer``), 403 for the read-only token on a write.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from enum import StrEnum

from fastapi import HTTPException, Request

READ_METHODS = frozenset({"GET", "HEAD"})


class Role(StrEnum):
    """What a valid token may do: everything, or only read."""

    ADMIN = "admin"
    READER = "reader"


@dataclass(frozen=True)
class ApiTokens:
    """The configured tokens; an empty ``readonly`` disables read-only access."""

    admin: str
    readonly: str | None = None

    def __post_init__(self) -> None:
        if not self.admin:
            raise ValueError("CRUCIBLE_API_TOKEN: an API token is required")


def _equal(given: bytes, expected: str | None) -> bool:
    return bool(expected) and hmac.compare_digest(given, expected.encode())  # type: ignore[union-attr]


def bearer_role(tokens: ApiTokens, authorization: str) -> Role | None:
    """Who the ``Authorization`` header's bearer token is (None: no valid token)."""
    scheme, _, value = authorization.partition(" ")
    given = value.strip().encode() if scheme.lower() == "bearer" else b""
    if _equal(given, tokens.admin):
        return Role.ADMIN
    return Role.READER if _equal(given, tokens.readonly) else None


class BearerAuth:
    """A FastAPI dependency checking the request's bearer token against ``tokens``.

    ``async`` although it awaits nothing: FastAPI runs a plain ``def`` dependency in its thread pool,
    a hop to another thread and back for every request, for a check that never blocks."""

    def __init__(self, tokens: ApiTokens) -> None:
        self.tokens = tokens

    async def __call__(self, request: Request) -> None:
        role = bearer_role(self.tokens, request.headers.get("authorization", ""))
        if role is None:
            raise HTTPException(
                status_code=401,
                detail="missing or invalid bearer token",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if role is Role.READER and request.method not in READ_METHODS:
            raise HTTPException(status_code=403, detail="the read-only token may not change anything")

"""Errors to HTTP, in this one place (CONTRIBUTING.md, rule 6): the routes raise crucible's own errors.

Every error answer is ``{"detail": message, "kind": …}``, plus ``"key"`` (the dotted field) for 422,
so a client (``cli/remote.py``) can turn it back into the same error, and a person can read it.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from controller.domain.errors import (
    ConfirmingError,
    ConflictError,
    CrucibleError,
    ForbiddenError,
    NotFoundError,
    RefusedError,
    RetryLaterError,
    SchemaOutdatedError,
    SpecError,
    UnauthenticatedError,
    UnconfirmedError,
)

RETRY_AFTER_S = 5

# Most specific first: the first class an error is an instance of decides.
STATUS_OF: tuple[tuple[type[CrucibleError], int, str], ...] = (
    (SpecError, 422, "spec"),
    (UnauthenticatedError, 401, "unauthenticated"),
    (UnconfirmedError, 403, "unconfirmed"),
    (ForbiddenError, 403, "forbidden"),
    (NotFoundError, 404, "not_found"),
    (RefusedError, 409, "refused"),
    (ConflictError, 409, "conflict"),
    (SchemaOutdatedError, 503, "schema_outdated"),
    (ConfirmingError, 503, "confirming"),
    (RetryLaterError, 503, "retry_later"),
)


def error_response(exc: CrucibleError) -> JSONResponse:
    status, kind = next(((st, k) for cls, st, k in STATUS_OF if isinstance(exc, cls)), (500, "error"))
    body: dict[str, object] = {"detail": str(exc), "kind": kind}
    if isinstance(exc, SpecError):
        body["key"] = exc.key
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return JSONResponse(body, status_code=status, headers=headers)


def _field(loc: tuple[int | str, ...]) -> str:
    """``("body", "spec")`` -> ``spec``; ``("query", "limit")`` -> ``limit``."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts) or "body"


def install(app: FastAPI) -> None:
    """Register the handlers: crucible errors by class, malformed requests as 422 naming the field."""

    async def crucible_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, CrucibleError)
        return error_response(exc)

    async def invalid_request(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = list(exc.errors())
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        key = _field(tuple(first.get("loc", ())))
        detail = f"{key}: {first.get('msg', 'invalid')}"
        return JSONResponse({"detail": detail, "kind": "invalid", "key": key}, status_code=422)

    app.add_exception_handler(CrucibleError, crucible_error)
    app.add_exception_handler(RequestValidationError, invalid_request)

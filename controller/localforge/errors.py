"""Errors the forge's operations raise, one per GitHub error status.

The service layer raises these; ``httpkit`` maps them to GitHub-shaped JSON bodies in one place.
"""

from __future__ import annotations

from typing import Any

DOCS = "https://docs.github.com/rest"


class ForgeError(Exception):
    """Root of the forge's deliberate errors; ``status`` is the HTTP status GitHub would answer."""

    status = 500

    def __init__(self, message: str, *, errors: list[Any] | None = None, doc: str = DOCS) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors
        self.doc = doc

    def body(self) -> dict[str, Any]:
        """The JSON body GitHub sends for this error."""
        out: dict[str, Any] = {"message": self.message}
        if self.errors is not None:
            out["errors"] = self.errors
        out["documentation_url"] = self.doc
        out["status"] = str(self.status)
        return out


class Unauthorized(ForgeError):
    """Missing or wrong credentials where they are required."""

    status = 401


class Forbidden(ForgeError):
    """Authenticated, but not allowed to do this."""

    status = 403


class NotFound(ForgeError):
    """The object does not exist or the caller may not see it (GitHub answers 404 for both)."""

    status = 404

    def __init__(self, message: str = "Not Found") -> None:
        super().__init__(message)


class Conflict(ForgeError):
    """The request contradicts the repository state (e.g. an empty repository)."""

    status = 409


class Invalid(ForgeError):
    """GitHub's 422 ``Validation Failed`` with its ``errors`` list."""

    status = 422

    def __init__(self, errors: list[Any] | None = None, message: str = "Validation Failed") -> None:
        super().__init__(message, errors=errors or [])

    def body(self) -> dict[str, Any]:
        # GitHub's validation-error body has no "status" member.
        return {"message": self.message, "errors": self.errors, "documentation_url": self.doc}


def invalid_field(resource: str, field: str, code: str = "invalid") -> Invalid:
    """A 422 for one bad or missing field, e.g. ``{"resource": "PullRequest", "field": "head", ...}``."""
    return Invalid([{"resource": resource, "field": field, "code": code}])


def invalid_custom(resource: str, message: str, field: str | None = None) -> Invalid:
    """A 422 with a ``custom`` error carrying a human message, as GitHub sends for duplicates."""
    err: dict[str, Any] = {"resource": resource, "code": "custom", "message": message}
    if field is not None:
        err["field"] = field
    return Invalid([err])


def unprocessable(message: str) -> Invalid:
    """GitHub's other 422 form, whose ``errors`` are plain strings, e.g. for approving one's own PR:
    ``{"message": "Unprocessable Entity", "errors": ["Can not approve your own pull request"]}``."""
    return Invalid([message], message="Unprocessable Entity")


class BadRequest(ForgeError):
    """A body that is not a JSON object (GitHub: ``Problems parsing JSON``)."""

    status = 400

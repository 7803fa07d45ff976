"""Database errors become domain errors here, in one place (CONTRIBUTING.md, rules 6 and 8).

No caller of the store ever imports SQLAlchemy to handle its exceptions.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc as sa_exc

from controller.domain.errors import ConflictError, RetryLaterError, SchemaOutdatedError
from controller.store import migrate


@contextmanager
def translate_errors() -> Iterator[None]:
    """Turn SQLAlchemy errors into domain errors, so no caller ever needs to import SQLAlchemy."""
    try:
        yield
    except sa_exc.IntegrityError as exc:
        raise ConflictError(f"conflicts with the stored state: {exc.orig}") from exc
    except (sa_exc.OperationalError, sa_exc.ProgrammingError) as exc:
        message = str(exc.orig)
        if "no such table" in message or getattr(exc.orig, "sqlstate", None) == "42P01":
            raise SchemaOutdatedError(f"the database has no crucible schema; {migrate.UPGRADE_HINT}") from exc
        if isinstance(exc, sa_exc.OperationalError):
            raise RetryLaterError(f"database busy or unreachable: {message}") from exc
        raise
    except sa_exc.TimeoutError as exc:
        # No pooled connection came free in time: as transient as a busy database.
        raise RetryLaterError(f"database busy: no free connection in the pool ({exc})") from exc
    except sa_exc.StatementError as exc:
        # A value the driver or the JSON serialiser refused (NaN in a payload, a naive datetime).
        if isinstance(exc.orig, ValueError | TypeError):
            raise ValueError(str(exc.orig)) from exc
        raise

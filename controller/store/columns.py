"""What every table of the store is built from: the declarative base with its naming convention, the
UTC timestamp type, CHECK constraints from enums, the foreign key to a run, and cheap enum lookups.

Split from ``models.py`` so the tables can live in more than one module (``models.py``: a run's own
record; ``publishing_models.py``: pull requests, webhook deliveries and feedback) over one metadata.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from enum import StrEnum
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend (SQLite stores naive text, PostgreSQL timestamptz)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the store only takes timezone-aware times")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


def as_utc(value: datetime) -> datetime:
    """A stored timestamp as an aware UTC datetime (SQLite gives naive text, PostgreSQL its session zone)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def in_check(column: str, enum: type[StrEnum]) -> sa.CheckConstraint:
    """CHECK ``column IN ('a', 'b', ...)`` from an enum, so the values cannot drift from it.

    A NULL passes a CHECK (its IN is unknown, not false), so nullable columns need no extra clause.
    """
    values = ", ".join(f"'{member.value}'" for member in enum)
    return sa.CheckConstraint(f"{column} IN ({values})", name=column)


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


_E = TypeVar("_E", bound=StrEnum)


@functools.cache
def _members(enum: type[_E]) -> dict[str, _E]:
    return {member.value: member for member in enum}


def enum_member(enum: type[_E], value: str) -> _E:
    """``enum(value)`` at a dictionary lookup's cost (rows are converted by the thousand on the API's
    pages; ``Enum.__call__`` was a tenth of a page's CPU). An unknown value still raises ValueError."""
    member = _members(enum).get(value)
    return member if member is not None else enum(value)


def optional_enum_member(enum: type[_E], value: str | None) -> _E | None:
    return None if value is None else enum_member(enum, value)


def run_fk() -> sa.ForeignKey:
    return sa.ForeignKey("runs.id", ondelete="CASCADE")

"""The store layer (docs/architecture.md): the only code that talks to the database.

Everything above it sees ``Store`` and the frozen records below, never SQLAlchemy or Alembic.
Every name here is imported on first use: ``Store`` costs SQLAlchemy and the records pydantic, and
``listing`` (``crucible runs list`` on an up-to-date SQLite file) may cost neither (ADR-0013).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.store.records import (
        ChampionUpdate,
        ComponentRecord,
        DeliveryRecord,
        EventRecord,
        FeedbackFields,
        FeedbackRecord,
        FeedbackSource,
        FeedbackVerdict,
        HypothesisRecord,
        HypothesisReport,
        NewDelivery,
        NewRun,
        PullRecord,
        RunRecord,
        SampleRecord,
        TurnCounts,
        TurnDecision,
        TurnRecord,
        TurnSnapshot,
    )
    from controller.store.store import Store

__all__ = [
    "ChampionUpdate",
    "ComponentRecord",
    "DeliveryRecord",
    "EventRecord",
    "FeedbackFields",
    "FeedbackRecord",
    "FeedbackSource",
    "FeedbackVerdict",
    "HypothesisRecord",
    "HypothesisReport",
    "NewDelivery",
    "NewRun",
    "PullRecord",
    "RunRecord",
    "SampleRecord",
    "Store",
    "TurnCounts",
    "TurnDecision",
    "TurnRecord",
    "TurnSnapshot",
]


def __getattr__(name: str) -> object:
    if name == "Store":
        from controller.store.store import Store

        return Store
    if name in __all__:
        from controller.store import records

        return getattr(records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

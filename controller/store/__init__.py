"""The store layer (DESIGN.md sections 6 and 9): the only code that talks to the database.

Everything above it sees ``Store`` and the frozen records below, never SQLAlchemy or Alembic.
"""

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

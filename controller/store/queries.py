"""Row-level steps the ``Store`` methods compose, each inside the caller's session.

Lookups raise NotFoundError, the run lock serialises writers per run, and row builders validate
what the database cannot (finite numbers, no values on an invalid sample). Kept apart from
``store.py`` so the Store reads as its contract: one method, one transaction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from controller.domain.enums import EventKind, SampleArm, TurnPhase
from controller.domain.errors import NotFoundError
from controller.store.models import ComponentRow, EventRow, RunRow, SampleRow, TurnRow
from controller.store.records import ComponentRecord, Sample, TurnCounts, TurnDecision, TurnRecord


def require_finite(name: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")


def get_run_row(s: Session, run_id: str) -> RunRow:
    row = s.get(RunRow, run_id)
    if row is None:
        raise NotFoundError(f"no run {run_id}")
    return row


def lock_run(s: Session, run_id: str) -> RunRow:
    """The run row, locked for this transaction (FOR NO KEY UPDATE: inserts referencing it still run)."""
    query = sa.select(RunRow).where(RunRow.id == run_id).with_for_update(key_share=True)
    row = s.scalars(query.execution_options(populate_existing=True)).one_or_none()
    if row is None:
        raise NotFoundError(f"no run {run_id}")
    return row


def get_component_row(s: Session, run_id: str, name: str) -> ComponentRow:
    row = s.get(ComponentRow, (run_id, name))
    if row is None:
        raise NotFoundError(f"run {run_id} has no component {name!r}")
    return row


def get_turn_row(s: Session, run_id: str, number: int, *, fresh: bool = False) -> TurnRow:
    row = s.get(TurnRow, (run_id, number), populate_existing=fresh)
    if row is None:
        raise NotFoundError(f"run {run_id} has no turn {number}")
    return row


def new_turn_row(run_id: str, number: int, round: int, now: datetime) -> TurnRow:
    return TurnRow(
        run_id=run_id,
        number=number,
        round=round,
        phase=TurnPhase.STARTED.value,
        started_at=now,
        changed_paths=[],
        commits={},
        cost_usd=0.0,
        tokens=0,
        duration_s=0.0,
        detail="",
    )


def decision_values(decision: TurnDecision) -> dict[str, object]:
    return {
        "phase": TurnPhase.DECIDED.value,
        "outcome": decision.outcome.value,
        "reason": decision.reason.value,
        "value": decision.value,
        "p_value": decision.p_value,
        "hypothesis": decision.hypothesis,
        "changed_paths": list(decision.changed_paths),
        "commits": dict(decision.commits),
        "cost_usd": decision.cost_usd,
        "tokens": decision.tokens,
        "duration_s": decision.duration_s,
        "detail": decision.detail,
        "pairs": decision.pairs,
        "sequential_stop": decision.sequential_stop.value if decision.sequential_stop else None,
    }


def delete_samples(s: Session, run_id: str, turn: int) -> None:
    s.execute(sa.delete(SampleRow).where(SampleRow.run_id == run_id, SampleRow.turn == turn))


def sample_row(run_id: str, turn: int, sample: Sample) -> SampleRow:
    arm, index, values, valid = sample
    if not valid and values:
        raise ValueError(f"sample {arm} {index} of turn {turn} is invalid yet carries values")
    clean = {str(name): float(value) for name, value in values.items()}
    for name, value in clean.items():
        require_finite(f"sample value {name}", value)
    return SampleRow(
        run_id=run_id, turn=turn, arm=SampleArm(arm).value, sample_index=index, values=clean, valid=valid
    )


def append_event_row(
    s: Session, run_id: str, kind: EventKind, payload: Mapping[str, Any], now: datetime
) -> EventRow:
    row = EventRow(run_id=run_id, kind=EventKind(kind).value, payload=dict(payload), created_at=now)
    s.add(row)
    s.flush()
    return row


def component_row(rec: ComponentRecord, position: int) -> ComponentRow:
    return ComponentRow(
        run_id=rec.run_id,
        name=rec.name,
        position=position,
        repo=rec.repo,
        base_ref=rec.base_ref,
        base_sha=rec.base_sha,
        head_sha=rec.head_sha,
        user_head=rec.user_head,
        user_state=rec.user_state,
        upstream=rec.upstream,
        extra=dict(rec.extra),
    )


def list_turn_records(s: Session, run_id: str, last: int | None) -> list[TurnRecord]:
    """The run's turns by number, or only the ``last`` ones (still ascending)."""
    query = sa.select(TurnRow).where(TurnRow.run_id == run_id)
    if last is None:
        return [row.to_record() for row in s.scalars(query.order_by(TurnRow.number))]
    rows = [row.to_record() for row in s.scalars(query.order_by(TurnRow.number.desc()).limit(last))]
    return rows[::-1]


def count_turns(s: Session, run_id: str) -> TurnCounts:
    """Decided turns per round, the highest number and the turns still STARTED (two queries)."""
    decided: dict[int, int] = {}
    highest = 0
    grouped = (
        sa.select(TurnRow.round, TurnRow.phase, sa.func.count(), sa.func.max(TurnRow.number))
        .where(TurnRow.run_id == run_id)
        .group_by(TurnRow.round, TurnRow.phase)
    )
    for round_number, phase, count, top in s.execute(grouped):
        highest = max(highest, int(top))
        if phase == TurnPhase.DECIDED:
            decided[int(round_number)] = int(count)
    open_turns = sa.select(TurnRow.number).where(
        TurnRow.run_id == run_id, TurnRow.phase == TurnPhase.STARTED.value
    )
    started = sorted(int(n) for n in s.scalars(open_turns))
    return TurnCounts(decided=decided, highest=highest, started=tuple(started))

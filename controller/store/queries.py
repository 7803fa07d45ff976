"""Row-level steps the ``Store`` methods compose, each inside the caller's session.

Lookups raise NotFoundError, the run lock serialises writers per run, and row builders validate
what the database cannot (finite numbers, no values on an invalid sample). Kept apart from
``store.py`` so the Store reads as its contract: one method, one transaction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.orm import Session

from controller.domain.enums import EventKind, SampleArm, TurnPhase
from controller.domain.errors import NotFoundError
from controller.store.models import (
    ComponentRow,
    EventRow,
    RunRow,
    SampleRow,
    TurnRow,
    run_record,
    sample_record,
    turn_record,
)
from controller.store.records import (
    ComponentRecord,
    EventRecord,
    RunRecord,
    Sample,
    SampleRecord,
    TurnCounts,
    TurnDecision,
    TurnRecord,
)


def require_finite(name: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")


def get_run_row(s: Session, run_id: str) -> RunRow:
    row = s.get(RunRow, run_id)
    if row is None:
        raise NotFoundError(f"no run {run_id}")
    return row


def read_run(s: Session | Connection, run_id: str) -> RunRecord:
    """The run's record from a Core row (``get_run_row`` without the identity map, for a read)."""
    row = s.execute(_READ_RUN, {"run_id": run_id}).one_or_none()
    if row is None:
        raise NotFoundError(f"no run {run_id}")
    return run_record(row)


def lock_run(s: Session, run_id: str) -> RunRow:
    """The run row, locked for this transaction (FOR NO KEY UPDATE: inserts referencing it still run)."""
    query = sa.select(RunRow).where(RunRow.id == run_id).with_for_update(key_share=True)
    row = s.scalars(query.execution_options(populate_existing=True)).one_or_none()
    if row is None:
        raise NotFoundError(f"no run {run_id}")
    return row


# The turn path's statements, built once: SQLAlchemy reuses a statement object's cache key and
# compiled form, where one built per call is coerced and keyed again each time (bench/scheduler.py).
# Tables, not mapped classes: through a session, a statement on a mapped class takes the ORM's path.
_RUNS, _TURNS, _EVENTS, _SAMPLES, _COMPONENTS = (
    cast(sa.Table, row.__table__) for row in (RunRow, TurnRow, EventRow, SampleRow, ComponentRow)
)
_LOCK_RUN_ID = (
    sa.select(_RUNS.c.id).where(_RUNS.c.id == sa.bindparam("run_id")).with_for_update(key_share=True)
)
_READ_RUN = sa.select(_RUNS).where(_RUNS.c.id == sa.bindparam("run_id"))
_READ_RUN_ID = sa.select(_RUNS.c.id).where(_RUNS.c.id == sa.bindparam("run_id"))
_INSERT_EVENT = sa.insert(_EVENTS)
_INSERT_SAMPLES = sa.insert(_SAMPLES)
_SET_HEAD = (
    sa.update(_COMPONENTS)
    .where(_COMPONENTS.c.run_id == sa.bindparam("of_run"), _COMPONENTS.c.name == sa.bindparam("component"))
    .values(head_sha=sa.bindparam("sha"))
)
_GET_TURN = sa.select(_TURNS).where(
    _TURNS.c.run_id == sa.bindparam("run_id"), _TURNS.c.number == sa.bindparam("number")
)
# A turn's start: inserted unless it exists (a resumed turn's), one statement where a read came first;
# the PRIMARY KEY (run_id, number) is the conflict, per dialect (the clause is not standard SQL).
# RETURNING says whether a row went in: psycopg's rowcount reads -1 for an INSERT through SQLAlchemy.
_INSERT_NEW_TURN = {
    name: insert(_TURNS)
    .on_conflict_do_nothing(index_elements=["run_id", "number"])
    .returning(_TURNS.c.number)
    for name, insert in (("sqlite", sqlite_insert), ("postgresql", postgresql_insert))
}
# A decision: the SET clause is the parameters' column names (``decision_values`` and ``decided_at``),
# the WHERE clause's names are not columns'.
# It returns the decided row (SQLite >= 3.35 and PostgreSQL both have RETURNING): no read after it.
_DECIDE_TURN = (
    sa.update(_TURNS)
    .where(
        _TURNS.c.run_id == sa.bindparam("of_run"),
        _TURNS.c.number == sa.bindparam("of_number"),
        _TURNS.c.phase == TurnPhase.STARTED.value,
    )
    .returning(*_TURNS.c)
)
_ADD_TO_RUN = (
    sa.update(_RUNS)
    .where(_RUNS.c.id == sa.bindparam("of_run"))
    .values(
        cost_usd=_RUNS.c.cost_usd + sa.bindparam("add_cost", type_=sa.Double),
        tokens=_RUNS.c.tokens + sa.bindparam("add_tokens", type_=sa.BigInteger),
    )
)
_ALL_TURNS = sa.select(_TURNS).where(_TURNS.c.run_id == sa.bindparam("run_id")).order_by(_TURNS.c.number)
_LAST_TURNS = (
    sa.select(_TURNS)
    .where(_TURNS.c.run_id == sa.bindparam("run_id"))
    .order_by(_TURNS.c.number.desc())
    .limit(sa.bindparam("last", type_=sa.Integer))
)
# ``count_turns``'s one statement: the counts per round and phase, and (marked ``open``) the number of
# each STARTED turn.
_COUNT_TURNS = sa.union_all(
    sa.select(
        sa.literal(False).label("open"),
        _TURNS.c.round,
        _TURNS.c.phase,
        sa.func.count(),
        sa.func.max(_TURNS.c.number),
    )
    .where(_TURNS.c.run_id == sa.bindparam("run_id"))
    .group_by(_TURNS.c.round, _TURNS.c.phase),
    sa.select(sa.literal(True), _TURNS.c.round, _TURNS.c.phase, sa.literal(1), _TURNS.c.number).where(
        _TURNS.c.run_id == sa.bindparam("run_id"), _TURNS.c.phase == TurnPhase.STARTED.value
    ),
)


def run_exists(db: Connection, run_id: str) -> bool:
    return db.execute(_READ_RUN_ID, {"run_id": run_id}).first() is not None


def lock_run_id(db: Session | Connection, run_id: str) -> None:
    """``lock_run`` for a writer that needs the lock, not the row: no ORM object is loaded."""
    if db.execute(_LOCK_RUN_ID, {"run_id": run_id}).one_or_none() is None:
        raise NotFoundError(f"no run {run_id}")


def insert_event(
    db: Session | Connection, run_id: str, kind: EventKind, payload: Mapping[str, Any], now: datetime
) -> EventRecord:
    """``append_event_row`` without the ORM's unit of work (the caller holds the run's lock)."""
    value, body = EventKind(kind).value, dict(payload)
    done = db.execute(_INSERT_EVENT, {"run_id": run_id, "kind": value, "payload": body, "created_at": now})
    (event_id,) = cast(CursorResult[Any], done).inserted_primary_key or (None,)
    if event_id is None:
        raise RuntimeError("the database returned no id for the event")
    return EventRecord(id=int(event_id), run_id=run_id, kind=EventKind(value), payload=body, created_at=now)


def insert_events(
    db: Session | Connection,
    run_id: str,
    events: Sequence[tuple[EventKind, Mapping[str, Any]]],
    now: datetime,
) -> None:
    """``events`` in their order, in one executemany (ids are not needed back; the caller holds the
    run's lock, so they are given in this order)."""
    if events:
        rows = [
            {"run_id": run_id, "kind": EventKind(kind).value, "payload": dict(payload), "created_at": now}
            for kind, payload in events
        ]
        db.execute(_INSERT_EVENT, rows)


def insert_samples(db: Session | Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Rows of ``sample_values`` (validated already), in one executemany, in their order."""
    if rows:
        db.execute(_INSERT_SAMPLES, list(rows))


def set_component_head(db: Session | Connection, run_id: str, name: str, head_sha: str) -> None:
    done = db.execute(_SET_HEAD, {"of_run": run_id, "component": name, "sha": head_sha})
    if cast(CursorResult[Any], done).rowcount != 1:
        raise NotFoundError(f"run {run_id} has no component {name!r}")


def find_turn(db: Session | Connection, run_id: str, number: int) -> TurnRecord | None:
    """The turn as stored now (Core: nothing cached in a session), None for a turn that does not exist."""
    row = db.execute(_GET_TURN, {"run_id": run_id, "number": number}).one_or_none()
    return None if row is None else turn_record(row)


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


def insert_new_turn(db: Connection, run_id: str, number: int, round: int, now: datetime) -> TurnRecord | None:
    """Turn ``number`` inserted as STARTED with one Core statement, and its record (no ORM unit of
    work: this runs once per turn of every served run); None, and nothing written, when the run has a
    turn ``number`` already."""
    done = db.execute(
        _INSERT_NEW_TURN[db.dialect.name],
        {
            "run_id": run_id,
            "number": number,
            "round": round,
            "phase": TurnPhase.STARTED.value,
            "started_at": now,
            "changed_paths": [],
            "commits": {},
            "cost_usd": 0.0,
            "tokens": 0,
            "duration_s": 0.0,
            "detail": "",
        },
    )
    if done.first() is None:
        return None
    return TurnRecord(
        run_id=run_id,
        number=number,
        round=round,
        phase=TurnPhase.STARTED,
        started_at=now,
        decided_at=None,
        outcome=None,
        reason=None,
        value=None,
        p_value=None,
        hypothesis=None,
        changed_paths=(),
        commits={},
        cost_usd=0.0,
        tokens=0,
        duration_s=0.0,
        detail="",
    )


def decide_turn_row(
    db: Session | Connection, run_id: str, number: int, decision: TurnDecision, now: datetime
) -> TurnRecord | None:
    """Move a STARTED turn to DECIDED with ``decision`` and return it as stored; None when no STARTED
    turn ``number`` exists."""
    values = {**decision_values(decision), "decided_at": now, "of_run": run_id, "of_number": number}
    row = db.execute(_DECIDE_TURN, values).one_or_none()
    return None if row is None else turn_record(row)


def add_to_run(
    db: Session | Connection,
    run_id: str,
    *,
    cost_usd: float,
    tokens: int,
    now: datetime,
    champion: tuple[float, int] | None,
) -> None:
    """Add a turn's cost and tokens to its run's (in SQL) and set the champion (value, turn) when
    given. The UPDATE locks the run's row as ``lock_run_id`` does (FOR NO KEY UPDATE on PostgreSQL), so
    it may stand in for it as a transaction's first statement; NotFoundError for no such run."""
    values: dict[str, object] = {"of_run": run_id, "add_cost": cost_usd, "add_tokens": tokens}
    values["updated_at"] = now
    if champion is not None:
        values.update(champion_value=champion[0], champion_turn=champion[1])
    if cast(CursorResult[Any], db.execute(_ADD_TO_RUN, values)).rowcount != 1:
        raise NotFoundError(f"no run {run_id}")


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


def delete_samples(s: Session | Connection, run_id: str, turn: int) -> None:
    s.execute(sa.delete(SampleRow).where(SampleRow.run_id == run_id, SampleRow.turn == turn))


def sample_row(run_id: str, turn: int, sample: Sample) -> SampleRow:
    return SampleRow(**sample_values(run_id, turn, sample))


def sample_values(run_id: str, turn: int, sample: Sample) -> dict[str, object]:
    """A sample's column values, validated: finite values, none on an invalid sample (ValueError)."""
    arm, index, values, valid = sample
    if not valid and values:
        raise ValueError(f"sample {arm} {index} of turn {turn} is invalid yet carries values")
    clean = {str(name): float(value) for name, value in values.items()}
    for name, value in clean.items():
        require_finite(f"sample value {name}", value)
    return {
        "run_id": run_id,
        "turn": turn,
        "arm": SampleArm(arm).value,
        "sample_index": index,
        "values": clean,
        "valid": valid,
    }


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


def list_turn_records(s: Session | Connection, run_id: str, last: int | None) -> list[TurnRecord]:
    """The run's turns by number, or only the ``last`` ones (still ascending). Core rows, not ORM
    objects: the run page reads all of a run's turns, and an identity map of 500 rows cost more than
    the query (bench/dashboard.py)."""
    if last is None:
        return [turn_record(row) for row in s.execute(_ALL_TURNS, {"run_id": run_id}).all()]
    rows = [turn_record(row) for row in s.execute(_LAST_TURNS, {"run_id": run_id, "last": last}).all()]
    return rows[::-1]


def list_sample_records(s: Session, run_id: str, turn: int | None) -> list[SampleRecord]:
    """Samples of the run (of ``turn`` only when given) by turn, then in the order they were added;
    Core rows, like ``list_turn_records``."""
    query = sa.select(_SAMPLES).where(_SAMPLES.c.run_id == run_id)
    if turn is not None:
        query = query.where(_SAMPLES.c.turn == turn)
    return [sample_record(row) for row in s.execute(query.order_by(_SAMPLES.c.turn, _SAMPLES.c.id)).all()]


def count_turns(s: Session | Connection, run_id: str) -> TurnCounts:
    """Decided turns per round, the highest number and the turns still STARTED, in one statement:
    the counts per round and phase, and (marked ``open``) the number of each STARTED turn, which
    are few (one, or N for a parallel turn cut off), so the read stays bounded however long the run."""
    decided: dict[int, int] = {}
    highest = 0
    started: list[int] = []
    for is_open, round_number, phase, count, top in s.execute(_COUNT_TURNS, {"run_id": run_id}):
        if is_open:
            started.append(int(top))
            continue
        highest = max(highest, int(top))
        if phase == TurnPhase.DECIDED:
            decided[int(round_number)] = int(count)
    return TurnCounts(decided=decided, highest=highest, started=tuple(sorted(started)))

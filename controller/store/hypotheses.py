"""The rows of parallel hypotheses (ADR-0016): reported one by one, finalised with their turn's decision.

With ``broker.parallel = N`` each hypothesis of a turn may run in its own pod, so each is reported on
its own (``report``) and the controller decides the turn once all N are in, writing the final reason of
every hypothesis in the turn's decision transaction (``finalise``). Session-level functions, called by
``Store`` inside its transactions.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from controller.domain.enums import OUTCOME_OF_REASON, Reason, TurnPhase
from controller.domain.errors import ConflictError
from controller.store.models import HypothesisRow
from controller.store.queries import get_turn_row, require_finite, sample_row
from controller.store.records import HypothesisRecord, HypothesisReport


def report(s: Session, run_id: str, turn: int, rep: HypothesisReport, now: datetime) -> HypothesisRecord:
    """Store one hypothesis of a STARTED turn. ConflictError if the turn is decided or the index was
    reported already; ValueError for a non-finite number (nothing written)."""
    for name in ("value", "reference_value", "delta", "p_value", "cost_usd", "duration_s"):
        require_finite(name, getattr(rep, name))
    rows = [sample_row(run_id, turn, sample) for sample in rep.samples]  # validates the samples
    if get_turn_row(s, run_id, turn).phase == TurnPhase.DECIDED:
        raise ConflictError(f"turn {turn} of run {run_id} is decided; its hypotheses are final")
    if s.get(HypothesisRow, (run_id, turn, rep.index)) is not None:
        raise ConflictError(f"hypothesis {rep.index} of turn {turn} of run {run_id} is already reported")
    row = HypothesisRow(
        run_id=run_id,
        turn=turn,
        idx=rep.index,
        phase=TurnPhase.STARTED.value,
        outcome=OUTCOME_OF_REASON[rep.reason].value,
        reason=rep.reason.value,
        value=rep.value,
        reference_value=rep.reference_value,
        delta=rep.delta,
        p_value=rep.p_value,
        hypothesis=rep.hypothesis,
        proposal=None if rep.proposal is None else dict(rep.proposal),
        changed_paths=list(rep.changed_paths),
        commits=dict(rep.commits),
        samples=[[r.arm, r.sample_index, r.values, r.valid] for r in rows],
        cost_usd=rep.cost_usd,
        tokens=rep.tokens,
        duration_s=rep.duration_s,
        detail=rep.detail,
        reported_at=now,
    )
    s.add(row)
    s.flush()
    return row.to_record()


def listed(s: Session, run_id: str, turn: int | None) -> list[HypothesisRecord]:
    query = sa.select(HypothesisRow).where(HypothesisRow.run_id == run_id)
    if turn is not None:
        query = query.where(HypothesisRow.turn == turn)
    return [row.to_record() for row in s.scalars(query.order_by(HypothesisRow.turn, HypothesisRow.idx))]


_ROWS = cast(sa.Table, HypothesisRow.__table__)
_FINALISE = (
    sa.update(_ROWS)
    .where(
        _ROWS.c.run_id == sa.bindparam("of_run"),
        _ROWS.c.turn == sa.bindparam("of_turn"),
        _ROWS.c.idx == sa.bindparam("of_idx"),
    )
    .values(phase=TurnPhase.DECIDED.value)  # and the reason, outcome and detail given (column names)
)


def finalise(
    db: Session | Connection, run_id: str, turn: int, final: Mapping[int, tuple[Reason, str]]
) -> None:
    """Give every reported hypothesis of ``turn`` its final reason and detail. ConflictError unless
    ``final`` names exactly the reported indices (the controller decides once all have reported).
    Core statements: it runs inside the decision's transaction, which holds no session."""
    query = sa.select(_ROWS.c.idx).where(_ROWS.c.run_id == run_id, _ROWS.c.turn == turn)
    reported = {int(index) for index in db.execute(query).scalars()}
    if reported != set(final):
        raise ConflictError(
            f"turn {turn} of run {run_id}: decided hypotheses {sorted(final)} but reported {sorted(reported)}"
        )
    db.execute(
        _FINALISE,
        [
            {
                "of_run": run_id,
                "of_turn": turn,
                "of_idx": index,
                "reason": reason.value,
                "outcome": OUTCOME_OF_REASON[reason].value,
                "detail": detail,
            }
            for index, (reason, detail) in sorted(final.items())
        ],
    )


def delete(s: Session | Connection, run_id: str, turn: int) -> None:
    """Forget the hypotheses of a cut-off attempt of ``turn`` (it is run again from its start)."""
    s.execute(sa.delete(HypothesisRow).where(HypothesisRow.run_id == run_id, HypothesisRow.turn == turn))

"""The store's paged reads for pages and API routes (STYLE.md: ``limit`` and filters in SQL).

A run may hold tens of thousands of turns; an API page of them must cost the page, not the run. These
reads take a cursor (``after``), a ``limit`` and filters that become WHERE clauses, and return the
same frozen records as the rest of ``Store``. A mixin of ``Store``; its contract and session scope apply.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractContextManager

import sqlalchemy as sa
from sqlalchemy.orm import Session

from controller.domain.enums import EventKind, Outcome, RunStatus, TurnPhase
from controller.store.models import (
    DeliveryRow,
    EventRow,
    HypothesisRow,
    PullRequestRow,
    RunRow,
    SampleRow,
    TurnRow,
)
from controller.store.queries import get_run_row
from controller.store.records import (
    EventRecord,
    HypothesisRecord,
    RunRecord,
    RunTally,
    SampleRecord,
    TurnRecord,
)


class PagedReads:
    """``page_runs``, ``page_turns``, ``samples_of_turns`` and the counters ``/metrics`` reports;
    mixed into ``Store``."""

    def _session(self, *, read_only: bool = False) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def page_runs(
        self, *, limit: int = 50, offset: int = 0, status: RunStatus | None = None
    ) -> list[RunRecord]:
        """Runs newest first (created_at, then id), optionally of one ``status``."""
        query = sa.select(RunRow).order_by(RunRow.created_at.desc(), RunRow.id.desc())
        if status is not None:
            query = query.where(RunRow.status == status.value)
        with self._session(read_only=True) as s:
            return [row.to_record() for row in s.scalars(query.limit(limit).offset(offset))]

    def run_tallies(self, run_ids: Collection[str]) -> dict[str, RunTally]:
        """Decided turns, kept turns and pull requests of each given run, in two grouped queries (the
        runs list shows them for a page of runs without reading any run's turns)."""
        ids = sorted(set(run_ids))
        if not ids:
            return {}
        kept = sa.func.count().filter(TurnRow.outcome == Outcome.ACCEPTED.value)
        turns = (
            sa.select(TurnRow.run_id, sa.func.count(), kept)
            .where(TurnRow.run_id.in_(ids), TurnRow.phase == TurnPhase.DECIDED.value)
            .group_by(TurnRow.run_id)
        )
        pulls = (
            sa.select(PullRequestRow.run_id, sa.func.count())
            .where(PullRequestRow.run_id.in_(ids))
            .group_by(PullRequestRow.run_id)
        )
        with self._session(read_only=True) as s:
            done = {rid: (int(n), int(k or 0)) for rid, n, k in s.execute(turns)}
            prs = {rid: int(n) for rid, n in s.execute(pulls)}
        return {
            rid: RunTally(
                decided=done.get(rid, (0, 0))[0], kept=done.get(rid, (0, 0))[1], pulls=prs.get(rid, 0)
            )
            for rid in ids
        }

    def last_event_id(self, run_id: str) -> int:
        """The id of the run's newest event (0: none): where a page rendered now should follow from."""
        query = sa.select(sa.func.max(EventRow.id)).where(EventRow.run_id == run_id)
        with self._session(read_only=True) as s:
            return int(s.execute(query).scalar() or 0)

    def last_event_of(self, run_id: str, kind: EventKind) -> EventRecord | None:
        """The run's newest event of ``kind`` (None: none yet), e.g. where the running turn started."""
        query = (
            sa.select(EventRow)
            .where(EventRow.run_id == run_id, EventRow.kind == kind.value)
            .order_by(EventRow.id.desc())
            .limit(1)
        )
        with self._session(read_only=True) as s:
            row = s.scalars(query).first()
            return None if row is None else row.to_record()

    def page_turns(
        self,
        run_id: str,
        *,
        after: int = 0,
        limit: int = 100,
        round: int | None = None,
        outcome: Outcome | None = None,
    ) -> list[TurnRecord]:
        """Decided turns numbered above ``after``, ascending, at most ``limit``, optionally of one
        ``round`` or ``outcome``. NotFoundError for an unknown run."""
        query = sa.select(TurnRow).where(
            TurnRow.run_id == run_id, TurnRow.number > after, TurnRow.phase == TurnPhase.DECIDED.value
        )
        if round is not None:
            query = query.where(TurnRow.round == round)
        if outcome is not None:
            query = query.where(TurnRow.outcome == outcome.value)
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            rows = s.scalars(query.order_by(TurnRow.number).limit(limit))
            return [row.to_record() for row in rows]

    def samples_of_turns(self, run_id: str, turns: Collection[int]) -> list[SampleRecord]:
        """The samples of the given turns only (by turn, then insertion order)."""
        if not turns:
            return []
        query = (
            sa.select(SampleRow)
            .where(SampleRow.run_id == run_id, SampleRow.turn.in_(sorted(set(turns))))
            .order_by(SampleRow.turn, SampleRow.id)
        )
        with self._session(read_only=True) as s:
            return [row.to_record() for row in s.scalars(query)]

    def hypotheses_of_turns(self, run_id: str, turns: Collection[int]) -> list[HypothesisRecord]:
        """The parallel hypotheses of the given turns only (by turn, then index)."""
        if not turns:
            return []
        query = (
            sa.select(HypothesisRow)
            .where(HypothesisRow.run_id == run_id, HypothesisRow.turn.in_(sorted(set(turns))))
            .order_by(HypothesisRow.turn, HypothesisRow.idx)
        )
        with self._session(read_only=True) as s:
            return [row.to_record() for row in s.scalars(query)]

    def count_runs_by_status(self) -> dict[RunStatus, int]:
        """How many runs are in each status (statuses without runs are absent)."""
        query = sa.select(RunRow.status, sa.func.count()).group_by(RunRow.status)
        with self._session(read_only=True) as s:
            return {RunStatus(status): int(n) for status, n in s.execute(query)}

    def count_turns_by_outcome(self) -> dict[Outcome, int]:
        """How many decided turns have each outcome, over all runs."""
        query = (
            sa.select(TurnRow.outcome, sa.func.count())
            .where(TurnRow.phase == TurnPhase.DECIDED.value)
            .group_by(TurnRow.outcome)
        )
        with self._session(read_only=True) as s:
            return {Outcome(outcome): int(n) for outcome, n in s.execute(query) if outcome is not None}

    def count_deliveries(self) -> tuple[int, int]:
        """Stored webhook deliveries: (all, not yet processed)."""
        pending = sa.func.count().filter(DeliveryRow.processed_at.is_(None))
        query = sa.select(sa.func.count(), pending)
        with self._session(read_only=True) as s:
            total, waiting = s.execute(query).one()
            return int(total), int(waiting or 0)

"""The store's paged reads for pages and API routes (CONTRIBUTING.md, rule 8: ``limit`` and filters in SQL).

A run may hold tens of thousands of turns; an API page of them must cost the page, not the run. These
reads take a cursor (``after``), a ``limit`` and filters that become WHERE clauses, and return the
same frozen records as the rest of ``Store``. A mixin of ``Store``; its contract and session scope apply.

They are the API's hot path (``bench/api_load.py``, ADR-0013), so they select table columns with
SQLAlchemy Core (no ORM identity map, a third of the cost per row) and a page is one session, one
pooled connection, however many queries it takes.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from controller.domain.enums import EventKind, Outcome, RunStatus, SampleArm, StopReason, TurnPhase
from controller.domain.errors import NotFoundError
from controller.store.models import (
    DeliveryRow,
    EventRow,
    HypothesisRow,
    PullRequestRow,
    RunRow,
    SampleRow,
    TurnRow,
    as_utc,
    hypothesis_record,
    run_record,
    turn_record,
)
from controller.store.records import (
    EventRecord,
    HypothesisRecord,
    RunRecord,
    RunTally,
    TurnPage,
)
from controller.store.summary import RunSummaryRecord

_RUNS, _TURNS, _HYPOTHESES = (RunRow.__table__, TurnRow.__table__, HypothesisRow.__table__)


class PagedReads:
    """``page_runs``, ``turn_page``, the hypotheses of a run page and the counters ``/metrics`` reports;
    mixed into ``Store``."""

    def _session(self, *, read_only: bool = False) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def _reading(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def page_runs(
        self, *, limit: int = 50, offset: int = 0, status: RunStatus | None = None
    ) -> list[RunRecord]:
        """Runs newest first (created_at, then id), optionally of one ``status``."""
        query = sa.select(_RUNS).order_by(RunRow.created_at.desc(), RunRow.id.desc())
        if status is not None:
            query = query.where(RunRow.status == status.value)
        with self._reading() as conn:
            return [run_record(row) for row in conn.execute(query.limit(limit).offset(offset))]

    def run_summaries(
        self, *, limit: int = 50, offset: int = 0, status: RunStatus | None = None
    ) -> list[RunSummaryRecord]:
        """``page_runs`` with only the columns a runs list shows (no spec text, no options)."""
        with self._reading() as conn:
            rows = conn.execute(*summaries_query(limit=limit, offset=offset, status=status)).all()
        return [summary_record(row) for row in rows]

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

    def turns_version(self, run_id: str) -> int:
        """A number that changes whenever a page of the run's decided turns could: the id of its newest
        event (0: none). A decided turn, its samples and its hypotheses never change, and every write
        that decides a turn appends an event in the same transaction, whose id is above every earlier
        one of the run (writers of a run serialise on its row). So a page read after this returned
        ``v`` is current for as long as this still returns ``v``. NotFoundError for an unknown run."""
        with self._reading() as conn:
            row = conn.execute(TURNS_VERSION, {"run_id": run_id}).one_or_none()
        if row is None:
            raise NotFoundError(f"no run {run_id}")
        return int(row[1] or 0)

    def newest_events(self, after_id: int) -> dict[str, int]:
        """Per run with events newer than ``after_id``, its newest event id: one indexed range read
        that tells a server which of the runs it parked got news from anywhere (ADR-0020)."""
        query = (
            sa.select(EventRow.run_id, sa.func.max(EventRow.id))
            .where(EventRow.id > after_id)
            .group_by(EventRow.run_id)
        )
        with self._reading() as conn:
            return {str(run_id): int(newest) for run_id, newest in conn.execute(query)}

    def newest_event_id(self) -> int:
        """The id of the newest event of any run (0: none)."""
        with self._reading() as conn:
            return int(conn.execute(sa.select(sa.func.max(EventRow.id))).scalar() or 0)

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

    def turn_page(
        self,
        run_id: str,
        *,
        after: int = 0,
        limit: int = 100,
        round: int | None = None,
        outcome: Outcome | None = None,
    ) -> TurnPage:
        """Decided turns numbered above ``after``, ascending, at most ``limit``, optionally of one
        ``round`` or ``outcome``, with the samples and hypotheses of those turns and the run's metric
        name, read in one session (what a page of the turn table shows). NotFoundError for an unknown
        run."""
        query = sa.select(_TURNS).where(
            TurnRow.run_id == run_id, TurnRow.number > after, TurnRow.phase == TurnPhase.DECIDED.value
        )
        if round is not None:
            query = query.where(TurnRow.round == round)
        if outcome is not None:
            query = query.where(TurnRow.outcome == outcome.value)
        with self._reading() as conn:
            metric = conn.execute(sa.select(RunRow.metric_name).where(RunRow.id == run_id)).scalar()
            if metric is None:
                raise NotFoundError(f"no run {run_id}")
            page = query.order_by(TurnRow.number).limit(limit)
            turns = [turn_record(row) for row in conn.execute(page)]
            samples = _metric_samples(conn, run_id, page, metric) if turns else {}
            hypotheses = _hypotheses(conn, run_id, page) if turns else []
        return TurnPage(metric_name=metric, turns=turns, samples=samples, hypotheses=hypotheses)

    def metric_samples(self, run_id: str, metric: str) -> dict[tuple[int, SampleArm], list[float]]:
        """Every valid sample's value of ``metric`` (the baseline's as turn 0), by (turn, arm), in the
        order they were added; a sample without it is left out, an unknown run has none. The
        database extracts the one number: the run page of 500 turns decoded 1,500 JSON documents and
        made as many records to show one value of each (bench/dashboard.py)."""
        value = SampleRow.values[metric].as_float()
        query = (
            sa.select(SampleRow.turn, SampleRow.arm, value)
            .where(SampleRow.run_id == run_id, SampleRow.valid, value.is_not(None))
            .order_by(SampleRow.turn, SampleRow.id)
        )
        out: dict[tuple[int, SampleArm], list[float]] = {}
        arms = {arm.value: arm for arm in SampleArm}
        with self._reading() as conn:
            for turn, arm, number in conn.execute(query).all():
                out.setdefault((turn, arms[arm]), []).append(number)
        return out

    def hypotheses_of_turns(self, run_id: str, turns: Collection[int]) -> list[HypothesisRecord]:
        """The parallel hypotheses of the given turns only (by turn, then index)."""
        if not turns:
            return []
        query = (
            sa.select(_HYPOTHESES)
            .where(HypothesisRow.run_id == run_id, HypothesisRow.turn.in_(sorted(set(turns))))
            .order_by(HypothesisRow.turn, HypothesisRow.idx)
        )
        with self._reading() as conn:
            return [hypothesis_record(row) for row in conn.execute(query)]

    def hypothesis_outcomes(self, run_id: str) -> dict[int, dict[int, Outcome]]:
        """Per decided turn that ran parallel hypotheses, each one's outcome by index (none for N = 1).

        What the folded row under such a turn shows (how many, which one was kept), without the
        samples, texts and paths of a whole hypothesis row: on a long parallel run those cost the run
        page several times what the rest of it does (issue 23)."""
        query = (
            sa.select(HypothesisRow.turn, HypothesisRow.idx, HypothesisRow.outcome)
            .where(HypothesisRow.run_id == run_id, HypothesisRow.phase == TurnPhase.DECIDED.value)
            .order_by(HypothesisRow.turn, HypothesisRow.idx)
        )
        out: dict[int, dict[int, Outcome]] = {}
        with self._reading() as conn:
            for turn, index, outcome in conn.execute(query):
                out.setdefault(int(turn), {})[int(index)] = Outcome(outcome)
        return out

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


# The two reads of the API's hot path, shared with ``hot_reads`` (which runs them on PostgreSQL
# without SQLAlchemy): the statements, with named parameters, and the row conversion.
TURNS_VERSION = sa.select(
    RunRow.id,
    sa.select(sa.func.max(EventRow.id)).where(EventRow.run_id == RunRow.id).scalar_subquery(),
).where(RunRow.id == sa.bindparam("run_id"))

_SUMMARY_COLUMNS = (
    RunRow.id,
    RunRow.status,
    RunRow.stop_reason,
    RunRow.objective,
    RunRow.baseline_value,
    RunRow.champion_value,
    RunRow.created_at,
)
_STATUSES = {s.value: s for s in RunStatus}
_REASONS = {r.value: r for r in StopReason}


def _summaries(by_status: bool) -> sa.Select[*tuple[Any, ...]]:
    query = sa.select(*_SUMMARY_COLUMNS).order_by(RunRow.created_at.desc(), RunRow.id.desc())
    if by_status:
        query = query.where(RunRow.status == sa.bindparam("status"))
    return query.limit(sa.bindparam("limit")).offset(sa.bindparam("offset"))


SUMMARIES = {False: _summaries(False), True: _summaries(True)}  # by whether they filter by status


def summaries_query(
    *, limit: int, offset: int, status: RunStatus | None
) -> tuple[sa.Select[*tuple[Any, ...]], dict[str, object]]:
    """The runs list's page, newest first: the statement and its parameters."""
    params: dict[str, object] = {"limit": limit, "offset": offset}
    if status is not None:
        params["status"] = status.value
    return SUMMARIES[status is not None], params


def summary_record(row: Sequence[Any]) -> RunSummaryRecord:
    """A row of ``summaries_query`` as its record (timestamps in UTC, as ``UTCDateTime`` reads them)."""
    run_id, status, reason, objective, baseline, champion, created_at = row
    return RunSummaryRecord(
        id=run_id,
        status=_STATUSES[status],
        stop_reason=None if reason is None else _REASONS[reason],
        objective=objective,
        baseline_value=baseline,
        champion_value=champion,
        created_at=as_utc(created_at),
    )


def _metric_samples(
    conn: Connection, run_id: str, page: sa.Select[Any], metric: str
) -> dict[tuple[int, SampleArm], list[float]]:
    """The valid samples' values of ``metric`` for the turns of ``page``, by (turn, arm), in insertion
    order. Joined on the page's own query rather than ``IN`` its numbers: the statement text stays the
    same from page to page, so it is compiled once and prepared by the driver (a hundred-value
    ``IN`` cost more than both queries' rows)."""
    numbers = page.with_only_columns(TurnRow.number).subquery()
    query = (
        sa.select(SampleRow.turn, SampleRow.arm, SampleRow.values)
        .join(numbers, SampleRow.turn == numbers.c.number)
        .where(SampleRow.run_id == run_id, SampleRow.valid)
        .order_by(SampleRow.turn, SampleRow.id)
    )
    out: dict[tuple[int, SampleArm], list[float]] = {}
    arms = {arm.value: arm for arm in SampleArm}
    for turn, arm, values in conn.execute(query):
        if metric in values:
            out.setdefault((turn, arms[arm]), []).append(values[metric])
    return out


def _hypotheses(conn: Connection, run_id: str, page: sa.Select[Any]) -> list[HypothesisRecord]:
    """The parallel hypotheses of the turns of ``page`` (by turn, then index), joined like the samples."""
    numbers = page.with_only_columns(TurnRow.number).subquery()
    query = (
        sa.select(_HYPOTHESES)
        .join(numbers, HypothesisRow.turn == numbers.c.number)
        .where(HypothesisRow.run_id == run_id)
        .order_by(HypothesisRow.turn, HypothesisRow.idx)
    )
    return [hypothesis_record(row) for row in conn.execute(query)]

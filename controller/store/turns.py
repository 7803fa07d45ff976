"""The store's turns, their samples and a parallel turn's hypotheses, and the baseline (turn 0).

A mixin of ``Store`` in its own module (``store.py`` had grown past 500 lines); the session scope and
transaction rules are ``Store``'s. Exactly-once decisions are enforced here, inside the transaction:
``decide_turn`` moves a turn from STARTED to DECIDED with one conditional UPDATE, so two controllers
racing on one turn cannot both decide it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from controller.domain.enums import EventKind, Reason, TurnPhase
from controller.domain.errors import ConflictError, NotFoundError
from controller.store import hypotheses as hypothesis_rows
from controller.store.queries import (
    add_to_run,
    append_event_row,
    count_turns,
    decide_turn_row,
    delete_samples,
    find_turn,
    get_run_row,
    get_turn_row,
    insert_event,
    insert_events,
    insert_new_turn,
    insert_samples,
    list_sample_records,
    list_turn_records,
    lock_run,
    lock_run_id,
    read_run,
    require_finite,
    run_exists,
    sample_row,
    sample_values,
    set_component_head,
)
from controller.store.records import (
    ChampionUpdate,
    HypothesisRecord,
    HypothesisReport,
    Sample,
    SampleRecord,
    TurnCounts,
    TurnDecision,
    TurnRecord,
    TurnSnapshot,
)


class TurnsAndSamples:
    """Turns, samples, hypotheses and the baseline; mixed into ``Store``."""

    def _now(self) -> datetime:
        raise NotImplementedError

    def _session(self, *, read_only: bool = False) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def _connection(self, *, read_only: bool = False) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    # -- turns --------------------------------------------------------------------------------

    def start_turn(
        self,
        run_id: str,
        number: int,
        round: int,
        *,
        event: tuple[EventKind, Mapping[str, Any]] | None = None,
    ) -> TurnRecord:
        """Create turn ``number`` (>= 1) as STARTED, appending ``event`` in the same transaction.

        Idempotent for recovery: a STARTED turn is returned as stored, after deleting the samples an
        earlier, cut-off attempt stored for it (the event is appended again: the stream records
        each attempt). ConflictError if the turn is DECIDED, or STARTED in another round.
        """
        if number < 1:
            raise ValueError(f"turn numbers start at 1 (0 is the baseline), got {number}")
        # Core statements on a connection, no session: a served turn's first transaction (ADR-0048,
        # ADR-0050).
        # The turn is inserted unless it exists, in one statement; only a resumed turn's start reads it.
        # On PostgreSQL the run's row is locked first, as every writer of a run does; SQLite's BEGIN
        # IMMEDIATE serialises writers anyway, and there a missing run is the insert's foreign key
        # failing (ADR-0053).
        with self._connection() as db:
            if db.dialect.name != "sqlite":
                lock_run_id(db, run_id)
            record = self._insert_new_turn(db, run_id, number, round)
            if record is None:
                record = find_turn(db, run_id, number)
                assert record is not None  # it exists (the insert found it), and the lock holds it
                if record.phase == TurnPhase.DECIDED:
                    raise ConflictError(f"turn {number} of run {run_id} is already decided")
                if record.round != round:
                    raise ConflictError(f"turn {number} of run {run_id} was started in round {record.round}")
                delete_samples(db, run_id, number)
                hypothesis_rows.delete(db, run_id, number)
            if event is not None:
                insert_event(db, run_id, event[0], event[1], self._now())
            return record

    def _insert_new_turn(self, db: Connection, run_id: str, number: int, round: int) -> TurnRecord | None:
        """``insert_new_turn``; NotFoundError for a run that does not exist (on SQLite the foreign key's
        refusal tells it: no lock read came first). Elsewhere the lock read found the run, and a failed
        statement ends PostgreSQL's transaction: the error is raised as it is."""
        try:
            return insert_new_turn(db, run_id, number, round, self._now())
        except IntegrityError:
            if db.dialect.name == "sqlite" and not run_exists(db, run_id):
                raise NotFoundError(f"no run {run_id}") from None
            raise

    def decide_turn(
        self,
        run_id: str,
        number: int,
        decision: TurnDecision,
        *,
        champion: ChampionUpdate | None,
        component_heads: Mapping[str, str],
        event: tuple[EventKind, Mapping[str, Any]],
        samples: Sequence[Sample] = (),
        hypotheses: Mapping[int, tuple[Reason, str]] | None = None,
        progress: Sequence[tuple[EventKind, Mapping[str, Any]]] = (),
    ) -> TurnRecord:
        """Decide a STARTED turn, exactly once, in one transaction.

        Writes the decision (STARTED -> DECIDED), the champion when given, the component heads,
        the turn's cost and tokens added to the run, the turn's raw ``samples`` (as
        ``add_samples`` would, saving a transaction per turn), and appends ``event``. A second decide, even
        from a racing controller, raises ConflictError and changes nothing. NotFoundError if the
        run, the turn or a component in ``component_heads`` does not exist. ``hypotheses`` (parallel
        turns): the final reason and detail of every reported hypothesis, ConflictError unless it names
        exactly the reported ones. ``progress``: events appended before the decision's, in its
        transaction (the turn's progress not written yet: one transaction a turn fewer).
        """
        require_finite("value", decision.value)
        require_finite("p_value", decision.p_value)
        require_finite("champion", champion.value if champion else None)
        # Core statements on a connection, no session: the decision is the served turn's largest
        # transaction (bench/scheduler.py). The run's counters are added to in SQL first: that UPDATE
        # locks the run's row as ``lock_run_id`` would (ADR-0050); the turn's UPDATE returns the decided
        # row; the events go in one executemany. A refusal raises, and the transaction is rolled back.
        sample_rows = [sample_values(run_id, number, sample) for sample in samples]  # validated first
        won = None if champion is None else (champion.value, champion.turn)
        with self._connection() as db:
            now = self._now()
            add_to_run(db, run_id, cost_usd=decision.cost_usd, tokens=decision.tokens, now=now, champion=won)
            record = decide_turn_row(db, run_id, number, decision, now)
            if record is None:
                if find_turn(db, run_id, number) is None:
                    raise NotFoundError(f"run {run_id} has no turn {number}")
                raise ConflictError(f"turn {number} of run {run_id} is already decided")
            for name, sha in component_heads.items():
                set_component_head(db, run_id, name, sha)
            insert_samples(db, sample_rows)
            if hypotheses is not None:
                hypothesis_rows.finalise(db, run_id, number, hypotheses)
            # The turn's pending progress, before its decision.
            insert_events(db, run_id, [*progress, event], now)
            return record

    def start_baseline(self, run_id: str) -> None:
        """Prepare (again) to measure the baseline: delete turn-0 samples of a cut-off attempt.

        ConflictError once the baseline is recorded (``set_baseline``).
        """
        with self._session() as s:
            run = lock_run(s, run_id)
            if run.baseline_value is not None:
                raise ConflictError(f"run {run_id} already has its baseline")
            delete_samples(s, run_id, 0)

    def set_baseline(self, run_id: str, value: float, event_payload: Mapping[str, Any]) -> None:
        """Record the baseline, make it the champion (turn 0) and append the BASELINE event.

        Exactly once: ConflictError if the baseline is already recorded.
        """
        require_finite("baseline", value)
        with self._session() as s:
            run = lock_run(s, run_id)
            if run.baseline_value is not None:
                raise ConflictError(f"run {run_id} already has its baseline")
            now = self._now()
            run.baseline_value = run.champion_value = value
            run.champion_turn = 0
            run.updated_at = now
            append_event_row(s, run_id, EventKind.BASELINE, event_payload, now)

    def get_turn(self, run_id: str, number: int) -> TurnRecord:
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            return get_turn_row(s, run_id, number).to_record()

    def list_turns(self, run_id: str, *, last: int | None = None) -> list[TurnRecord]:
        """Every turn of the run by number, or only the ``last`` ones (still in ascending order).

        ``last`` keeps the turn loop's per-turn reads bounded however long a run grows."""
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            return list_turn_records(s, run_id, last)

    def turn_counts(self, run_id: str) -> TurnCounts:
        """Decided turns per round, the highest turn number, and the turns still STARTED (one query)."""
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            return count_turns(s, run_id)

    def turn_snapshot(self, run_id: str, *, last: int) -> TurnSnapshot:
        """``get_run``, ``turn_counts`` and ``list_turns(last=...)`` in one read transaction: the turn
        loop asks all three before every turn, and one session is a third of the cost."""
        with self._connection(read_only=True) as db:
            run = read_run(db, run_id)
            return TurnSnapshot(run, count_turns(db, run_id), tuple(list_turn_records(db, run_id, last)))

    # -- parallel hypotheses (ADR-0016) --------------------------------------------------------

    def report_hypothesis(self, run_id: str, turn: int, report: HypothesisReport) -> HypothesisRecord:
        """Store one parallel hypothesis of a STARTED turn, before the turn is decided.

        ConflictError if the turn is decided or the index is reported already; NotFoundError for a
        turn never started; ValueError for non-finite numbers or bad samples (nothing written).
        """
        with self._session() as s:
            lock_run(s, run_id)
            return hypothesis_rows.report(s, run_id, turn, report, self._now())

    def list_hypotheses(self, run_id: str, turn: int | None = None) -> list[HypothesisRecord]:
        """The hypotheses of one turn, or of every turn, by turn and index (empty for N = 1)."""
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            return hypothesis_rows.listed(s, run_id, turn)

    # -- samples ------------------------------------------------------------------------------

    def add_samples(self, run_id: str, turn: int, samples: Sequence[Sample]) -> None:
        """Store raw samples ``(arm, index, values, valid)`` of turn ``turn`` (0: the baseline).

        Values must be finite and an invalid sample must carry none (ValueError otherwise).
        ConflictError for a duplicate (turn, arm, index), a DECIDED turn, or turn 0 once the
        baseline is recorded; NotFoundError for a turn never started.
        """
        rows = [sample_row(run_id, turn, sample) for sample in samples]
        with self._session() as s:
            run = lock_run(s, run_id)
            if turn == 0 and run.baseline_value is not None:
                raise ConflictError(f"run {run_id} already has its baseline; its samples are final")
            if turn != 0 and get_turn_row(s, run_id, turn).phase == TurnPhase.DECIDED:
                raise ConflictError(f"turn {turn} of run {run_id} is decided; its samples are final")
            s.add_all(rows)

    def list_samples(self, run_id: str, turn: int | None = None) -> list[SampleRecord]:
        """Samples by turn, then in the order they were added."""
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            return list_sample_records(s, run_id, turn)

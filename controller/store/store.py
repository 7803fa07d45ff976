"""The durable record of runs, turns, samples and events (docs/architecture.md, "Record and recovery").

``Store`` is the only door to the database: every method is one transaction through one session
scope, takes and returns crucible types (``records.py``, domain enums), and raises domain errors.
Exactly-once turn decisions and forward-only run states are enforced here, inside the
transaction, so two controllers racing on one run cannot both win.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, sessionmaker

from controller.domain.enums import (
    FINISHED_STATUSES,
    Direction,
    EventKind,
    RunPhase,
    RunStatus,
    StopReason,
    check_phase_transition,
    check_run_transition,
    status_for_stop,
)
from controller.domain.errors import ConflictError, NotFoundError
from controller.store import migrate
from controller.store.errors import translate_errors
from controller.store.leases import Leases
from controller.store.ledger import Ledger
from controller.store.models import (
    KNOWN_EVENT_KINDS,
    ComponentRow,
    EventRow,
    RunRow,
    run_record,
)
from controller.store.ports import ControllerStore
from controller.store.process_groups import ProcessGroups
from controller.store.pulls_feedback import PullsAndFeedback
from controller.store.queries import (
    append_event_row,
    component_row,
    get_component_row,
    get_run_row,
    lock_run,
    require_finite,
)
from controller.store.reads import PagedReads
from controller.store.records import (
    ComponentRecord,
    EventRecord,
    NewRun,
    RunRecord,
)
from controller.store.revoked_sessions import RevokedSessions
from controller.store.turns import TurnsAndSamples
from controller.store.worker_rounds import WorkerRounds


def utc_now() -> datetime:
    return datetime.now(UTC)


class Store(
    TurnsAndSamples, PullsAndFeedback, ProcessGroups, Leases, PagedReads, WorkerRounds, RevokedSessions
):
    """Runs, components, turns, samples and events in SQLite or PostgreSQL; pull requests, deliveries
    and feedback come from ``PullsAndFeedback``, process groups from ``ProcessGroups``, leases, the
    cancel flag and the run phase from ``Leases``, paged reads for the API from ``PagedReads``,
    remote rounds' tokens and outcomes from ``WorkerRounds``, the dashboard's logouts from
    ``RevokedSessions`` (same contract).

    Atomicity: each method is one transaction; it either happens entirely or not at all.
    ``decide_turn`` and ``set_baseline`` write the decision, the champion, the usage, the component
    heads and the event together, so a crash never leaves a decided turn without its event.

    Errors (all ``controller.domain.errors``):
      - NotFoundError: the run (or turn, component) named does not exist. Every method taking a
        ``run_id`` checks the run, reads included.
      - ConflictError: the call contradicts the stored state: a duplicate id, an illegal run
        transition (``enums.RUN_TRANSITIONS``), deciding a turn twice, samples for a decided turn.
        The transaction is rolled back; nothing changed.
      - RetryLaterError: the database is busy, locked or unreachable; the same call may succeed later.
      - SchemaOutdatedError: the database is not at this code's schema (``open`` checks up front).
      - ValueError: a caller bug (NaN/inf measurements, a naive datetime, a stop reason that does
        not match the status); nothing is written.

    Idempotency: ``start_turn`` of a STARTED turn returns it again and drops its samples (recovery
    re-runs a cut-off turn); ``start_baseline`` likewise for turn 0; process-group records may be
    repeated. Everything else that
    writes is not idempotent and says so with ConflictError where repeating would be wrong
    (``decide_turn``, ``set_baseline``, ``create_run``, ``add_component``, ``add_samples``).

    Concurrency: writers lock the run row first (``SELECT ... FOR NO KEY UPDATE`` on PostgreSQL;
    SQLite writers serialise with ``BEGIN IMMEDIATE``), so per run the writes are serialised and
    event ids become visible in increasing order (safe for SSE ``Last-Event-ID`` resumption).
    A Store is safe to share between threads."""

    def __init__(self, url: str, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._url = migrate.normalize_url(url)
        self._engine = migrate.make_engine(self._url)
        self._clock = clock
        self._writer = sessionmaker(self._engine, expire_on_commit=False)
        self._reader_engine = self._engine.execution_options(**{migrate.READ_ONLY: True})
        self._reader = sessionmaker(self._reader_engine, expire_on_commit=False)
        self._page_engine = migrate.page_reader(self._engine)
        # Statements sent to the database by this store, every engine view included (``/metrics``;
        # bench/scheduler.py compares an idle server's rate).
        self._sent = 0
        self._sent_lock = threading.Lock()
        sa.event.listen(self._engine, "before_cursor_execute", self._count_statement)

    def _count_statement(self, *_args: object) -> None:
        with self._sent_lock:
            self._sent += 1

    @property
    def statements(self) -> int:
        """How many SQL statements this store has sent so far (BEGIN and COMMIT not counted)."""
        return self._sent

    @property
    def url(self) -> str:
        """The database URL (with its password, if any: for this process's children, never logs)."""
        return self._url.render_as_string(hide_password=False)

    @classmethod
    def open(cls, url: str, *, upgrade: bool = False, clock: Callable[[], datetime] = utc_now) -> Store:
        """A Store on ``url``; migrates first when ``upgrade``, else refuses a non-head schema."""
        store = cls(url, clock=clock)
        try:
            if upgrade:
                store.upgrade()
            else:
                store.check_schema()
        except BaseException:
            store.close()
            raise
        return store

    def upgrade(self) -> None:
        """Apply pending migrations (creates a SQLite file and its directory if needed)."""
        with translate_errors():
            migrate.upgrade(self._engine)

    def current_revision(self) -> str | None:
        with translate_errors():
            return migrate.current_revision(self._engine)

    def check_schema(self) -> None:
        """Raise SchemaOutdatedError unless the database is at the head revision."""
        with translate_errors():
            migrate.check_at_head(self._engine)

    def close(self) -> None:
        """Release every pooled connection; the Store must not be used afterwards."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- runs ---------------------------------------------------------------------------------

    def create_run(self, run: NewRun, components: Sequence[ComponentRecord] = ()) -> RunRecord:
        """Store a new PENDING run with its ``components`` (in this order), in one transaction: a
        scheduler that claims the run never sees it without them. ConflictError if the id exists."""
        now = self._now()
        row = RunRow(
            id=run.id,
            spec_text=run.spec_text,
            spec_fingerprint=run.spec_fingerprint,
            spec_path=run.spec_path,
            objective=run.objective,
            metric_name=run.metric_name,
            direction=Direction(run.direction).value,
            turns_planned=run.turns_planned,
            options=dict(run.options),
            status=RunStatus.PENDING.value,
            cost_usd=0.0,
            tokens=0,
            round=0,
            phase=RunPhase.SEARCH.value,
            cancel_requested=False,
            created_at=now,
            updated_at=now,
        )
        with self._session() as s:
            if s.get(RunRow, run.id) is not None:
                raise ConflictError(f"run {run.id} already exists")
            s.add(row)
            s.flush()
            s.add_all(component_row(rec, position) for position, rec in enumerate(components, start=1))
            return row.to_record()

    def get_run(self, run_id: str) -> RunRecord:
        # Core, not the ORM: the most frequent read of a served turn (bench/scheduler.py), and a
        # session's identity map and unit of work cost more than the row.
        with self._reading() as connection:
            row = connection.execute(_GET_RUN, {"run_id": run_id}).one_or_none()
        if row is None:
            raise NotFoundError(f"no run {run_id}")
        return run_record(row)

    def list_runs(self, *, limit: int = 50, offset: int = 0) -> list[RunRecord]:
        """Newest first (by created_at, then id)."""
        query = sa.select(RunRow).order_by(RunRow.created_at.desc(), RunRow.id.desc())
        with self._session(read_only=True) as s:
            return [row.to_record() for row in s.scalars(query.limit(limit).offset(offset))]

    def set_run_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        stop_reason: StopReason | None = None,
        stop_message: str | None = None,
    ) -> RunRecord:
        """Move the run to ``status`` (ConflictError if RUN_TRANSITIONS forbids it).

        A finished status (completed, failed, cancelled) sets finished_at and the stop fields; any
        other status clears them (a resumed run is not finished). Completed and failed also move
        the phase to FINISHED; cancelled keeps it (a resume on purpose continues there) and, like a
        resume of a cancelled run, clears the cancel flag. ValueError when a stop reason is
        given with an unfinished status or does not imply ``status`` (``enums.status_for_stop``).
        """
        finished = status in FINISHED_STATUSES
        if stop_reason is not None and (not finished or status_for_stop(stop_reason) is not status):
            raise ValueError(f"stop reason {stop_reason} does not go with status {status}")
        with self._session() as s:
            row = lock_run(s, run_id)
            check_run_transition(RunStatus(row.status), status)
            now = self._now()
            if status in (RunStatus.COMPLETED, RunStatus.FAILED) and row.phase != RunPhase.FINISHED:
                check_phase_transition(RunPhase(row.phase), RunPhase.FINISHED)
                row.phase = RunPhase.FINISHED.value
            if status is RunStatus.CANCELLED or row.status == RunStatus.CANCELLED:
                row.cancel_requested = False  # honoured, or lifted by a resume on purpose
            row.status = status.value
            row.stop_reason = stop_reason.value if finished and stop_reason else None
            row.stop_message = stop_message if finished else None
            row.finished_at = now if finished else None
            row.updated_at = now
            return row.to_record()

    def add_usage(self, run_id: str, *, cost_usd: float, tokens: int) -> RunRecord:
        """Add to the run's spent cost and tokens (not idempotent: call once per usage report)."""
        require_finite("cost_usd", cost_usd)
        with self._session() as s:
            row = lock_run(s, run_id)
            row.cost_usd += cost_usd
            row.tokens += tokens
            row.updated_at = self._now()
            return row.to_record()

    # -- components ---------------------------------------------------------------------------

    def add_component(self, rec: ComponentRecord) -> None:
        """ConflictError on a duplicate (run_id, name); list_components keeps insertion order."""
        with self._session() as s:
            lock_run(s, rec.run_id)
            if s.get(ComponentRow, (rec.run_id, rec.name)) is not None:
                raise ConflictError(f"run {rec.run_id} already has a component {rec.name!r}")
            last = sa.select(sa.func.max(ComponentRow.position)).where(ComponentRow.run_id == rec.run_id)
            position = (s.scalar(last) or 0) + 1
            s.add(component_row(rec, position))

    def list_components(self, run_id: str) -> list[ComponentRecord]:
        query = sa.select(ComponentRow).where(ComponentRow.run_id == run_id).order_by(ComponentRow.position)
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            return [row.to_record() for row in s.scalars(query)]

    def set_component_head(self, run_id: str, name: str, head_sha: str) -> None:
        with self._session() as s:
            lock_run(s, run_id)
            get_component_row(s, run_id, name).head_sha = head_sha

    def follow_base(
        self, run_id: str, name: str, *, new_base: str, head_sha: str, event: Mapping[str, Any]
    ) -> None:
        """Record that a component now builds on ``new_base`` (the upstream moved) with ``head_sha``
        as its champion; earlier bases are kept in ``extra["bases"]``. One transaction, with the
        BASE_FOLLOWED event, so a crash leaves either the old or the new base, never a mix."""
        with self._session() as s:
            lock_run(s, run_id)
            row = get_component_row(s, run_id, name)
            stored = row.extra.get("bases")
            bases = [str(b) for b in stored] if isinstance(stored, list) else []
            bases = bases or [row.base_sha]
            row.extra = {**row.extra, "bases": [*bases, new_base]}
            row.base_sha = new_base
            row.head_sha = head_sha
            append_event_row(s, run_id, EventKind.BASE_FOLLOWED, event, self._now())

    def build_on_adopted(
        self, run_id: str, name: str, *, head_sha: str, value: float, event: Mapping[str, Any]
    ) -> None:
        """Record that a component's champion is now ``head_sha``: the champion applied onto a head
        someone else pushed, measured there at ``value`` (kept in ``extra["head_value"]``, since no
        turn measured that commit). One transaction with the BUILT_ON_ADOPTED event."""
        with self._session() as s:
            lock_run(s, run_id)
            row = get_component_row(s, run_id, name)
            row.extra = {**row.extra, "head_value": {"sha": head_sha, "value": value}}
            row.head_sha = head_sha
            append_event_row(s, run_id, EventKind.BUILT_ON_ADOPTED, event, self._now())

    def update_component_extra(self, run_id: str, name: str, extra: Mapping[str, Any]) -> None:
        """Merge ``extra`` into the component's extra (shallow: given keys replace stored ones)."""
        with self._session() as s:
            lock_run(s, run_id)
            row = get_component_row(s, run_id, name)
            row.extra = {**row.extra, **extra}

    # -- events -------------------------------------------------------------------------------

    def append_event(self, run_id: str, kind: EventKind, payload: Mapping[str, Any]) -> EventRecord:
        """One event in its own transaction, after locking the run row (ids become visible in
        order). Core statements, not a session: a served turn appends one per step and per sample,
        and the ORM's unit of work cost several times the insert (bench/scheduler.py)."""
        return self.append_events(run_id, [(kind, payload)])[0]

    def append_events(
        self, run_id: str, events: Sequence[tuple[EventKind, Mapping[str, Any]]]
    ) -> list[EventRecord]:
        """``events`` in order, in one transaction after locking the run row: a turn's progress events
        grouped (``execution.progress``) cost one commit instead of one each. None: nothing checked."""
        if not events:
            return []
        rows = [(EventKind(kind).value, dict(payload)) for kind, payload in events]
        out: list[EventRecord] = []
        with self._connection() as connection:
            if connection.execute(_LOCK_RUN, {"run_id": run_id}).one_or_none() is None:
                raise NotFoundError(f"no run {run_id}")
            now = self._now()
            for value, body in rows:
                row = {"run_id": run_id, "kind": value, "payload": body, "created_at": now}
                done = connection.execute(_INSERT_EVENT, row)
                (event_id,) = done.inserted_primary_key or (None,)
                assert event_id is not None
                out.append(
                    EventRecord(
                        id=int(event_id), run_id=run_id, kind=EventKind(value), payload=body, created_at=now
                    )
                )
        return out

    def list_events(
        self,
        run_id: str,
        *,
        after_id: int = 0,
        limit: int | None = None,
        kinds: Collection[EventKind] | None = None,
    ) -> list[EventRecord]:
        """Events of the run with id > after_id, oldest first; only of ``kinds`` when given."""
        known = KNOWN_EVENT_KINDS if kinds is None else [EventKind(kind).value for kind in kinds]
        query = (
            sa.select(EventRow)
            .where(EventRow.run_id == run_id, EventRow.id > after_id, EventRow.kind.in_(known))
            .order_by(EventRow.id)
            .limit(limit)
        )
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            return [row.to_record() for row in s.scalars(query)]

    # -- plumbing -----------------------------------------------------------------------------

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the store's clock must return timezone-aware datetimes")
        return now.astimezone(UTC)

    @contextmanager
    def _connection(self, *, read_only: bool = False) -> Iterator[Connection]:
        """A transaction without the ORM (same errors as ``_session``): for the webhook intake's batch
        insert and a served turn's own statements (start, decision, the loop's read), where the
        session's own bookkeeping cost more than the rows. ``read_only``: as ``_session``'s."""
        engine = self._reader_engine if read_only else self._engine
        with translate_errors(), engine.begin() as connection:
            yield connection

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """A connection for the paged reads the API serves (``reads.py``): Core rows straight into
        records, without a session's identity map, and on PostgreSQL without a transaction
        (``migrate.page_reader``). Same errors as ``_session``."""
        with translate_errors(), self._page_engine.connect() as connection, connection.begin():
            yield connection

    @contextmanager
    def _session(self, *, read_only: bool = False) -> Iterator[Session]:
        """The one session scope: commit on success, roll back on any error, map database errors."""
        factory = self._reader if read_only else self._writer
        with translate_errors(), factory.begin() as session:
            yield session


_RUNS, _EVENTS = RunRow.__table__, EventRow.__table__
# Built once: SQLAlchemy then reuses their cache keys and compiled forms (a statement built per call
# is coerced and keyed again every time).
_GET_RUN = sa.select(_RUNS).where(_RUNS.c.id == sa.bindparam("run_id"))
_LOCK_RUN = sa.select(_RUNS.c.id).where(_RUNS.c.id == sa.bindparam("run_id")).with_for_update(key_share=True)
_INSERT_EVENT = sa.insert(EventRow)


def as_ledger(store: Store) -> Ledger:
    """The store as the turn path's ledger (mypy checks here that ``Store`` keeps the contract)."""
    return store


def as_controller_store(store: Store) -> ControllerStore:
    """The store as every port at once (mypy checks here that ``Store`` keeps each port's contract)."""
    return store

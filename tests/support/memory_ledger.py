"""``MemoryLedger``: the ledger port (``controller.store.ledger.Ledger``) held in a dict, for unit tests
of the round engine that should not need a database (issue 22).

It is a fake, so it is held to the real ones' contract: ``tests/ledger`` runs its whole suite against
it beside SQLite, PostgreSQL and the HTTP ledger (implementation ``memory``). Everything the docstring
of ``Ledger`` promises is kept: one lock makes each call all or nothing, decisions are exactly once,
refused writes change nothing, and the errors are the same classes for the same causes. What the port
leaves out (creating runs and components) the controller's store does; here ``create_run`` and
``add_component`` stand in for it, with the store's signatures, so a test seeds a run the same way.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from controller.domain.enums import (
    FINISHED_STATUSES,
    OUTCOME_OF_REASON,
    EventKind,
    Reason,
    RunPhase,
    RunStatus,
    SampleArm,
    StopReason,
    TurnPhase,
    check_run_transition,
    status_for_stop,
)
from controller.domain.errors import ConflictError, NotFoundError
from controller.store.records import (
    ChampionUpdate,
    ComponentRecord,
    EventRecord,
    HypothesisRecord,
    HypothesisReport,
    NewRun,
    RunRecord,
    Sample,
    SampleRecord,
    TurnCounts,
    TurnDecision,
    TurnRecord,
    TurnSnapshot,
)


def _finite(name: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")


def _sample(run_id: str, turn: int, sample: Sample) -> SampleRecord:
    """The store's checks on one raw sample (``queries.sample_row``), as a record."""
    arm, index, values, valid = sample
    if not valid and values:
        raise ValueError(f"sample {arm} {index} of turn {turn} is invalid yet carries values")
    clean = {str(name): float(value) for name, value in values.items()}
    for name, value in clean.items():
        _finite(f"sample value {name}", value)
    return SampleRecord(run_id=run_id, turn=turn, arm=SampleArm(arm), index=index, values=clean, valid=valid)


@dataclasses.dataclass
class _Run:
    record: RunRecord
    components: dict[str, ComponentRecord]
    turns: dict[int, TurnRecord] = dataclasses.field(default_factory=dict)
    samples: list[SampleRecord] = dataclasses.field(default_factory=list)
    hypotheses: dict[tuple[int, int], HypothesisRecord] = dataclasses.field(default_factory=dict)


class MemoryLedger:
    """One process's runs in memory, behind the ``Ledger`` port (and the two seeding calls)."""

    def __init__(self, clock: Any = None) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._events: list[EventRecord] = []
        self._clock = clock or (lambda: datetime.now(UTC))

    # -- seeding (the controller's store does this in service) ------------------------------------

    def create_run(self, new: NewRun, components: Iterable[ComponentRecord] = ()) -> RunRecord:
        now = self._clock()
        record = RunRecord(
            id=new.id,
            spec_text=new.spec_text,
            spec_fingerprint=new.spec_fingerprint,
            spec_path=new.spec_path,
            objective=new.objective,
            metric_name=new.metric_name,
            direction=new.direction,
            turns_planned=new.turns_planned,
            options=dict(new.options),
            status=RunStatus.PENDING,
            stop_reason=None,
            stop_message=None,
            baseline_value=None,
            champion_value=None,
            champion_turn=None,
            cost_usd=0.0,
            tokens=0,
            round=0,
            created_at=now,
            updated_at=now,
            finished_at=None,
        )
        with self._lock:
            if new.id in self._runs:
                raise ConflictError(f"run {new.id} already exists")
            self._runs[new.id] = _Run(record, {c.name: c for c in components})
        return record

    def add_component(self, rec: ComponentRecord) -> None:
        with self._lock:
            run = self._run(rec.run_id)
            if rec.name in run.components:
                raise ConflictError(f"run {rec.run_id} already has component {rec.name}")
            run.components[rec.name] = rec

    def list_components(self, run_id: str) -> list[ComponentRecord]:
        with self._lock:
            return list(self._run(run_id).components.values())

    # -- the port ----------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        with self._lock:
            return self._run(run_id).record

    def turn_snapshot(self, run_id: str, *, last: int) -> TurnSnapshot:
        with self._lock:
            run = self._run(run_id)
            turns = sorted(run.turns.values(), key=lambda t: t.number)
            decided: dict[int, int] = {}
            for turn in turns:
                if turn.phase is TurnPhase.DECIDED:
                    decided[turn.round] = decided.get(turn.round, 0) + 1
            started = tuple(t.number for t in turns if t.phase is TurnPhase.STARTED)
            counts = TurnCounts(decided=decided, highest=turns[-1].number if turns else 0, started=started)
            return TurnSnapshot(run.record, counts, tuple(turns[-last:] if last > 0 else ()))

    def start_baseline(self, run_id: str) -> None:
        with self._lock:
            run = self._run(run_id)
            if run.record.baseline_value is not None:
                raise ConflictError(f"run {run_id} already has its baseline")
            run.samples = [s for s in run.samples if s.turn != 0]

    def set_baseline(self, run_id: str, value: float, event_payload: Mapping[str, Any]) -> None:
        _finite("baseline", value)
        with self._lock:
            run = self._run(run_id)
            if run.record.baseline_value is not None:
                raise ConflictError(f"run {run_id} already has its baseline")
            run.record = dataclasses.replace(
                run.record,
                baseline_value=value,
                champion_value=value,
                champion_turn=0,
                updated_at=self._clock(),
            )
            self._append(run_id, EventKind.BASELINE, event_payload)

    def add_samples(self, run_id: str, turn: int, samples: Sequence[Sample]) -> None:
        records = [_sample(run_id, turn, s) for s in samples]
        with self._lock:
            run = self._run(run_id)
            if turn == 0 and run.record.baseline_value is not None:
                raise ConflictError(f"run {run_id} already has its baseline; its samples are final")
            if turn != 0 and self._turn(run, turn).phase is TurnPhase.DECIDED:
                raise ConflictError(f"turn {turn} of run {run_id} is decided; its samples are final")
            taken = {(s.turn, s.arm, s.index) for s in run.samples}
            if any((r.turn, r.arm, r.index) in taken for r in records):
                raise ConflictError(f"turn {turn} of run {run_id}: a sample is stored already")
            run.samples += records

    def list_samples(self, run_id: str, turn: int | None = None) -> list[SampleRecord]:
        with self._lock:
            found = [s for s in self._run(run_id).samples if turn is None or s.turn == turn]
            return sorted(found, key=lambda s: s.turn)  # stable: in the order they were added

    def start_turn(
        self,
        run_id: str,
        number: int,
        round: int,
        *,
        event: tuple[EventKind, Mapping[str, Any]] | None = None,
    ) -> TurnRecord:
        if number < 1:
            raise ValueError(f"turn numbers start at 1 (0 is the baseline), got {number}")
        with self._lock:
            run = self._run(run_id)
            turn = run.turns.get(number)
            if turn is None:
                turn = TurnRecord(
                    run_id=run_id,
                    number=number,
                    round=round,
                    phase=TurnPhase.STARTED,
                    started_at=self._clock(),
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
                run.turns[number] = turn
            else:
                if turn.phase is TurnPhase.DECIDED:
                    raise ConflictError(f"turn {number} of run {run_id} is already decided")
                if turn.round != round:
                    raise ConflictError(f"turn {number} of run {run_id} was started in round {turn.round}")
                run.samples = [s for s in run.samples if s.turn != number]
                run.hypotheses = {k: h for k, h in run.hypotheses.items() if k[0] != number}
            if event is not None:
                self._append(run_id, *event)
            return turn

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
        _finite("value", decision.value)
        _finite("p_value", decision.p_value)
        _finite("champion", champion.value if champion else None)
        records = [_sample(run_id, number, s) for s in samples]
        with self._lock:
            run = self._run(run_id)
            turn = self._turn(run, number)
            if turn.phase is TurnPhase.DECIDED:
                raise ConflictError(f"turn {number} of run {run_id} is already decided")
            missing = sorted(set(component_heads) - set(run.components))
            if missing:
                raise NotFoundError(f"run {run_id} has no component {missing[0]}")
            reported = {i for (t, i) in run.hypotheses if t == number}
            if hypotheses is not None and set(hypotheses) != reported:
                raise ConflictError(
                    f"turn {number} of run {run_id}: decided hypotheses {sorted(hypotheses)} "
                    f"but reported {sorted(reported)}"
                )
            now = self._clock()
            decided = dataclasses.replace(
                turn,
                phase=TurnPhase.DECIDED,
                decided_at=now,
                **{f.name: getattr(decision, f.name) for f in dataclasses.fields(decision)},
            )
            run.turns[number] = decided
            update: dict[str, Any] = {
                "cost_usd": run.record.cost_usd + decision.cost_usd,
                "tokens": run.record.tokens + decision.tokens,
                "updated_at": now,
            }
            if champion is not None:
                update |= {"champion_value": champion.value, "champion_turn": champion.turn}
            run.record = dataclasses.replace(run.record, **update)
            for name, sha in component_heads.items():
                run.components[name] = dataclasses.replace(run.components[name], head_sha=sha)
            run.samples += records
            for index, (reason, detail) in (hypotheses or {}).items():
                run.hypotheses[(number, index)] = dataclasses.replace(
                    run.hypotheses[(number, index)],
                    phase=TurnPhase.DECIDED,
                    reason=reason,
                    outcome=OUTCOME_OF_REASON[reason],
                    detail=detail,
                )
            for kind, payload in progress:
                self._append(run_id, kind, payload)
            self._append(run_id, *event)
            return decided

    def report_hypothesis(self, run_id: str, turn: int, report: HypothesisReport) -> HypothesisRecord:
        for name in ("value", "reference_value", "delta", "p_value", "cost_usd", "duration_s"):
            _finite(name, getattr(report, name))
        samples = tuple(
            (r.arm, r.index, dict(r.values), r.valid)
            for r in (_sample(run_id, turn, s) for s in report.samples)
        )
        with self._lock:
            run = self._run(run_id)
            if self._turn(run, turn).phase is TurnPhase.DECIDED:
                raise ConflictError(f"turn {turn} of run {run_id} is decided; its hypotheses are final")
            if (turn, report.index) in run.hypotheses:
                raise ConflictError(
                    f"hypothesis {report.index} of turn {turn} of run {run_id} is already reported"
                )
            record = HypothesisRecord(
                run_id=run_id,
                turn=turn,
                index=report.index,
                phase=TurnPhase.STARTED,
                outcome=OUTCOME_OF_REASON[report.reason],
                reason=report.reason,
                value=report.value,
                reference_value=report.reference_value,
                delta=report.delta,
                p_value=report.p_value,
                hypothesis=report.hypothesis,
                proposal=None if report.proposal is None else dict(report.proposal),
                changed_paths=tuple(report.changed_paths),
                commits=dict(report.commits),
                samples=samples,
                cost_usd=report.cost_usd,
                tokens=report.tokens,
                duration_s=report.duration_s,
                detail=report.detail,
            )
            run.hypotheses[(turn, report.index)] = record
            return record

    def list_hypotheses(self, run_id: str, turn: int | None = None) -> list[HypothesisRecord]:
        with self._lock:
            found = self._run(run_id).hypotheses
            return [found[k] for k in sorted(found) if turn is None or k[0] == turn]

    def append_event(self, run_id: str, kind: EventKind, payload: Mapping[str, Any]) -> EventRecord:
        with self._lock:
            self._run(run_id)
            return self._append(run_id, kind, payload)

    def append_events(
        self, run_id: str, events: Sequence[tuple[EventKind, Mapping[str, Any]]]
    ) -> list[EventRecord]:
        if not events:
            return []
        with self._lock:
            self._run(run_id)
            return [self._append(run_id, kind, payload) for kind, payload in events]

    def list_events(
        self,
        run_id: str,
        *,
        after_id: int = 0,
        limit: int | None = None,
        kinds: Collection[EventKind] | None = None,
    ) -> list[EventRecord]:
        with self._lock:
            self._run(run_id)
            found = [
                e
                for e in self._events
                if e.run_id == run_id and e.id > after_id and (kinds is None or e.kind in kinds)
            ]
            return found if limit is None else found[:limit]

    def set_run_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        stop_reason: StopReason | None = None,
        stop_message: str | None = None,
    ) -> RunRecord:
        finished = status in FINISHED_STATUSES
        if stop_reason is not None and (not finished or status_for_stop(stop_reason) is not status):
            raise ValueError(f"stop reason {stop_reason} does not go with status {status}")
        with self._lock:
            run = self._run(run_id)
            check_run_transition(run.record.status, status)
            now = self._clock()
            phase = run.record.phase
            if status in (RunStatus.COMPLETED, RunStatus.FAILED):
                phase = RunPhase.FINISHED
            cancel = run.record.cancel_requested
            if status is RunStatus.CANCELLED or run.record.status is RunStatus.CANCELLED:
                cancel = False
            run.record = dataclasses.replace(
                run.record,
                status=status,
                phase=phase,
                cancel_requested=cancel,
                stop_reason=stop_reason if finished else None,
                stop_message=stop_message if finished else None,
                finished_at=now if finished else None,
                updated_at=now,
            )
            return run.record

    # -- inside the lock ----------------------------------------------------------------------------

    def _run(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id}")
        return run

    def _turn(self, run: _Run, number: int) -> TurnRecord:
        turn = run.turns.get(number)
        if turn is None:
            raise NotFoundError(f"run {run.record.id} has no turn {number}")
        return turn

    def _append(self, run_id: str, kind: EventKind, payload: Mapping[str, Any]) -> EventRecord:
        event = EventRecord(
            id=len(self._events) + 1,
            run_id=run_id,
            kind=EventKind(kind),
            payload=dict(payload),
            created_at=self._clock(),
        )
        self._events.append(event)
        return event

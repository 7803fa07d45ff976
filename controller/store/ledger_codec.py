"""The ledger's records as JSON, both ways: what the HTTP ledger and the worker routes speak (ADR-0014).

One codec used by the client (``http_ledger``) and the server (``api.worker``), so a field added to
a record is added to the wire once. Plain JSON types only: enums by value, datetimes as ISO 8601
with their offset, mappings as objects. ``decode_*`` raise ValueError for anything malformed (the
server turns that into a 400 naming the request, the client into a protocol error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from controller.domain.enums import (
    EventKind,
    Outcome,
    Reason,
    RunPhase,
    RunStatus,
    SampleArm,
    SequentialStop,
    StopReason,
    TurnPhase,
)
from controller.store.records import (
    ChampionUpdate,
    EventRecord,
    HypothesisRecord,
    HypothesisReport,
    RunRecord,
    Sample,
    SampleRecord,
    TurnCounts,
    TurnDecision,
    TurnRecord,
    TurnSnapshot,
)

Json = dict[str, Any]


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse_time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if value is not None else None


def _opt(enum: Any, value: Any) -> Any:
    return enum(value) if value is not None else None


def run_json(run: RunRecord) -> Json:
    return {
        "id": run.id,
        "spec_text": run.spec_text,
        "spec_fingerprint": run.spec_fingerprint,
        "spec_path": run.spec_path,
        "objective": run.objective,
        "metric_name": run.metric_name,
        "direction": run.direction,
        "turns_planned": run.turns_planned,
        "options": dict(run.options),
        "status": str(run.status),
        "stop_reason": run.stop_reason and str(run.stop_reason),
        "stop_message": run.stop_message,
        "baseline_value": run.baseline_value,
        "champion_value": run.champion_value,
        "champion_turn": run.champion_turn,
        "cost_usd": run.cost_usd,
        "tokens": run.tokens,
        "round": run.round,
        "created_at": _time(run.created_at),
        "updated_at": _time(run.updated_at),
        "finished_at": _time(run.finished_at),
        "phase": str(run.phase),
        "lease_owner": run.lease_owner,
        "lease_expires_at": _time(run.lease_expires_at),
        "cancel_requested": run.cancel_requested,
    }


def decode_run(data: Mapping[str, Any]) -> RunRecord:
    created, updated = _parse_time(data["created_at"]), _parse_time(data["updated_at"])
    assert created is not None and updated is not None
    return RunRecord(
        id=data["id"],
        spec_text=data["spec_text"],
        spec_fingerprint=data["spec_fingerprint"],
        spec_path=data["spec_path"],
        objective=data["objective"],
        metric_name=data["metric_name"],
        direction=data["direction"],
        turns_planned=int(data["turns_planned"]),
        options=dict(data["options"]),
        status=RunStatus(data["status"]),
        stop_reason=_opt(StopReason, data["stop_reason"]),
        stop_message=data["stop_message"],
        baseline_value=data["baseline_value"],
        champion_value=data["champion_value"],
        champion_turn=data["champion_turn"],
        cost_usd=float(data["cost_usd"]),
        tokens=int(data["tokens"]),
        round=int(data["round"]),
        created_at=created,
        updated_at=updated,
        finished_at=_parse_time(data["finished_at"]),
        phase=RunPhase(data["phase"]),
        lease_owner=data["lease_owner"],
        lease_expires_at=_parse_time(data["lease_expires_at"]),
        cancel_requested=bool(data["cancel_requested"]),
    )


def turn_json(turn: TurnRecord) -> Json:
    return {
        "run_id": turn.run_id,
        "number": turn.number,
        "round": turn.round,
        "phase": str(turn.phase),
        "started_at": _time(turn.started_at),
        "decided_at": _time(turn.decided_at),
        "outcome": turn.outcome and str(turn.outcome),
        "reason": turn.reason and str(turn.reason),
        "value": turn.value,
        "p_value": turn.p_value,
        "hypothesis": turn.hypothesis,
        "changed_paths": list(turn.changed_paths),
        "commits": dict(turn.commits),
        "cost_usd": turn.cost_usd,
        "tokens": turn.tokens,
        "duration_s": turn.duration_s,
        "detail": turn.detail,
        "pairs": turn.pairs,
        "sequential_stop": turn.sequential_stop and str(turn.sequential_stop),
    }


def decode_turn(data: Mapping[str, Any]) -> TurnRecord:
    started = _parse_time(data["started_at"])
    assert started is not None
    return TurnRecord(
        run_id=data["run_id"],
        number=int(data["number"]),
        round=int(data["round"]),
        phase=TurnPhase(data["phase"]),
        started_at=started,
        decided_at=_parse_time(data["decided_at"]),
        outcome=_opt(Outcome, data["outcome"]),
        reason=_opt(Reason, data["reason"]),
        value=data["value"],
        p_value=data["p_value"],
        hypothesis=data["hypothesis"],
        changed_paths=tuple(data["changed_paths"]),
        commits=dict(data["commits"]),
        cost_usd=float(data["cost_usd"]),
        tokens=int(data["tokens"]),
        duration_s=float(data["duration_s"]),
        detail=data["detail"],
        pairs=data["pairs"],
        sequential_stop=_opt(SequentialStop, data["sequential_stop"]),
    )


def snapshot_json(snap: TurnSnapshot) -> Json:
    counts = snap.counts
    return {
        "run": run_json(snap.run),
        "counts": {
            # JSON object keys are strings; the round numbers come back as ints.
            "decided": {str(k): v for k, v in counts.decided.items()},
            "highest": counts.highest,
            "started": list(counts.started),
        },
        "recent": [turn_json(t) for t in snap.recent],
    }


def decode_snapshot(data: Mapping[str, Any]) -> TurnSnapshot:
    counts = data["counts"]
    return TurnSnapshot(
        run=decode_run(data["run"]),
        counts=TurnCounts(
            decided={int(k): int(v) for k, v in counts["decided"].items()},
            highest=int(counts["highest"]),
            started=tuple(int(n) for n in counts["started"]),
        ),
        recent=tuple(decode_turn(t) for t in data["recent"]),
    )


def samples_json(samples: Sequence[Sample]) -> list[Json]:
    return [
        {"arm": str(arm), "index": index, "values": dict(values), "valid": valid}
        for arm, index, values, valid in samples
    ]


def decode_samples(data: Sequence[Mapping[str, Any]]) -> list[Sample]:
    return [
        (
            SampleArm(s["arm"]),
            int(s["index"]),
            {str(k): float(v) for k, v in s["values"].items()},
            bool(s["valid"]),
        )
        for s in data
    ]


def sample_record_json(sample: SampleRecord) -> Json:
    return {
        "run_id": sample.run_id,
        "turn": sample.turn,
        "arm": str(sample.arm),
        "index": sample.index,
        "values": dict(sample.values),
        "valid": sample.valid,
    }


def decode_sample_record(data: Mapping[str, Any]) -> SampleRecord:
    return SampleRecord(
        run_id=data["run_id"],
        turn=int(data["turn"]),
        arm=SampleArm(data["arm"]),
        index=int(data["index"]),
        values={str(k): float(v) for k, v in data["values"].items()},
        valid=bool(data["valid"]),
    )


def event_json(event: EventRecord) -> Json:
    return {
        "id": event.id,
        "run_id": event.run_id,
        "kind": str(event.kind),
        "payload": dict(event.payload),
        "created_at": _time(event.created_at),
    }


def decode_event(data: Mapping[str, Any]) -> EventRecord:
    created = _parse_time(data["created_at"])
    assert created is not None
    return EventRecord(
        id=int(data["id"]),
        run_id=data["run_id"],
        kind=EventKind(data["kind"]),
        payload=dict(data["payload"]),
        created_at=created,
    )


def event_spec_json(event: tuple[EventKind, Mapping[str, Any]] | None) -> Json | None:
    return None if event is None else {"kind": str(event[0]), "payload": dict(event[1])}


def decode_event_spec(data: Mapping[str, Any] | None) -> tuple[EventKind, Mapping[str, Any]] | None:
    return None if data is None else (EventKind(data["kind"]), dict(data["payload"]))


def decision_json(decision: TurnDecision) -> Json:
    return {
        "outcome": str(decision.outcome),
        "reason": str(decision.reason),
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
        "sequential_stop": decision.sequential_stop and str(decision.sequential_stop),
    }


def decode_decision(data: Mapping[str, Any]) -> TurnDecision:
    return TurnDecision(
        outcome=Outcome(data["outcome"]),
        reason=Reason(data["reason"]),
        value=data["value"],
        p_value=data["p_value"],
        hypothesis=data["hypothesis"],
        changed_paths=tuple(data["changed_paths"]),
        commits=dict(data["commits"]),
        cost_usd=float(data["cost_usd"]),
        tokens=int(data["tokens"]),
        duration_s=float(data["duration_s"]),
        detail=data["detail"],
        pairs=data["pairs"],
        sequential_stop=_opt(SequentialStop, data["sequential_stop"]),
    )


def champion_json(champion: ChampionUpdate | None) -> Json | None:
    return None if champion is None else {"value": champion.value, "turn": champion.turn}


def decode_champion(data: Mapping[str, Any] | None) -> ChampionUpdate | None:
    return None if data is None else ChampionUpdate(value=float(data["value"]), turn=int(data["turn"]))


def report_json(report: HypothesisReport) -> Json:
    return {
        "index": report.index,
        "reason": str(report.reason),
        "value": report.value,
        "reference_value": report.reference_value,
        "delta": report.delta,
        "p_value": report.p_value,
        "hypothesis": report.hypothesis,
        "proposal": None if report.proposal is None else dict(report.proposal),
        "changed_paths": list(report.changed_paths),
        "commits": dict(report.commits),
        "samples": samples_json(report.samples),
        "cost_usd": report.cost_usd,
        "tokens": report.tokens,
        "duration_s": report.duration_s,
        "detail": report.detail,
    }


def decode_report(data: Mapping[str, Any]) -> HypothesisReport:
    proposal = data.get("proposal")
    return HypothesisReport(
        index=int(data["index"]),
        reason=Reason(data["reason"]),
        value=data["value"],
        reference_value=data["reference_value"],
        delta=data["delta"],
        p_value=data["p_value"],
        hypothesis=data["hypothesis"],
        proposal=None if proposal is None else dict(proposal),
        changed_paths=tuple(data["changed_paths"]),
        commits=dict(data["commits"]),
        samples=tuple(decode_samples(data["samples"])),
        cost_usd=float(data["cost_usd"]),
        tokens=int(data["tokens"]),
        duration_s=float(data["duration_s"]),
        detail=data["detail"],
    )


def hypothesis_json(record: HypothesisRecord) -> Json:
    return {
        "run_id": record.run_id,
        "turn": record.turn,
        "index": record.index,
        "phase": str(record.phase),
        "outcome": str(record.outcome),
        "reason": str(record.reason),
        "value": record.value,
        "reference_value": record.reference_value,
        "delta": record.delta,
        "p_value": record.p_value,
        "hypothesis": record.hypothesis,
        "proposal": None if record.proposal is None else dict(record.proposal),
        "changed_paths": list(record.changed_paths),
        "commits": dict(record.commits),
        "samples": samples_json(record.samples),
        "cost_usd": record.cost_usd,
        "tokens": record.tokens,
        "duration_s": record.duration_s,
        "detail": record.detail,
    }


def decode_hypothesis(data: Mapping[str, Any]) -> HypothesisRecord:
    proposal = data.get("proposal")
    return HypothesisRecord(
        run_id=data["run_id"],
        turn=int(data["turn"]),
        index=int(data["index"]),
        phase=TurnPhase(data["phase"]),
        outcome=Outcome(data["outcome"]),
        reason=Reason(data["reason"]),
        value=data["value"],
        reference_value=data["reference_value"],
        delta=data["delta"],
        p_value=data["p_value"],
        hypothesis=data["hypothesis"],
        proposal=None if proposal is None else dict(proposal),
        changed_paths=tuple(data["changed_paths"]),
        commits=dict(data["commits"]),
        samples=tuple(decode_samples(data["samples"])),
        cost_usd=float(data["cost_usd"]),
        tokens=int(data["tokens"]),
        duration_s=float(data["duration_s"]),
        detail=data["detail"],
    )


def final_hypotheses_json(final: Mapping[int, tuple[Reason, str]] | None) -> Json | None:
    return None if final is None else {str(i): [str(r), d] for i, (r, d) in final.items()}


def decode_final_hypotheses(data: Mapping[str, Any] | None) -> dict[int, tuple[Reason, str]] | None:
    return None if data is None else {int(i): (Reason(v[0]), str(v[1])) for i, v in data.items()}

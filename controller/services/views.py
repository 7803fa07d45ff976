"""Read models: a run as the ``--json`` object of DESIGN §6, its turns as TSV, its events as JSONL.

Everything is computed from the store (and the run's candidate clone for diffs), so ``crucible runs show``
tells the same story whether the run is live, finished or crashed.
"""

from __future__ import annotations

import json
from typing import Any

from controller.config.settings import Settings
from controller.domain.enums import SampleArm, TurnPhase
from controller.domain.errors import CrucibleError
from controller.services.layout import RunLayout
from controller.services.turn import turn_row
from controller.store.records import ComponentRecord, SampleRecord
from controller.store.store import Store
from controller.workspace.checkout import Checkout


def _samples_by_turn(samples: list[SampleRecord], metric: str) -> dict[tuple[int, SampleArm], list[float]]:
    out: dict[tuple[int, SampleArm], list[float]] = {}
    for s in samples:
        if s.valid and metric in s.values:
            out.setdefault((s.turn, s.arm), []).append(s.values[metric])
    return out


def component_diff(settings: Settings, run_id: str, comp: ComponentRecord) -> str:
    """The champion's pristine-relative diff (base sha .. champion head) of one component."""
    if comp.head_sha == comp.base_sha:
        return ""
    layout = RunLayout(settings.run_dir(run_id), (comp.name,))
    path = layout.arm_dir("candidate") / comp.name
    try:
        return Checkout.open(path).diff(comp.base_sha, comp.head_sha)
    except CrucibleError as exc:
        return f"# diff unavailable: {exc}\n"


def run_view(settings: Settings, store: Store, run_id: str, *, with_diffs: bool = True) -> dict[str, Any]:
    run = store.get_run(run_id)
    samples = _samples_by_turn(store.list_samples(run_id), run.metric_name)
    turns = []
    for t in store.list_turns(run_id):
        if t.phase != TurnPhase.DECIDED:
            continue
        cand = samples.get((t.number, SampleArm.CANDIDATE), [])
        ref = samples.get((t.number, SampleArm.CHAMPION), [])
        turns.append(turn_row(t, cand, ref))
    components = []
    for comp in store.list_components(run_id):
        item: dict[str, Any] = {"name": comp.name, "base_sha": comp.base_sha, "head_sha": comp.head_sha}
        if with_diffs:
            item["diff"] = component_diff(settings, run_id, comp)
        components.append(item)
    best = None
    if run.champion_value is not None and run.champion_turn:
        best = {"value": run.champion_value, "turn": run.champion_turn}
    return {
        "run_id": run.id,
        "status": str(run.status),
        "stop_reason": str(run.stop_reason) if run.stop_reason else None,
        "message": run.stop_message,
        "objective": run.objective,
        "metric": {"name": run.metric_name, "direction": run.direction},
        "baseline": {"value": run.baseline_value, "samples": samples.get((0, SampleArm.BASELINE), [])},
        "best": best,
        "cost_usd": run.cost_usd,
        "tokens": run.tokens,
        "turns": turns,
        "components": components,
        "pull_requests": [
            {
                "component": p.component,
                "url": p.url,
                "number": p.number,
                "branch": p.branch,
                "draft": p.draft,
                "head_sha": p.pushed_sha,
                "state": p.state,
                "paused": p.paused,
                "published_value": p.published_value,
                "note": p.note,
            }
            for p in store.list_pulls(run_id)
        ],
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        **{key: value for key, value in feedback_view(store, run_id).items() if key != "run_id"},
    }


TSV_COLUMNS = (
    "turn",
    "round",
    "outcome",
    "reason",
    "value",
    "p_value",
    "duration_s",
    "cost_usd",
    "hypothesis",
)


def turns_tsv(settings: Settings, store: Store, run_id: str) -> str:
    view = run_view(settings, store, run_id, with_diffs=False)
    lines = ["\t".join(TSV_COLUMNS)]
    for row in view["turns"]:
        cells = []
        for col in TSV_COLUMNS:
            value = row.get(col)
            text = "" if value is None else str(value)
            cells.append(text.replace("\t", " ").replace("\n", " "))
        lines.append("\t".join(cells))
    return "\n".join(lines) + "\n"


def events_jsonl(store: Store, run_id: str, after_id: int = 0) -> str:
    rows = []
    for e in store.list_events(run_id, after_id=after_id):
        rows.append(
            json.dumps(
                {
                    "id": e.id,
                    "run_id": e.run_id,
                    "kind": str(e.kind),
                    "created_at": e.created_at.isoformat(),
                    **dict(e.payload),
                },
                sort_keys=False,
            )
        )
    return "".join(r + "\n" for r in rows)


def runs_list(store: Store, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
    out = []
    for r in store.list_runs(limit=limit, offset=offset):
        out.append(
            {
                "run_id": r.id,
                "status": str(r.status),
                "stop_reason": str(r.stop_reason) if r.stop_reason else None,
                "objective": r.objective,
                "baseline": r.baseline_value,
                "best": r.champion_value,
                "created_at": r.created_at.isoformat(),
            }
        )
    return out


def feedback_view(store: Store, run_id: str) -> dict[str, Any]:
    """Feedback items with their verdicts, rounds and drafted replies (``crucible feedback``)."""
    items = [
        {
            "id": f.id,
            "component": f.component,
            "pr_number": f.pr_number,
            "source": str(f.source),
            "author": f.author,
            "association": f.association,
            "path": f.path,
            "line": f.line,
            "action": f.action,
            "body": f.body,
            "trusted": f.trusted,
            "verdict": str(f.verdict) if f.verdict else None,
            "reason": f.reason,
            "round": f.round,
        }
        for f in store.list_feedback(run_id)
    ]
    events = store.list_events(run_id)
    replies = [dict(e.payload) for e in events if e.kind == "reply_drafted"]
    rounds = [dict(e.payload) for e in events if e.kind == "round_finished"]
    return {"run_id": run_id, "feedback": items, "rounds": rounds, "replies": replies}

"""Human-readable output of the views, from their JSON form.

Every printer takes the JSON a view dumps to (``schemas.py``), which is also what the REST API answers,
so ``crucible runs show ID`` and ``crucible runs show ID --server URL`` print the same lines from the
same data without importing the store.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import click

from controller.cli.display import TableObserver
from controller.services.views.json_forms import FeedbackJson, RunJson, RunSummaryJson, TurnJson

TSV_COLUMNS = (
    "turn",
    "round",
    "outcome",
    "reason",
    "value",
    "p_value",
    "pairs",
    "sequential_stop",
    "duration_s",
    "cost_usd",
    "hypothesis",
    "parallel_index",
)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, default=str))


def print_runs(rows: list[RunSummaryJson]) -> None:
    for r in rows:
        best = "-" if r["best"] is None else f"{r['best']:.6g}"
        base = "-" if r["baseline"] is None else f"{r['baseline']:.6g}"
        click.echo(
            f"{r['run_id']}  {r['status']:<9} {r['stop_reason'] or '':<20} {base} -> {best}  "
            f"{r['objective'][:50]}"
        )


def print_finish(view: RunJson) -> None:
    """The closing lines of a run (``crucible loop``, ``resume``), after the stop message."""
    run_id, best, base = view["run_id"], view["best"], view["baseline"]["value"]
    click.echo(f"run {run_id}: {view['status']} ({view['stop_reason']})")
    if base is not None:
        line = f"baseline {base:.6g}"
        if best and best["turn"]:
            line += f" -> best {best['value']:.6g} (turn {best['turn']})"
        click.echo(line)
    click.echo(f"see: crucible runs show {run_id}   crucible patch {run_id}")


def _with_hypotheses(turns: list[TurnJson]) -> list[Mapping[str, object]]:
    """Each turn, followed by a row per parallel hypothesis (its ``parallel_index`` set; the turn's
    own row has none), so a TSV of a parallel run lists every hypothesis measured."""
    rows: list[Mapping[str, object]] = []
    for turn in turns:
        rows.append(turn)
        for item in turn["hypotheses"]:
            rows.append(
                {**item, "turn": turn["turn"], "round": turn["round"], "parallel_index": item["index"]}
            )
    return rows


def turns_tsv(turns: list[TurnJson]) -> str:
    lines = ["\t".join(TSV_COLUMNS)]
    for row in _with_hypotheses(turns):
        cells = []
        for col in TSV_COLUMNS:
            value = row.get(col)
            text = "" if value is None else str(value)
            cells.append(text.replace("\t", " ").replace("\n", " "))
        lines.append("\t".join(cells))
    return "\n".join(lines) + "\n"


def print_run(view: RunJson) -> None:
    click.echo(f"run {view['run_id']}: {view['status']} ({view['stop_reason'] or '-'})")
    click.echo(f"objective: {view['objective']}")
    if view["message"]:
        click.echo(view["message"])
    base = view["baseline"]
    click.echo(f"baseline: {base['value']}  samples {base['samples']}")
    observer = TableObserver(sys.stdout)
    observer.champion = base["value"]
    for row in view["turns"]:
        observer.turn_decided(dict(row))
    for comp in view["components"]:
        click.echo(f"component {comp['name']}: base {comp['base_sha'][:12]} head {comp['head_sha'][:12]}")
    for pull in view["pull_requests"]:
        state = "paused" if pull["paused"] else ("draft" if pull["draft"] else pull["state"])
        click.echo(f"pull request {pull['component']}: #{pull['number']} ({state}) {pull['url']}")
        value = "-" if pull["published_value"] is None else f"{pull['published_value']:.6g}"
        best = "-" if view["best"] is None else f"{view['best']['value']:.6g}"
        click.echo(f"  published head {pull['head_sha'][:12]} value {value}; the run's best {best}")
        if pull["note"]:
            click.echo(f"  {pull['note']}")
    for item in view["feedback"]:
        where = f" {item['path']}:{item['line']}" if item["path"] else ""
        verdict = item["verdict"] or "pending"
        click.echo(f"feedback #{item['id']} by @{item['author']}{where}: {verdict} ({item['reason'] or '-'})")
    for done in view["rounds"]:
        head = (done["head"] or "")[:12]
        outcome = f"pushed {head}" if done["kept"] else "held nothing; pushed nothing"
        click.echo(f"round {done['round']} ({done['component']}): {outcome}")
    for reply in view["replies"]:
        click.echo(f"drafted reply to @{reply['author']} (feedback #{reply['feedback']}): {reply['reply']}")


def print_feedback(view: FeedbackJson, replies: bool) -> None:
    if replies:
        for reply in view["replies"]:
            click.echo(f"#{reply['feedback']} to @{reply['author']}: {reply['reply']}")
        return
    for item in view["feedback"]:
        where = f" {item['path']}:{item['line']}" if item["path"] else ""
        verdict = item["verdict"] or "pending"
        click.echo(
            f"#{item['id']} {item['source']} by @{item['author']}{where}: {verdict} ({item['reason'] or '-'})"
        )

"""``crucible loop --server URL``: submit the spec to a controller and follow the run's events there.

The same live table and the same ``--json`` result as a local run, built from the server's event
stream (resumed with ``Last-Event-ID`` when the connection drops) and its run view. Ctrl-C detaches:
the run goes on on the server, and the command says how to cancel it.
"""

from __future__ import annotations

from pathlib import Path

import click

from controller.cli.display import TableObserver
from controller.cli.remote import ApiClient
from controller.cli.show import emit_json, print_finish
from controller.domain import events
from controller.domain.events import BaselinePayload

TURN_EVENTS = frozenset({"accepted", "rejected", "failed", "no_change"})
EXIT_OK, EXIT_FAILED, EXIT_CANCELLED = 0, 1, 130


def submit_and_follow(
    client: ApiClient,
    spec_path: Path,
    turns: int | None,
    publish_prs: bool,
    watch_feedback: bool,
    as_json: bool,
) -> int:
    """Submit, follow to the run's end, print the result; the exit code of the run (docs/cli.md)."""
    run_id = client.submit(
        spec_path.read_text(),
        str(spec_path.resolve().parent),
        turns=turns,
        publish_prs=publish_prs,
        watch_feedback=watch_feedback,
    )
    click.echo(f"run {run_id} submitted to {client.base_url}", err=True)
    try:
        message = follow(client, run_id, TableObserver())
    except KeyboardInterrupt:
        click.echo(
            f"detached; run {run_id} goes on on the server. Cancel it with: "
            f"crucible cancel {run_id} --server {client.base_url}",
            err=True,
        )
        return EXIT_CANCELLED
    if message:
        click.echo(message, err=True)
    view = client.run(run_id)
    if as_json:
        emit_json(view)
    else:
        print_finish(view)
    status = view["status"]
    return EXIT_OK if status == "completed" else EXIT_CANCELLED if status == "cancelled" else EXIT_FAILED


def follow(client: ApiClient, run_id: str, observer: TableObserver) -> str | None:
    """Show the run's events as a local run shows its progress, until it completes; its stop message."""
    for event in client.events(run_id):
        kind = event.get("kind")
        if kind == "baseline":
            baseline = events.read(BaselinePayload, event)
            if baseline is not None:
                observer.baseline(baseline.value, baseline.samples)
        elif kind in TURN_EVENTS:
            observer.turn_decided(_turn_row(client, run_id, event))
        elif kind == "round_started":
            observer.step(f"round {event.get('round')} started")
        elif kind == "completed":
            return str(event.get("message") or "")
    return None


def _turn_row(client: ApiClient, run_id: str, event: dict[str, object]) -> dict[str, object]:
    """The decided turn as the local table shows it (samples, cost and duration are not in the event)."""
    number = event.get("turn")
    if isinstance(number, int):
        rows = client.turns(run_id, after=number - 1, limit=1)
        if rows and rows[0].get("turn") == number:
            return dict(rows[0])
    return dict(event)

"""``crucible runs …``, ``feedback``, ``patch``, ``accept`` and ``cancel``: reading a run's record and
the two small writes on it, locally or from a controller (``--server``).

Each command calls one service function (or the API client) and formats the answer; the imports of the
layers below happen inside the commands (``crucible runs list`` on the default SQLite file never
imports SQLAlchemy, ADR-0013).
"""

from __future__ import annotations

import json

import click

from controller.cli.common import api_client, build_root, emit_json, server_option
from controller.cli.show import print_feedback, print_run, print_runs, turns_tsv
from controller.services.views.json_forms import RunSummaryJson


def register(cli: click.Group) -> None:
    """Add these commands to the ``crucible`` group."""
    for command in (runs, feedback_cmd, patch, accept_cmd, cancel_cmd):
        cli.add_command(command)


@click.group(invoke_without_command=True)
@click.pass_context
def runs(ctx: click.Context) -> None:
    """Inspect runs (default: list)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(runs_list_cmd)


@runs.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.option("--limit", default=50, type=click.IntRange(min=1))
@server_option
def runs_list_cmd(as_json: bool = False, limit: int = 50, server: str | None = None) -> None:
    """List runs, newest first."""
    if server:
        with api_client(server) as client:
            rows = client.runs(limit)
    else:
        rows = _local_runs(limit)
    if as_json:
        emit_json(rows)
        return
    print_runs(rows)


def _local_runs(limit: int) -> list[RunSummaryJson]:
    """The runs list of the local database: the default SQLite file is read directly, without
    SQLAlchemy or pydantic (a tenth of the start-up cost, ADR-0013); any other database, or one to
    create or upgrade, goes through the run service."""
    from controller.services.views.summaries import quick_run_list
    from controller.wiring import configured_database, process_environment

    environ = process_environment()
    rows = quick_run_list(configured_database(environ), limit)
    if rows is not None:
        return rows
    from controller.services.views.schemas import dump

    listed: list[RunSummaryJson] = dump(build_root(environ).reader().list_runs(limit=limit))
    return listed


@runs.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
@click.option("--events", is_flag=True, help="the event stream as JSONL")
@click.option("--tsv", is_flag=True, help="the turns as TSV")
@server_option
def runs_show(run_id: str, as_json: bool, events: bool, tsv: bool, server: str | None) -> None:
    """Every turn, sample and decision of one run."""
    if server:
        with api_client(server) as client:
            if events:
                for event in client.events(run_id, follow=False):
                    click.echo(json.dumps(event))
                return
            view = client.run(run_id)
    else:
        from controller.services.views.schemas import dump

        reader = build_root().reader()
        if events:
            click.echo(reader.events_jsonl(run_id), nl=False)
            return
        view = dump(reader.view(run_id, with_diffs=not tsv))
    if tsv:
        click.echo(turns_tsv(view["turns"]), nl=False)
    elif as_json:
        emit_json(view)
    else:
        print_run(view)


@runs.command("resume-pr")
@click.argument("run_id")
@click.argument("component")
def runs_resume_pr(run_id: str, component: str) -> None:
    """Lift a pause on a PR: adopt its current head (never rewritten) and let crucible write again."""
    record = build_root().service().resume_pull(run_id, component)
    click.echo(f"resumed {record.url} at {record.pushed_sha[:12]}")


@click.command("feedback")
@click.argument("run_id")
@click.option("--replies", is_flag=True, help="the replies crucible drafted (never posted) for each comment")
@click.option("--json", "as_json", is_flag=True)
@server_option
def feedback_cmd(run_id: str, replies: bool, as_json: bool, server: str | None) -> None:
    """Feedback items with their verdicts; with --replies, the drafted replies."""
    if server:
        with api_client(server) as client:
            view = client.feedback(run_id)
    else:
        from controller.services.views.schemas import dump

        view = dump(build_root().reader().feedback(run_id))
    if as_json:
        emit_json(view)
        return
    print_feedback(view, replies)


@click.command()
@click.argument("run_id")
@server_option
def patch(run_id: str, server: str | None) -> None:
    """Print the final patch (read-only): one unified diff per component."""
    if server:
        with api_client(server) as client:
            click.echo(client.patch(run_id), nl=False)
        return
    click.echo(build_root().reader().patch(run_id), nl=False)


@click.command("accept")
@click.argument("run_id")
def accept_cmd(run_id: str) -> None:
    """Apply the final patch to your checkout as uncommitted changes."""
    applied = build_root().service().accept(run_id)
    click.echo(f"applied to: {', '.join(applied)}" if applied else "nothing to apply: the run kept no change")


@click.command("cancel")
@click.argument("run_id")
@server_option
def cancel_cmd(run_id: str, server: str | None) -> None:
    """Cancel a run."""
    if server:
        with api_client(server) as client:
            click.echo(client.cancel(run_id))
        return
    click.echo(build_root().service().cancel(run_id))

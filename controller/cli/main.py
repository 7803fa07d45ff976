"""The ``crucible`` command: parse arguments, call one service function, format the answer.

Errors become exit codes here and nowhere else (docs/cli.md): 0 a normal stop, 1 a failure or a
refusal, 2 bad usage or a bad spec, 130 cancelled with Ctrl-C.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from controller.cli import agents, demo, runs
from controller.cli.common import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    api_client,
    build_root,
    dashboard_address,
    detached_exit,
    emit_json,
    fail,
    finish_run,
    interrupts_cancel,
    server_option,
)
from controller.domain.errors import CrucibleError, NotFoundError, RefusedError, SpecError

if TYPE_CHECKING:
    from controller.config.options import RunOptions
    from controller.services.execution.context import RunContext
    from controller.services.execution.loop import LoopResult
    from controller.wiring import Root

# Imports of the layers below happen inside the commands: ``crucible --help`` and ``crucible runs list``
# must not pay for FastAPI, the forge, Alembic or (until a command touches the store) SQLAlchemy
# (ADR-0005 decision 6; ``tests/cli/test_startup.py`` pins it).


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crucible")
def cli() -> None:
    """crucible: measured autoresearch loops that end in reviewable draft pull requests."""


runs.register(cli)
agents.register(cli)
demo.register(cli)


@cli.command()
@click.option("--force", is_flag=True, help="overwrite an existing crucible.toml")
@click.option(
    "--agent", "preset", metavar="PRESET", help="use a coding-agent preset (crucible agents lists them)"
)
def init(force: bool, preset: str | None) -> None:
    """Write a commented crucible.toml for the repository you stand in."""
    target = Path.cwd() / "crucible.toml"
    if target.exists() and not force:
        fail(EXIT_USAGE, f"{target} exists (use --force to overwrite)")
    from controller.config.template import render_template

    table = None
    if preset is not None:
        from controller.agents.template import agent_table

        table = agent_table(preset)  # SpecError (exit 2) listing the presets when unknown
    target.write_text(render_template(Path.cwd(), table))
    click.echo(f"wrote {target}")


@cli.command()
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), default=Path("crucible.toml"))
@click.option(
    "--turns",
    type=click.IntRange(min=0, max=100_000),
    default=None,
    help="turns in round 0 (overrides the spec)",
)
@click.option("--dry-run", is_flag=True, help="validate, resolve and print what would run; run nothing")
@click.option("--json", "as_json", is_flag=True, help="print the run as one JSON object on stdout")
@click.option(
    "--publish-prs",
    is_flag=True,
    help="publish each kept candidate as a draft PR per changed component (a forge token, docs/github.md)",
)
@click.option(
    "--watch-feedback",
    is_flag=True,
    help="after the search, refine the PRs on trusted review feedback until stopped (with --publish-prs)",
)
@click.option("--listen", default=None, help="HOST:PORT for webhooks (with --watch-feedback)")
@click.option(
    "--live-steer",
    is_flag=True,
    help="hand feedback arriving mid-round to the running agent (with --watch-feedback)",
)
@click.option(
    "--dashboard",
    default=None,
    metavar="HOST:PORT",
    help="serve the run's dashboard (read-only) here while it runs; prints a link with a login token",
)
@server_option
def loop(
    spec_path: Path,
    turns: int | None,
    dry_run: bool,
    as_json: bool,
    publish_prs: bool,
    watch_feedback: bool,
    listen: str | None,
    live_steer: bool,
    dashboard: str | None,
    server: str | None,
) -> None:
    """Run a run to its stop: baseline, then measured turns that are kept or restored."""
    from controller.config.spec import load_spec

    if watch_feedback and not publish_prs:
        fail(EXIT_USAGE, "--watch-feedback needs --publish-prs (feedback arrives on the published PRs)")
    if watch_feedback and load_spec(spec_path).feedback is None:
        fail(EXIT_USAGE, "feedback: a [feedback] table is required with --watch-feedback")
    if listen and not watch_feedback:
        fail(EXIT_USAGE, "--listen only makes sense with --watch-feedback")
    if live_steer and not watch_feedback:
        fail(EXIT_USAGE, "--live-steer only makes sense with --watch-feedback")
    if server and (listen or live_steer):
        fail(EXIT_USAGE, "--listen and --live-steer are for local runs (the server has its own endpoint)")
    if server and dashboard:
        fail(EXIT_USAGE, "--dashboard is for local runs (the server serves its dashboard at /)")
    address = dashboard_address(dashboard)
    spec = load_spec(spec_path)
    if server and not dry_run:  # the server validates the spec (and its sandbox) on its own machine
        from controller.cli.follow import submit_and_follow

        with api_client(server) as client:
            sys.exit(submit_and_follow(client, spec_path, turns, publish_prs, watch_feedback, as_json))
    from controller.services.execution.runs import check_sandbox

    check_sandbox(spec)  # a SpecError (exit 2) before anything is created
    if dry_run:
        plan = _dry(spec, turns)
        sys.exit(EXIT_OK if plan else EXIT_FAILED)
    from controller.config.options import RunOptions

    options = RunOptions.parse(
        {
            "turns": turns,
            "publish_prs": publish_prs,
            "watch_feedback": watch_feedback,
            "listen": listen,
            "live_steer": live_steer,
        }
    )
    root = build_root()
    run_id = root.service().create(spec, spec_path.read_text(), spec_path.resolve(), options)
    click.echo(f"run {run_id} started", err=True)
    result = _drive(root, run_id, options, resume=False, dashboard=address)
    sys.exit(finish_run(root, run_id, result, as_json))


def _announce_watch(ctx: RunContext, searched: LoopResult) -> None:
    click.echo(f"{searched.message}; now watching the pull requests for feedback", err=True)


def _drive(
    root: Root,
    run_id: str,
    options: RunOptions,
    *,
    resume: bool,
    dashboard: tuple[str, int] | None = None,
) -> LoopResult:
    """Drive (or resume) ``run_id`` through the run service with the live table, Ctrl-C as cancel,
    SIGTERM as detach, the webhook endpoint when the run's options name one, and the run's dashboard
    when ``dashboard`` names an address."""
    import threading
    from contextlib import ExitStack

    from controller.cli.display import TableObserver
    from controller.services.control.service import Signals
    from controller.services.execution.context import Detached

    service = root.service()
    cancel_event, detach, wakeup = threading.Event(), threading.Event(), threading.Event()
    undo = interrupts_cancel(cancel_event, detach, wakeup)
    signals = Signals(cancel=cancel_event, detach=detach, wakeup=wakeup)

    def waiting(owner: str, seconds: float) -> None:
        click.echo(
            f"run {run_id} is leased by {owner}: waiting up to {seconds:.0f} s to see whether it "
            "is still alive (a live holder renews its lease)",
            err=True,
        )

    def go() -> LoopResult:
        observer = TableObserver()
        try:
            if resume:
                return service.resume(run_id, observer=observer, signals=signals, on_wait=waiting)
            return service.drive(run_id, observer=observer, signals=signals, before_watch=_announce_watch)
        except Detached:
            detached_exit(run_id)

    try:
        with ExitStack() as serving:
            if dashboard is not None:
                from controller.cli.dashboard import dashboard_server

                try:
                    link = serving.enter_context(
                        dashboard_server(root.settings, root.store(), run_id, *dashboard)
                    )
                except ValueError as exc:
                    fail(EXIT_USAGE, str(exc))
                click.echo(f"dashboard (read-only): {link}", err=True)
            if options.listen is None:
                return go()
            # Only now: the webhook endpoint's server (uvicorn, FastAPI) costs a run without one a
            # noticeable part of its start on a busy machine.
            from controller.cli.listen import parse_listen, webhook_server

            try:
                host, port = parse_listen(options.listen)
            except ValueError as exc:
                fail(EXIT_USAGE, str(exc))
            secret = root.settings.webhooks.webhook_secret
            if secret is None:
                click.echo(
                    "warning: CRUCIBLE_WEBHOOK_SECRET is not set: the endpoint refuses every delivery",
                    err=True,
                )
            plain = secret.get_secret_value() if secret is not None else None
            with webhook_server(root.store(), plain, host, port, service.hub.wake) as url:
                click.echo(f"webhooks: {url}/webhooks/github", err=True)
                return go()
    finally:
        undo()


def _dry(spec: Any, turns: int | None) -> bool:
    from controller.cli.dryrun import print_plan
    from controller.services.control.dryrun import dry_run
    from controller.wiring import process_environment

    plan = dry_run(spec, process_environment(), turns)
    if "--json" in sys.argv:
        emit_json(plan)
    else:
        print_plan(plan, parallel=spec.broker.parallel > 1)
    return True


@cli.command("resume")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
@click.option("--dashboard", default=None, metavar="HOST:PORT", help="as for crucible loop")
@server_option
def resume_cmd(run_id: str, as_json: bool, dashboard: str | None, server: str | None) -> None:
    """Continue a run after a crash or a cancel; a turn cut off mid-way is run again from its start.

    A run started with --watch-feedback goes on watching (and serving --listen) where it was."""
    if server and dashboard:
        fail(EXIT_USAGE, "--dashboard is for local runs (the server serves its dashboard at /)")
    if server:
        with api_client(server) as client:
            click.echo(client.resume(run_id))
        return
    address = dashboard_address(dashboard)
    root = build_root()
    result = _drive(root, run_id, root.reader().options(run_id), resume=True, dashboard=address)
    sys.exit(finish_run(root, run_id, result, as_json))


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(min=0, max=65535))
@click.option(
    "--max-concurrent-runs",
    default=None,
    type=click.IntRange(min=1),
    help="runs driven at once by this process (default: CRUCIBLE_MAX_CONCURRENT_RUNS or 4)",
)
def serve(host: str, port: int, max_concurrent_runs: int | None) -> None:
    """The controller service: REST API, webhooks and the scheduler (any number of replicas on one
    PostgreSQL). Needs CRUCIBLE_API_TOKEN; CRUCIBLE_API_READONLY_TOKEN and CRUCIBLE_WEBHOOK_SECRET
    are optional."""
    import logging

    from controller.api.auth import ApiTokens
    from controller.api.serve import run_server, serve_app
    from controller.wiring import Mode

    # One thread per round (the scheduler drives runs side by side), specs admitted by the
    # operator's rules, and the worker API where this process listens: all fixed by the mode.
    root = build_root(mode=Mode.SERVE, listen_url=f"http://{_reachable(host)}:{port}")
    settings = root.settings
    if settings.api.api_token is None:
        fail(EXIT_USAGE, "CRUCIBLE_API_TOKEN: required (the bearer token of the operator API)")
    readonly = settings.api.api_readonly_token
    secret = settings.webhooks.webhook_secret
    if secret is None:
        click.echo("warning: CRUCIBLE_WEBHOOK_SECRET is not set: webhooks are refused (503)", err=True)
    admission = root.admission
    remote = root.worker_api()
    app, _scheduler = serve_app(
        root.service(),
        root.store(),
        ApiTokens(
            settings.api.api_token.get_secret_value(),
            readonly.get_secret_value() if readonly is not None else None,
        ),
        max_concurrent_runs=max_concurrent_runs or settings.scheduler.max_concurrent_runs,
        webhook_secret=secret.get_secret_value() if secret is not None else None,
        forge_for=root.forges.for_spec,
        forge_usage=root.forges.usage,
        remote=remote,
        park_watching=settings.scheduler.park_watching,
        admission=admission,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    run_server(app, host, port, remote)


@cli.command("worker")
@click.option(
    "--controller", "controller_url", default=None, help="the controller's API (CRUCIBLE_CONTROLLER_URL)"
)
@click.option("--run", "run_id", default=None, help="the run (CRUCIBLE_RUN_ID)")
@click.option("--round", "round_number", default=None, type=click.IntRange(min=0), help="(CRUCIBLE_ROUND)")
@click.option("--workdir", type=click.Path(path_type=Path, file_okay=False), default=None, help="default: .")
def worker_cmd(
    controller_url: str | None, run_id: str | None, round_number: int | None, workdir: Path | None
) -> None:
    """Execute one round of a run for the controller (in a loop pod): its token only from
    CRUCIBLE_WORKER_TOKEN. Exit 0 once the round ran to its end and the controller accepted it."""
    import threading

    # A pod pays its start for every slot of every parallel round (ADR-0035): httpx imports its own
    # command-line tool, and rich and pygments with it where they are installed, unless that import
    # fails; the worker never runs it, so it is marked absent before httpx is first imported.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

    from controller.services.remote.worker import TOKEN_VARIABLE, run_worker, worker_config
    from controller.wiring import Mode, build, process_environment, withdraw_from_environment
    from controller.workspace.selfguard import make_undumpable

    # The agent runs as this user, often without a sandbox (a restricted pod cannot run bubblewrap):
    # close this process's /proc/<pid>/environ and mem to it before the token is anywhere else, and
    # take the token out of the environment once read (ADR-0026).
    if not make_undumpable():
        click.echo("warning: could not make the worker non-dumpable (not Linux?)", err=True)
    environ = process_environment()
    config = worker_config(
        environ, controller=controller_url, run_id=run_id, round=round_number, workdir=workdir
    )
    withdraw_from_environment(TOKEN_VARIABLE)
    environ.pop(TOKEN_VARIABLE, None)
    config.workdir.mkdir(parents=True, exist_ok=True)
    cancel = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        # The round ends cancelled (its running command killed, the turn restored) and is reported.
        cancel.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    root = build(environ, mode=Mode.WORKER)
    ledgers = root.worker_ledgers(config.controller_url, config.token)
    # A warm hypothesis pod (ADR-0034) runs each hypothesis it is handed with that hypothesis's token.
    ledgers_for = lambda token: root.worker_ledgers(config.controller_url, token)  # noqa: E731
    say = lambda text: click.echo(text, err=True)  # noqa: E731
    outcome = run_worker(config, environ, ledgers=ledgers, ledgers_for=ledgers_for, cancel=cancel, log=say)
    click.echo(f"round {config.round} of run {config.run_id}: {outcome.message}")


def _reachable(host: str) -> str:
    """Where a worker on this machine reaches a server listening on ``host`` (any address: loopback)."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


@cli.group()
def db() -> None:
    """Database maintenance."""


@db.command()
def upgrade() -> None:
    """Apply migrations to the configured database."""
    store = build_root().upgraded_store()
    click.echo(f"database at revision {store.current_revision()}")


@cli.command("forge", context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def forge_cmd(args: tuple[str, ...]) -> None:
    """The GitHub-compatible local forge: serve, user add (crucible forge --help)."""
    # The local forge is its own application; it is imported only when asked for.
    from controller.localforge.cli import forge_cli

    forge_cli.main(args=list(args), prog_name="crucible forge", standalone_mode=False)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every error becomes an exit code here."""
    try:
        cli.main(args=argv, prog_name="crucible", standalone_mode=False)
    except click.exceptions.Abort:
        fail(EXIT_CANCELLED, "cancelled")
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except SpecError as exc:
        fail(EXIT_USAGE, f"bad spec: {exc}")
    except NotFoundError as exc:
        fail(EXIT_USAGE, str(exc))
    except RefusedError as exc:
        fail(EXIT_FAILED, f"refused: {exc}")
    except CrucibleError as exc:
        fail(EXIT_FAILED, str(exc))
    except KeyboardInterrupt:
        fail(EXIT_CANCELLED, "cancelled")


if __name__ == "__main__":
    main()

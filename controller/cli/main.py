"""The ``crucible`` command: parse arguments, call one service function, format the answer.

Errors become exit codes here and nowhere else (DESIGN §2): 0 a normal stop, 1 a failure or a
refusal, 2 bad usage or a bad spec, 130 cancelled with Ctrl-C.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import click

from controller.cli.show import print_feedback, print_finish, print_run, print_runs, turns_tsv
from controller.domain.errors import CrucibleError, NotFoundError, RefusedError, SpecError

if TYPE_CHECKING:
    from controller.cli.remote import ApiClient
    from controller.config.options import RunOptions
    from controller.services.context import RunContext
    from controller.services.loop import LoopResult
    from controller.wiring import Root

# Imports of the layers below happen inside the commands: ``crucible --help`` and ``crucible runs list``
# must not pay for FastAPI, the forge, Alembic or (until a command touches the store) SQLAlchemy
# (ADR-0005 decision 6; ``tests/cli/test_startup.py`` pins it).

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130
EXIT_TERMINATED = 143  # 128 + SIGTERM: the process stopped, the run did not (it is resumable)


def _fail(code: int, message: str) -> NoReturn:
    click.echo(f"crucible: {message}", err=True)
    sys.exit(code)


def _root(environ: dict[str, str] | None = None) -> Root:
    """The composition root for this command: settings read from the environment once (ADR-0003)."""
    from controller.wiring import build

    return build(environ)


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, default=str))


def _exit_for(status: str) -> int:
    if status == "completed":
        return EXIT_OK
    if status == "cancelled":
        return EXIT_CANCELLED
    return EXIT_FAILED


def _client(server: str) -> ApiClient:
    from controller.cli.remote import ApiClient

    token = _root().settings.api.api_token
    return ApiClient(server, token.get_secret_value() if token is not None else None)


server_option = click.option(
    "--server", default=None, metavar="URL", help="ask a crucible controller (token: CRUCIBLE_API_TOKEN)"
)


def _interrupts_cancel(
    cancel_event: Any, detach: Any | None = None, wakeup: Any | None = None
) -> Callable[[], None]:
    """Ctrl-C sets the run's cancel event (the running command is killed, the turn restored, the run
    ends cancelled); a second Ctrl-C interrupts at once. SIGTERM (systemd, Kubernetes) detaches
    instead: the running command is killed, the run stays running and its lease is handed back, so
    ``crucible resume`` (or a server) continues it. Either wakes a watching run at once."""

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        if cancel_event.is_set():
            raise KeyboardInterrupt
        cancel_event.set()
        if wakeup is not None:
            wakeup.set()

    def on_terminate(signum: int, frame: FrameType | None) -> None:
        if detach is None:
            on_interrupt(signum, frame)
            return
        detach.set()
        cancel_event.set()
        if wakeup is not None:
            wakeup.set()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    previous_term = signal.signal(signal.SIGTERM, on_terminate)

    def undo() -> None:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)

    return undo


def _detached(run_id: str) -> NoReturn:
    _fail(
        EXIT_TERMINATED,
        f"stopped driving run {run_id} (terminated); it is still running: "
        f"`crucible resume {run_id}` continues it",
    )


def _finish_run(root: Root, run_id: str, result: LoopResult, as_json: bool) -> int:
    from controller.services.schemas import dump

    click.echo(result.message, err=True)
    view = dump(root.service().view(run_id))
    if as_json:
        _emit_json(view)
    else:
        print_finish(view)
    return _exit_for(str(result.status))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crucible")
def cli() -> None:
    """crucible: measured autoresearch loops that end in reviewable draft pull requests."""


@cli.command()
@click.option("--force", is_flag=True, help="overwrite an existing crucible.toml")
def init(force: bool) -> None:
    """Write a commented crucible.toml for the repository you stand in."""
    target = Path.cwd() / "crucible.toml"
    if target.exists() and not force:
        _fail(EXIT_USAGE, f"{target} exists (use --force to overwrite)")
    from controller.config.template import render_template

    target.write_text(render_template(Path.cwd()))
    click.echo(f"wrote {target}")


@cli.command()
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), default=Path("crucible.toml"))
@click.option(
    "--turns", type=click.IntRange(min=0), default=None, help="turns in round 0 (overrides the spec)"
)
@click.option("--dry-run", is_flag=True, help="validate, resolve and print what would run; run nothing")
@click.option("--json", "as_json", is_flag=True, help="print the run as one JSON object on stdout")
@click.option("--publish-prs", is_flag=True, help="publish kept candidates as draft PRs (not available yet)")
@click.option("--watch-feedback", is_flag=True, help="refine on review feedback (not available yet)")
@click.option("--listen", default=None, help="HOST:PORT for webhooks (with --watch-feedback)")
@click.option("--live-steer", is_flag=True)
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
        _fail(EXIT_USAGE, "--watch-feedback needs --publish-prs (feedback arrives on the published PRs)")
    if watch_feedback and load_spec(spec_path).feedback is None:
        _fail(EXIT_USAGE, "feedback: a [feedback] table is required with --watch-feedback")
    if listen and not watch_feedback:
        _fail(EXIT_USAGE, "--listen only makes sense with --watch-feedback")
    if live_steer and not watch_feedback:
        _fail(EXIT_USAGE, "--live-steer only makes sense with --watch-feedback")
    if server and (listen or live_steer):
        _fail(EXIT_USAGE, "--listen and --live-steer are for local runs (the server has its own endpoint)")
    if server and dashboard:
        _fail(EXIT_USAGE, "--dashboard is for local runs (the server serves its dashboard at /)")
    address = _dashboard_address(dashboard)
    spec = load_spec(spec_path)
    if server and not dry_run:  # the server validates the spec (and its sandbox) on its own machine
        from controller.cli.follow import submit_and_follow

        with _client(server) as client:
            sys.exit(submit_and_follow(client, spec_path, turns, publish_prs, watch_feedback, as_json))
    from controller.services.runs import check_sandbox

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
    root = _root()
    run_id = root.service().create(spec, spec_path.read_text(), spec_path.resolve(), options)
    click.echo(f"run {run_id} started", err=True)
    result = _drive(root, run_id, options, resume=False, dashboard=address)
    sys.exit(_finish_run(root, run_id, result, as_json))


def _announce_watch(ctx: RunContext, searched: LoopResult) -> None:
    click.echo(f"{searched.message}; now watching the pull requests for feedback", err=True)


def _dashboard_address(value: str | None) -> tuple[str, int] | None:
    """``--dashboard HOST:PORT`` checked before anything is created (exit 2 when malformed)."""
    if value is None:
        return None
    from controller.cli.dashboard import parse_address

    try:
        return parse_address(value)
    except ValueError as exc:
        _fail(EXIT_USAGE, str(exc))


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
    from controller.cli.listen import parse_listen, webhook_server
    from controller.services.context import Detached
    from controller.services.service import Signals

    service = root.service()
    cancel_event, detach, wakeup = threading.Event(), threading.Event(), threading.Event()
    undo = _interrupts_cancel(cancel_event, detach, wakeup)
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
            _detached(run_id)

    try:
        with ExitStack() as serving:
            if dashboard is not None:
                from controller.cli.dashboard import dashboard_server

                try:
                    link = serving.enter_context(
                        dashboard_server(root.settings, root.store(), run_id, *dashboard)
                    )
                except ValueError as exc:
                    _fail(EXIT_USAGE, str(exc))
                click.echo(f"dashboard (read-only): {link}", err=True)
            if options.listen is None:
                return go()
            try:
                host, port = parse_listen(options.listen)
            except ValueError as exc:
                _fail(EXIT_USAGE, str(exc))
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
    from controller.services.dryrun import dry_run
    from controller.wiring import process_environment

    plan = dry_run(spec, process_environment(), turns)
    as_json = "--json" in sys.argv
    if as_json:
        _emit_json(plan)
        return True
    click.echo(f"objective: {plan['objective']}")
    click.echo(f"turns: {plan['turns']}")
    for comp in plan["components"]:
        click.echo(f"component {comp['name']}: {comp['repo']} base {comp['base']} = {comp['base_sha']}")
        click.echo(f"  mutable files ({comp['mutable_count']}): {', '.join(comp['mutable_files'][:20])}")
        if comp["evaluator_files"]:
            click.echo(f"  evaluator files (protected): {', '.join(comp['evaluator_files'])}")
    agent = plan["agent"]
    click.echo(f"agent: {agent['command'] or 'builtin ' + str(agent['builtin'])}")
    for knob in agent["knobs"]:
        click.echo(f"  knob {knob['file']}:{knob['key']} in {knob['values']}")
    m = plan["metric"]
    click.echo(f"metric: {m['command']}  ({m['name']}, {m['direction']}, {m['samples']} samples)")
    click.echo(f"validation: {plan['validation'] or '-'}")
    click.echo(f"sandbox: {plan['sandbox']}")
    for problem in plan["sandbox_problems"]:  # reported, not fatal: init's placeholder agent is one
        click.echo(f"  cannot start: {problem}")
    click.echo("budget: " + ", ".join(f"{k}={v}" for k, v in plan["budget"].items() if v is not None))
    if plan["kubernetes"] is not None:
        click.echo(
            "kubernetes: round 0 would run in this Job, its token in this Secret (kubectl reads JSON):"
        )
        for manifest in plan["kubernetes"]:
            click.echo(json.dumps(manifest, indent=2))
    return True


@cli.group(invoke_without_command=True)
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
        with _client(server) as client:
            rows = client.runs(limit)
    else:
        rows = _local_runs(limit)
    if as_json:
        _emit_json(rows)
        return
    print_runs(rows)


def _local_runs(limit: int) -> list[dict[str, Any]]:
    """The runs list of the local database: the default SQLite file is read directly, without
    SQLAlchemy or pydantic (a tenth of the start-up cost, ADR-0013); any other database, or one to
    create or upgrade, goes through the run service."""
    from controller.services.summaries import quick_run_list
    from controller.wiring import configured_database, process_environment

    environ = process_environment()
    rows = quick_run_list(configured_database(environ), limit)
    if rows is not None:
        return rows
    from controller.services.schemas import dump

    listed: list[dict[str, Any]] = dump(_root(environ).service().list_runs(limit=limit))
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
        with _client(server) as client:
            if events:
                for event in client.events(run_id, follow=False):
                    click.echo(json.dumps(event))
                return
            view = client.run(run_id)
    else:
        from controller.services.schemas import dump

        service = _root().service()
        if events:
            click.echo(service.events_jsonl(run_id), nl=False)
            return
        view = dump(service.view(run_id, with_diffs=not tsv))
    if tsv:
        click.echo(turns_tsv(view["turns"]), nl=False)
    elif as_json:
        _emit_json(view)
    else:
        print_run(view)


@runs.command("resume-pr")
@click.argument("run_id")
@click.argument("component")
def runs_resume_pr(run_id: str, component: str) -> None:
    """Lift a pause on a PR: adopt its current head (never rewritten) and let crucible write again."""
    record = _root().service().resume_pull(run_id, component)
    click.echo(f"resumed {record.url} at {record.pushed_sha[:12]}")


@cli.command("feedback")
@click.argument("run_id")
@click.option("--replies", is_flag=True, help="the replies crucible drafted (never posted) for each comment")
@click.option("--json", "as_json", is_flag=True)
@server_option
def feedback_cmd(run_id: str, replies: bool, as_json: bool, server: str | None) -> None:
    """Feedback items with their verdicts; with --replies, the drafted replies."""
    if server:
        with _client(server) as client:
            view = client.feedback(run_id)
    else:
        from controller.services.schemas import dump

        view = dump(_root().service().feedback(run_id))
    if as_json:
        _emit_json(view)
        return
    print_feedback(view, replies)


@cli.command()
@click.argument("run_id")
@server_option
def patch(run_id: str, server: str | None) -> None:
    """Print the final patch (read-only): one unified diff per component."""
    if server:
        with _client(server) as client:
            click.echo(client.patch(run_id), nl=False)
        return
    click.echo(_root().service().patch(run_id), nl=False)


@cli.command("accept")
@click.argument("run_id")
def accept_cmd(run_id: str) -> None:
    """Apply the final patch to your checkout as uncommitted changes."""
    applied = _root().service().accept(run_id)
    click.echo(f"applied to: {', '.join(applied)}" if applied else "nothing to apply: the run kept no change")


@cli.command("cancel")
@click.argument("run_id")
@server_option
def cancel_cmd(run_id: str, server: str | None) -> None:
    """Cancel a run."""
    if server:
        with _client(server) as client:
            click.echo(client.cancel(run_id))
        return
    click.echo(_root().service().cancel(run_id))


@cli.command("resume")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
@click.option("--dashboard", default=None, metavar="HOST:PORT", help="as for crucible loop")
@server_option
def resume_cmd(run_id: str, as_json: bool, dashboard: str | None, server: str | None) -> None:
    """Continue a run after a crash or a cancel; a turn cut off mid-way is run again from its start.

    A run started with --watch-feedback goes on watching (and serving --listen) where it was."""
    if server and dashboard:
        _fail(EXIT_USAGE, "--dashboard is for local runs (the server serves its dashboard at /)")
    if server:
        with _client(server) as client:
            click.echo(client.resume(run_id))
        return
    address = _dashboard_address(dashboard)
    root = _root()
    result = _drive(root, run_id, root.service().options(run_id), resume=True, dashboard=address)
    sys.exit(_finish_run(root, run_id, result, as_json))


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

    root = _root()
    root.inline = False  # one thread per round: the scheduler drives runs side by side
    settings = root.settings
    if settings.api.api_token is None:
        _fail(EXIT_USAGE, "CRUCIBLE_API_TOKEN: required (the bearer token of the operator API)")
    readonly = settings.api.api_readonly_token
    secret = settings.webhooks.webhook_secret
    if secret is None:
        click.echo("warning: CRUCIBLE_WEBHOOK_SECRET is not set: webhooks are refused (503)", err=True)
    # The worker API first: the Kubernetes broker of the service mints its tokens there.
    remote = root.worker_api(f"http://{_reachable(host)}:{port}")
    app, _scheduler = serve_app(
        root.service(),
        ApiTokens(
            settings.api.api_token.get_secret_value(),
            readonly.get_secret_value() if readonly is not None else None,
        ),
        max_concurrent_runs=max_concurrent_runs or settings.scheduler.max_concurrent_runs,
        webhook_secret=secret.get_secret_value() if secret is not None else None,
        forge_for=root.forges.for_spec,
        forge_usage=root.forges.usage,
        remote=remote,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    run_server(app, host, port)


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

    from controller.services.worker import run_worker, worker_config
    from controller.wiring import process_environment

    environ = process_environment()
    config = worker_config(
        environ, controller=controller_url, run_id=run_id, round=round_number, workdir=workdir
    )
    config.workdir.mkdir(parents=True, exist_ok=True)
    cancel = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        # The round ends cancelled (its running command killed, the turn restored) and is reported.
        cancel.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    outcome = run_worker(config, environ, cancel=cancel)
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
    store = _root().upgraded_store()
    click.echo(f"database at revision {store.current_revision()}")


@cli.command()
@click.option("--turns", default=8, type=click.IntRange(min=1), help="turns in round 0")
@click.option("--json", "as_json", is_flag=True)
@click.option("--keep", "keep_dir", type=click.Path(path_type=Path), default=None, help="work here, keep it")
@click.option(
    "--kubernetes",
    is_flag=True,
    help="run the search round as a Job on the Kubernetes control plane CRUCIBLE_KUBECONFIG names",
)
def demo(turns: int, as_json: bool, keep_dir: Path | None, kubernetes: bool) -> None:
    """The whole loop end to end on embedded defaults, offline."""
    from contextlib import ExitStack

    from controller.cli.display import TableObserver
    from controller.config.settings import Settings
    from controller.forge.base import Forge
    from controller.services.demo import run_demo
    from controller.services.service import RunService
    from controller.wiring import build

    root = _root()
    if kubernetes:
        _require_control_plane(root.settings)
    stack = ExitStack()

    def services(settings: Settings, forge: Forge) -> RunService:
        settings = settings.model_copy(update={"kubernetes": root.settings.kubernetes})
        demo_root = build(root.environ, settings=settings, forge_for=lambda spec: forge)
        if kubernetes:
            from controller.api.worker_serve import serving, worker_app
            from controller.services.remote_rounds import RemoteRounds

            remote = RemoteRounds(settings, demo_root.store(), controller_url="http://127.0.0.1")
            remote.controller_url = stack.enter_context(serving(worker_app(remote)))
            demo_root.remote_rounds = remote
        return demo_root.service()

    with stack:
        code = run_demo(
            turns=turns,
            as_json=as_json,
            workdir=keep_dir,
            observer=TableObserver(),
            environ=root.environ,
            services=services,
            kubernetes=kubernetes,
        )
    sys.exit(code)


K8S_HINT = """crucible demo --kubernetes needs a Kubernetes control plane: {problem}
On this machine, from a crucible checkout:
  bash scripts/k8s/up                  # a real API server, etcd and Job controller on 127.0.0.1
  eval "$(bash scripts/k8s/env)"
  CRUCIBLE_KUBECONFIG=$CRUCIBLE_K8S_KUBECONFIG crucible demo --kubernetes
Or point CRUCIBLE_KUBECONFIG at any cluster whose nodes can reach this machine."""


def _require_control_plane(settings: Any) -> None:
    from controller.brokers.kubernetes.connect import unreachable

    problem = unreachable(settings.kubernetes.kubeconfig, settings.kubernetes.kube_namespace)
    if problem is not None:
        click.echo(K8S_HINT.format(problem=problem), err=True)
        sys.exit(EXIT_USAGE)


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
        _fail(EXIT_CANCELLED, "cancelled")
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except SpecError as exc:
        _fail(EXIT_USAGE, f"bad spec: {exc}")
    except NotFoundError as exc:
        _fail(EXIT_USAGE, str(exc))
    except RefusedError as exc:
        _fail(EXIT_FAILED, f"refused: {exc}")
    except CrucibleError as exc:
        _fail(EXIT_FAILED, str(exc))
    except KeyboardInterrupt:
        _fail(EXIT_CANCELLED, "cancelled")


if __name__ == "__main__":
    main()

"""What every ``crucible`` command shares: exit codes, the composition root, JSON output, the
``--server`` client, and the signal handling that makes Ctrl-C a cancel and SIGTERM a detach.

Kept apart from the commands so ``main`` (the run commands) and ``runs`` (inspecting runs) stay
small; like them it imports nothing heavy at module level (``crucible --help`` pays only for click).
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import click

from controller.cli.show import print_finish

if TYPE_CHECKING:
    from controller.cli.remote import ApiClient
    from controller.services.execution.loop import LoopResult
    from controller.wiring import Root

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130
EXIT_TERMINATED = 143  # 128 + SIGTERM: the process stopped, the run did not (it is resumable)


def fail(code: int, message: str) -> NoReturn:
    click.echo(f"crucible: {message}", err=True)
    sys.exit(code)


def build_root(environ: dict[str, str] | None = None, **wiring: Any) -> Root:
    """The composition root for this command: settings read from the environment once (ADR-0003);
    ``wiring``: ``build``'s keywords (the mode, the address the worker API listens on)."""
    from controller.wiring import build

    return build(environ, **wiring)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, default=str))


def exit_for(status: str) -> int:
    if status == "completed":
        return EXIT_OK
    if status == "cancelled":
        return EXIT_CANCELLED
    return EXIT_FAILED


def api_client(server: str) -> ApiClient:
    from controller.cli.remote import ApiClient

    token = build_root().settings.api.api_token
    return ApiClient(server, token.get_secret_value() if token is not None else None)


server_option = click.option(
    "--server", default=None, metavar="URL", help="ask a crucible controller (token: CRUCIBLE_API_TOKEN)"
)


def interrupts_cancel(
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


def detached_exit(run_id: str) -> NoReturn:
    fail(
        EXIT_TERMINATED,
        f"stopped driving run {run_id} (terminated); it is still running: "
        f"`crucible resume {run_id}` continues it",
    )


def finish_run(root: Root, run_id: str, result: LoopResult, as_json: bool) -> int:
    from controller.services.views.schemas import dump

    click.echo(result.message, err=True)
    view = dump(root.reader().view(run_id))
    if as_json:
        emit_json(view)
    else:
        print_finish(view)
    return exit_for(str(result.status))


def dashboard_address(value: str | None) -> tuple[str, int] | None:
    """``--dashboard HOST:PORT`` checked before anything is created (exit 2 when malformed)."""
    if value is None:
        return None
    from controller.cli.dashboard import parse_address

    try:
        return parse_address(value)
    except ValueError as exc:
        fail(EXIT_USAGE, str(exc))

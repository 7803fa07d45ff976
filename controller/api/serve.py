"""``crucible serve``: the controller service in one process: the REST API, the webhook endpoint, the
scheduler that drives runs, and the feedback hub that processes stored webhook deliveries and polls.

uvicorn runs in the main thread and turns SIGTERM/SIGINT into a graceful shutdown (at most
``GRACEFUL_S`` for open requests, such as event streams); the app's lifespan then stops the scheduler
(no new claims; every driven run detached and its lease handed back, at most ``SHUTDOWN_S``), the hub,
and last the webhook writer, so every delivery answered 2xx is stored. The whole stays within the 20 s
Kubernetes and systemd leave before SIGKILL. On start the hub processes what an earlier process
stored and answered but did not process.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.api.ops import ServiceStats
from controller.api.stopping import StoppingServer
from controller.forge.base import ForgeUsage
from controller.services.control.admission import Admission
from controller.services.control.scheduler import Scheduler
from controller.services.control.service import RunService
from controller.services.control.submit import ForgeFactory
from controller.services.remote.remote_rounds import RemoteRounds
from controller.store.store import Store

log = logging.getLogger("crucible.serve")

GRACEFUL_S = 4  # open requests (event streams) get this long once SIGTERM arrives
SHUTDOWN_S = 10.0  # the scheduler's threads get this long to detach their runs


def serve_app(
    service: RunService,
    store: Store,
    tokens: ApiTokens,
    *,
    max_concurrent_runs: int,
    webhook_secret: str | None,
    forge_for: ForgeFactory | None = None,
    forge_usage: Callable[[], Mapping[str, ForgeUsage]] = dict,
    tick_s: float = 1.0,
    remote: RemoteRounds | None = None,
    park_watching: bool = True,
    admission: Admission | None = None,
) -> tuple[FastAPI, Scheduler]:
    """The app of ``crucible serve`` over the run service the composition root built (its broker
    must run rounds concurrently), with the scheduler and the service's feedback hub tied to the
    app's lifespan, and ``store`` (the one the root built for both) under the API's reads.
    ``forge_usage``: per forge API URL, what its client spent (``/metrics``)."""
    hub = service.hub
    scheduler = Scheduler(service, max_concurrent_runs=max_concurrent_runs, tick_s=tick_s, park=park_watching)
    stats = ServiceStats(
        leases_held=scheduler.leases_held,
        broker_rounds=lambda: scheduler.rounds_launched,
        forges=forge_usage,
    )
    app = create_app(
        service.settings,
        store,
        tokens,
        scheduler,
        webhook_secret=webhook_secret,
        on_delivery=hub.wake,
        stats=stats,
        forge_for=forge_for,
        remote=remote,
        admission=admission,
    )
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[None]:
        async with inner(application):  # the webhook writer: stopped last, after what it accepted is stored
            hub.start()
            scheduler.start()
            try:
                yield
            finally:
                stuck = scheduler.stop(SHUTDOWN_S)
                if stuck:
                    log.warning("runs still stopping at shutdown (their leases expire): %s", stuck)
                hub.stop()

    app.router.lifespan_context = lifespan
    return app, scheduler


def run_server(app: FastAPI, host: str, port: int, remote: RemoteRounds | None = None) -> None:
    """Serve until SIGTERM or SIGINT (uvicorn's handlers), then shut down gracefully; the warm pods'
    long polls on ``remote``'s slots end as the shutdown begins (``stopping``)."""
    config = uvicorn.Config(
        app, host=host, port=port, lifespan="on", log_level="info", timeout_graceful_shutdown=GRACEFUL_S
    )
    StoppingServer(config, remote.close_waits if remote is not None else None).run()

"""The worker routes alone, served from a thread of this process, for a controller that drives
Kubernetes rounds without ``crucible serve`` (``crucible demo --kubernetes``): its loop pods need an API
to fetch their round from and report to (ADR-0014, ADR-0015)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from controller.api import errors
from controller.api.head import HeadAsGet
from controller.api.stopping import StoppingServer
from controller.api.worker import worker_router
from controller.services.remote.remote_rounds import RemoteRounds

START_S = 15.0


def worker_app(remote: RemoteRounds) -> FastAPI:
    """An app with only the worker routes (each request needs its round's worker token)."""
    app = FastAPI(title="crucible worker API", docs_url=None, redoc_url=None, openapi_url=None)
    errors.install(app)
    app.include_router(worker_router(remote))
    app.add_middleware(HeadAsGet)  # HEAD wherever GET, as crucible serve's app answers
    return app


@contextmanager
def serving(
    app: FastAPI, host: str = "127.0.0.1", on_stop: Callable[[], None] | None = None
) -> Iterator[str]:
    """Serve ``app`` on a free port of ``host`` for the ``with`` block; yields its base URL.
    ``on_stop``: called as the server begins to stop, before it waits for open requests
    (``Slots.close`` ends the warm pods' long polls; ``stopping`` says why)."""
    sock = socket.socket()
    sock.bind((host, 0))
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = StoppingServer(config, on_stop)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="worker-api", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the worker API did not start")
            time.sleep(0.01)
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=START_S)
        sock.close()

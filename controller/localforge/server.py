"""Running the forge: ``serve`` for the command line and ``running_forge`` for tests and the demo.

``running_forge`` starts uvicorn in a background thread on a socket it binds itself (port 0 picks
a free port, known before the server starts) and stops it cleanly on exit.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from controller.localforge.app import create_app
from controller.localforge.faults import FaultPlan
from controller.localforge.httpkit import Services


def serve(
    root: Path,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    webhook_url: str | None = None,
    webhook_secret: str | None = None,
    public_url: str | None = None,
    log_level: str = "info",
) -> None:
    """Serve the forge in the foreground until interrupted."""
    app = create_app(root, webhook_url=webhook_url, webhook_secret=webhook_secret, public_url=public_url)
    config = uvicorn.Config(app, log_level=log_level, ws="none", http="h11", lifespan="on", date_header=False)
    with _listening(host, port) as sock:
        uvicorn.Server(config).run(sockets=[sock])


@dataclass(frozen=True)
class ForgeHandle:
    """A forge running in this process: its URLs, root and live objects."""

    url: str
    api_url: str
    root: Path
    app: FastAPI

    @property
    def services(self) -> Services:
        found: Services = self.app.state.services
        return found

    @property
    def faults(self) -> FaultPlan:
        plan: FaultPlan = self.app.state.faults
        return plan

    def flush_webhooks(self, timeout: float = 10.0) -> bool:
        """Wait until every queued webhook delivery was attempted."""
        return self.services.forge.dispatcher.flush(timeout)


@contextmanager
def running_forge(
    root: Path, *, host: str = "127.0.0.1", port: int = 0, **options: Any
) -> Iterator[ForgeHandle]:
    """Run ``create_app(root, **options)`` on ``host:port`` in a thread for the ``with`` block."""
    app = create_app(root, **options)
    with serve_in_thread(app, host=host, port=port) as url:
        yield ForgeHandle(url, f"{url}/api/v3", root, app)


@contextmanager
def serve_in_thread(app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve any ASGI app (e.g. the forge wrapped by a test's middleware); yields its URL."""
    config = uvicorn.Config(app, log_level="warning", ws="none", http="h11", lifespan="on", date_header=False)
    server = uvicorn.Server(config)
    with _listening(host, port) as sock:
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="localforge", daemon=True
        )
        thread.start()
        try:
            deadline = time.monotonic() + 15
            while not server.started:
                if not thread.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError("the local forge did not start")
                time.sleep(0.01)
            yield f"http://{host}:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True
            thread.join(timeout=15)


@contextmanager
def _listening(host: str, port: int) -> Iterator[socket.socket]:
    """A bound TCP socket with Nagle off: answers are written in pieces, and Nagle plus the
    client's delayed ACK would add 40 ms to every keep-alive request."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        yield sock
    finally:
        sock.close()

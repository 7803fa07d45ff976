"""Running the forge: ``serve`` for the command line and ``running_forge`` for tests and the demo.

``running_forge`` starts uvicorn in a background thread on a socket it binds itself (port 0 picks
a free port, known before the server starts) and stops it cleanly on exit.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from controller.localforge.app import create_app
from controller.localforge.faults import FaultPlan
from controller.localforge.httpkit import Services
from controller.localforge.tls import TlsFiles, ensure_certificate, trust_hint


def serve(
    root: Path,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    webhook_url: str | None = None,
    webhook_secret: str | None = None,
    public_url: str | None = None,
    log_level: str = "info",
    tls: bool = False,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the forge in the foreground until interrupted; with ``tls``, https with the forge's
    self-signed certificate, after ``announce`` was given how to trust it."""
    app = create_app(root, webhook_url=webhook_url, webhook_secret=webhook_secret, public_url=public_url)
    files = ensure_certificate(root, host) if tls else None
    config = _config(app, files, log_level)
    with _listening(host, port) as sock:
        if files is not None:
            shown = "127.0.0.1" if host in {"0.0.0.0", ""} else host
            announce(trust_hint(files, f"https://{shown}:{sock.getsockname()[1]}"))
        uvicorn.Server(config).run(sockets=[sock])


def _config(app: ASGIApp, files: TlsFiles | None, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_level=log_level,
        ws="none",
        http="h11",
        lifespan="on",
        date_header=False,
        ssl_certfile=str(files.cert) if files else None,
        ssl_keyfile=str(files.key) if files else None,
    )


@dataclass(frozen=True)
class ForgeHandle:
    """A forge running in this process: its URLs, root and live objects."""

    url: str
    api_url: str
    root: Path
    app: FastAPI
    ca_file: Path | None = None  # with ``tls``: the certificate a client must trust

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
    root: Path, *, host: str = "127.0.0.1", port: int = 0, tls: bool = False, **options: Any
) -> Iterator[ForgeHandle]:
    """Run ``create_app(root, **options)`` on ``host:port`` in a thread for the ``with`` block
    (``tls``: over https with the forge's certificate, ``ca_file`` on the handle)."""
    app = create_app(root, **options)
    files = ensure_certificate(root, host) if tls else None
    with serve_in_thread(app, host=host, port=port, tls=files) as url:
        yield ForgeHandle(url, f"{url}/api/v3", root, app, files.cert if files else None)


@contextmanager
def serve_in_thread(
    app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0, tls: TlsFiles | None = None
) -> Iterator[str]:
    """Serve any ASGI app (e.g. the forge wrapped by a test's middleware); yields its URL."""
    server = _PromptServer(_config(app, tls, "warning"))
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
            yield f"{'https' if tls else 'http'}://{host}:{sock.getsockname()[1]}"
        finally:
            server.stop()
            thread.join(timeout=GRACE_S + 5)


GRACE_S = 10.0  # how long a stopping forge lets the requests in flight finish before cancelling them


class _PromptServer(uvicorn.Server):
    """uvicorn's server, stopped as soon as ``stop`` is called.

    uvicorn looks at ``should_exit`` every 0.1 s and then pauses another fixed 0.1 s before it waits
    for the open connections: about 0.15 s each time a test's forge stops, which the suite paid some
    thousand times. Here ``stop`` wakes the loop at once and the drain polls every 5 ms; what is
    drained is the same (stop accepting, close idle keep-alive connections, let requests in flight
    finish for up to ``GRACE_S``, then the app's lifespan shutdown).
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken: asyncio.Event | None = None

    def stop(self) -> None:
        """Ask the server to stop (from any thread); ``run`` returns once it has."""
        self.should_exit = True
        loop, woken = self._loop, self._woken
        if loop is not None and woken is not None:
            with suppress(RuntimeError):  # the loop is closed already: the server has stopped
                loop.call_soon_threadsafe(woken.set)

    async def main_loop(self) -> None:
        self._woken = asyncio.Event()
        self._loop = asyncio.get_running_loop()  # after the event: ``stop`` needs both
        await self.on_tick(0)  # uvicorn's first tick sets the default headers
        if not self.should_exit:  # else ``stop`` ran before ``_loop`` was set and will not wake us
            await self._woken.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()  # an idle keep-alive connection closes now, a busy one after its answer
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GRACE_S
        while (state.connections or state.tasks) and loop.time() < deadline:
            await asyncio.sleep(0.005)
        for task in state.tasks:
            task.cancel(msg="the local forge stopped")
        await self.lifespan.shutdown()


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

"""``--dashboard HOST:PORT``: serve the run's dashboard in this process while a local loop drives it.

uvicorn runs in a daemon thread on a socket bound here (so port 0 works and the printed address is
the real one). Leaving the ``with`` block stops it within a few seconds even with browsers still
following the run's event stream: open streams get ``GRACE_S`` to end, then are cut, so SIGTERM and
Ctrl-C keep ending the process promptly.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from controller.api.dashboard.local import local_dashboard
from controller.config.settings import Settings
from controller.store.ports import RunViews

GRACE_S = 2
START_S = 15.0


def parse_address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--dashboard wants HOST:PORT (port 0 picks a free one), got {value!r}")
    return host, int(port)


@contextmanager
def dashboard_server(settings: Settings, store: RunViews, run_id: str, host: str, port: int) -> Iterator[str]:
    """Serve ``run_id``'s read-only dashboard on host:port for the block; yields the login link."""
    dashboard = local_dashboard(settings, store, run_id)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ValueError(f"--dashboard: cannot listen on {host}:{port}: {exc.strerror}") from exc
    config = uvicorn.Config(
        dashboard.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=GRACE_S
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="crucible-dashboard", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + START_S
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        yield dashboard.link(f"http://{shown}:{sock.getsockname()[1]}")
    finally:
        server.should_exit = True
        thread.join(timeout=GRACE_S + 3)
        sock.close()

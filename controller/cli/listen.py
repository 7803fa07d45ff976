"""``--listen HOST:PORT``: serve the webhook endpoint in this process while a run watches feedback.

The route only verifies, stores and wakes the watch loop; processing happens in the loop, so a slow
round never delays GitHub's 10-second delivery deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import uvicorn
from fastapi import FastAPI

from controller.api.delivery_writer import DeliveryWriter
from controller.api.webhooks import webhook_router
from controller.api.writer_process import ProcessSink
from controller.store.store import Store


def parse_listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--listen wants HOST:PORT, got {value!r}")
    return host, int(port)


@contextmanager
def webhook_server(
    store: Store, secret: str | None, host: str, port: int, on_delivery: Callable[[], None]
) -> Iterator[str]:
    """Serve POST /webhooks/github on host:port for the ``with`` block; yields the base URL.

    Lifespan events are on: they start and stop the route's delivery writer, so leaving the block
    stores what was accepted and ends the writer's thread along with the server's.
    """
    app = FastAPI(title="crucible webhooks", docs_url=None, redoc_url=None, openapi_url=None)
    # Parsing and storing run in a child process: the server's own process keeps its interpreter
    # lock for HTTP (ADR-0002 decision 12).
    writer = DeliveryWriter(ProcessSink(store.url))
    app.include_router(webhook_router(store, secret, on_delivery=on_delivery, writer=writer))
    with serve_in_thread(app, host, port, lifespan="on", name="crucible-webhooks") as url:
        yield url


@contextmanager
def serve_in_thread(
    app: FastAPI, host: str, port: int, *, lifespan: Literal["on", "off"], name: str
) -> Iterator[str]:
    """``app`` served by uvicorn in a daemon thread for the ``with`` block (also the benchmark's
    floor, so both arms run with the same server settings); yields the base URL."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan=lifespan)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)

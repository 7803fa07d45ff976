"""Fixtures of the webhook tests: the endpoint served by a real uvicorn server on a loopback socket."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from controller.api.webhooks import webhook_router
from controller.localforge.server import serve_in_thread
from controller.store import Store
from tests.webhooks.helpers import SECRET, Client


@pytest.fixture
def client_for() -> Iterator[Client]:
    """``client_for(store, secret=SECRET, **options)``: an HTTP client of a real uvicorn server
    (loopback socket, lifespan on) serving ``webhook_router(store, secret, **options)``; the
    servers stop when the test ends."""
    with ExitStack() as stack:

        def build(store: Store, secret: str | None = SECRET, **options: Any) -> httpx.Client:
            app = FastAPI()
            app.include_router(webhook_router(store, secret, **options))
            url = stack.enter_context(serve_in_thread(app))
            return stack.enter_context(httpx.Client(base_url=url, timeout=30))

        yield build

"""``POST /webhooks/github``: the HTTP edge of the feedback intake (docs/api.md).

It only authenticates, bounds and stores: the signature is verified over the raw body before any
parsing (constant time), the delivery is stored durably, and the answer (202) goes out once it is;
the work happens later in ``services.feedback.intake.process_deliveries``, woken by ``on_delivery``.
GitHub never retries a failed delivery, so the answer must be fast and the storing must be
durable; a refused delivery (401, 400, 413, 503) changes nothing.

Storing goes through one ``DeliveryWriter`` per router (``delivery_writer.py``): the route hands
the raw body over and awaits its future, and the writer parses and commits whatever has gathered in
one transaction, through its sink: in this process (``StoreSink``, the default) or in a child
process (``writer_process.ProcessSink``, which ``crucible loop --listen`` uses so that parsing and
storing do not share this process's interpreter lock with HTTP; ADR-0002 decisions 11 and 12). The
payload is stored as the body's own text whenever the body is UTF-8 (GitHub always sends UTF-8
JSON), so it reads back as the object that was parsed. The route is a plain ASGI endpoint on a
Starlette ``Route``: the intake's hot path skips FastAPI's per-request machinery. The writer runs
for the router's lifespan: the app must be served with lifespan events on (``cli/listen.py``
does), otherwise every delivery gets 503.

Status codes: 503 no secret configured, database busy, writer not running, too many deliveries
waiting or too many bodies being read (``max_reading``); 408 a body not complete within
``body_deadline_s`` (a slow client must not hold a slot forever); 413 body over ``max_bytes``
(Content-Length first, then the bytes actually read); 401 missing or wrong
``X-Hub-Signature-256``; 400 missing ``X-GitHub-Event``/``X-GitHub-Delivery`` or a body that is
not a JSON object (configure the hook with content type ``application/json``); 200 for ``ping``;
202 ``{"status": "queued"}`` or ``{"status": "duplicate"}`` (a delivery id seen
before) for everything else, known or not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from controller.api.delivery_writer import DeliveryWriter, Outcome, Overloaded, RawDelivery, StoreSink
from controller.api.payloads import json_object
from controller.domain.errors import RetryLaterError
from controller.forge.webhooks import verify_signature
from controller.store.ports import DeliveryQueue

DEFAULT_MAX_BYTES = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB
MAX_HEADER_CHARS = 64  # delivery ids are GUIDs, event names short words
# GitHub sends a whole delivery within a few seconds and gives up after 10 s: a body still arriving
# after this long is a slow-loris client, answered 408 so it frees its slot.
BODY_DEADLINE_S = 10.0
# Bodies read at once; beyond that a delivery is refused at once with 503 rather than queued behind
# half-sent bodies (1,100 of them made a signed delivery wait 15 s).
MAX_READING = 64

log = logging.getLogger(__name__)


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    """The client went away before its body was complete: nobody is left to answer."""


def webhook_router(
    store: DeliveryQueue,
    secret: str | None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    on_delivery: Callable[[], None] | None = None,
    writer: DeliveryWriter | None = None,
    body_deadline_s: float = BODY_DEADLINE_S,
    max_reading: int = MAX_READING,
) -> APIRouter:
    """A router serving ``POST /webhooks/github`` into ``store`` (see the module docstring).

    ``secret`` None or empty refuses every delivery with 503. ``on_delivery`` is called after the
    answer is sent, once per newly stored delivery: a wake-up for the processor, not the processing.
    It runs on the event loop (a thread handoff per delivery cost more than the wake-up), so it must
    return at once, as ``threading.Event.set`` does.
    ``writer`` (default: a new ``DeliveryWriter(StoreSink(store))``) is started and stopped by the router's
    lifespan, so it lives exactly as long as the app that includes the router is served.
    A body must arrive within ``body_deadline_s`` (else 408) and at most ``max_reading`` bodies are
    read at once (else 503); a client that disconnects mid-body is dropped with one debug line.
    """
    key = secret.encode() if secret else b""
    reading = 0
    writer = writer if writer is not None else DeliveryWriter(StoreSink(store))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        writer.start()
        try:
            yield
        finally:
            writer.stop()

    router = APIRouter(lifespan=lifespan)

    async def decide(request: Request) -> tuple[Response, bool]:
        """The answer to one delivery, and whether it was newly stored (to wake the processor)."""
        nonlocal reading
        if not key:
            return _error(503, "webhook secret not configured; refusing every delivery"), False
        if reading >= max_reading:
            return _error(503, f"{max_reading} deliveries are being received; try again"), False
        reading += 1
        try:
            body = await asyncio.wait_for(_read_body(request, max_bytes), body_deadline_s)
        except _TooLarge:
            return _error(413, f"payload larger than {max_bytes} bytes"), False
        except TimeoutError:
            return _error(408, f"the body did not arrive within {body_deadline_s:g} s"), False
        finally:
            reading -= 1
        if not verify_signature(key, body, request.headers.get("x-hub-signature-256")):
            return _error(401, "missing or invalid X-Hub-Signature-256"), False
        event = request.headers.get("x-github-event", "")
        delivery = request.headers.get("x-github-delivery", "")
        if not _valid_header(event) or not _valid_header(delivery):
            return _error(400, "missing or invalid X-GitHub-Event / X-GitHub-Delivery"), False
        if event == "ping":
            if json_object(body) is None:
                return _error(400, "body is not a JSON object"), False
            return JSONResponse({"status": "pong"}, status_code=200), False
        try:
            outcome = await writer.save(RawDelivery(delivery, event, body))
        except Overloaded as exc:
            return _error(503, f"{exc}; delivery not stored"), False
        except RetryLaterError:
            return _error(503, "database busy; delivery not stored"), False
        if outcome is Outcome.MALFORMED:
            return _error(400, "body is not a JSON object"), False
        if outcome is Outcome.DUPLICATE:
            return JSONResponse({"status": "duplicate"}, status_code=202), False
        return JSONResponse({"status": "queued"}, status_code=202), True

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        # A plain ASGI endpoint: the intake's hot path skips FastAPI's per-request machinery
        # (dependency solving, response validation), which cost as much as storing the delivery.
        try:
            response, stored = await decide(Request(scope, receive))
        except _Gone:
            log.debug("webhook client disconnected before its body was complete")
            return
        await response(scope, receive, send)
        if stored and on_delivery is not None:
            on_delivery()  # after the answer went out: a wake-up, not the processing

    router.routes.append(
        Route("/webhooks/github", _Asgi(endpoint), methods=["POST"], include_in_schema=False)
    )
    return router


class _Asgi:
    """Marks a coroutine function as a raw ASGI app (Starlette wraps plain functions as
    request -> response endpoints)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


async def _read_body(request: Request, max_bytes: int) -> bytes:
    """The raw body, refusing (``_TooLarge``) before reading when Content-Length is over the cap and
    while reading when the bytes are (a missing or lying Content-Length cannot get past it)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise _TooLarge
            chunks.append(chunk)
    except ClientDisconnect as exc:
        raise _Gone from exc
    return b"".join(chunks)


def _valid_header(value: str) -> bool:
    return 0 < len(value) <= MAX_HEADER_CHARS and value.isprintable() and value.strip() == value


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)

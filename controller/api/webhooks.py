"""``POST /webhooks/github``: the HTTP edge of the feedback intake (DESIGN.md section 8).

It only authenticates, bounds and stores: the signature is verified over the raw body before any
parsing (constant time), the delivery is stored durably, and the answer (202) goes out at once;
the work happens later in ``services.intake.process_deliveries``, woken by ``on_delivery``.
GitHub never retries a failed delivery, so the answer must be fast and the storing must be
durable; a refused delivery (401, 400, 413, 503) changes nothing.

Status codes: 503 no secret configured; 413 body over ``max_bytes`` (Content-Length first, then
the bytes actually read); 401 missing or wrong ``X-Hub-Signature-256``; 400 missing
``X-GitHub-Event``/``X-GitHub-Delivery`` or a body that is not a JSON object (configure the hook
with content type ``application/json``); 200 for ``ping``; 202 ``{"status": "queued"}`` or
``{"status": "duplicate"}`` (a delivery id seen before) for everything else, known or not.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from controller.domain.errors import RetryLaterError
from controller.forge.webhooks import verify_signature
from controller.store import Store

DEFAULT_MAX_BYTES = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB
MAX_HEADER_CHARS = 64  # delivery ids are GUIDs, event names short words


class _TooLarge(Exception):
    pass


def webhook_router(
    store: Store,
    secret: str | None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    on_delivery: Callable[[], None] | None = None,
) -> APIRouter:
    """A router serving ``POST /webhooks/github`` into ``store`` (see the module docstring).

    ``secret`` None or empty refuses every delivery with 503. ``on_delivery`` is called after the
    answer is sent, once per newly stored delivery: a wake-up for the processor, not the processing.
    """
    router = APIRouter()
    key = secret.encode() if secret else b""

    @router.post("/webhooks/github")
    async def receive(request: Request) -> JSONResponse:
        if not key:
            return _error(503, "webhook secret not configured; refusing every delivery")
        try:
            body = await _read_body(request, max_bytes)
        except _TooLarge:
            return _error(413, f"payload larger than {max_bytes} bytes")
        if not verify_signature(key, body, request.headers.get("x-hub-signature-256")):
            return _error(401, "missing or invalid X-Hub-Signature-256")
        event = request.headers.get("x-github-event", "")
        delivery = request.headers.get("x-github-delivery", "")
        if not _valid_header(event) or not _valid_header(delivery):
            return _error(400, "missing or invalid X-GitHub-Event / X-GitHub-Delivery")
        payload = _json_object(body)
        if payload is None:
            return _error(400, "body is not a JSON object")
        if event == "ping":
            return JSONResponse({"status": "pong"}, status_code=200)
        action = payload.get("action")
        try:
            stored = await run_in_threadpool(
                store.save_delivery, delivery, event, action if isinstance(action, str) else None, payload
            )
        except RetryLaterError:
            return _error(503, "database busy; delivery not stored")
        if not stored:
            return JSONResponse({"status": "duplicate"}, status_code=202)
        wake = BackgroundTask(on_delivery) if on_delivery is not None else None
        return JSONResponse({"status": "queued"}, status_code=202, background=wake)

    return router


async def _read_body(request: Request, max_bytes: int) -> bytes:
    """The raw body, refusing (``_TooLarge``) before reading when Content-Length is over the cap and
    while reading when the bytes are (a missing or lying Content-Length cannot get past it)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _valid_header(value: str) -> bool:
    return 0 < len(value) <= MAX_HEADER_CHARS and value.isprintable() and value.strip() == value


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(body, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return payload if isinstance(payload, dict) else None


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)

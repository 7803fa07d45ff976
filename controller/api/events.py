"""``GET /api/runs/{id}/events``: the run's event stream as Server-Sent Events.

Each event goes out as ``id: <event id>``, ``event: <kind>`` and ``data: <the JSONL line>``. Event ids
grow per run in commit order (the store serialises a run's writers), so a client that reconnects with
``Last-Event-ID: N`` (or ``?after=N``) gets exactly the events after N: none missed, none twice. The
stream polls the store, sends a comment as a keep-alive when idle, and ends once the run is finished
and every event is sent (or at once with ``follow=false``), so a finished run's stream is finite.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from controller.api.bodies import ERRORS
from controller.api.streams import LimitedStream, StreamSlots
from controller.domain.enums import FINISHED_STATUSES
from controller.services.views.reads import event_view
from controller.store.ports import RunReads

BATCH = 200
KEEPALIVE_S = 15.0


def _last_event_id(header: str | None, after: int) -> int:
    if header is None or not header.strip():
        return after
    if not header.strip().isdigit():
        detail = f"Last-Event-ID: must be an event id (a number), got {header[:40]!r}"
        raise HTTPException(status_code=422, detail=detail)
    return max(after, int(header.strip()))


async def event_stream(
    store: RunReads, run_id: str, after: int, follow: bool, poll_s: float
) -> AsyncIterator[str]:
    """The run's events after ``after`` as SSE frames (also the dashboard's live feed)."""
    last = after
    idle = 0.0
    while True:
        batch = await run_in_threadpool(store.list_events, run_id, after_id=last, limit=BATCH)
        for event in batch:
            last = event.id
            data = event_view(event).model_dump_json()
            yield f"id: {event.id}\nevent: {event.kind}\ndata: {data}\n\n"
        if len(batch) == BATCH:
            continue
        if not follow:
            return
        run = await run_in_threadpool(store.get_run, run_id)
        if run.status in FINISHED_STATUSES:
            tail = await run_in_threadpool(store.list_events, run_id, after_id=last, limit=1)
            if not tail:
                return
            continue
        if idle >= KEEPALIVE_S:
            idle = 0.0
            yield ": keep-alive\n\n"
        await asyncio.sleep(poll_s)
        idle += poll_s


def events_router(
    store: RunReads,
    auth: Callable[..., Awaitable[None]],
    slots: StreamSlots,
    *,
    poll_s: float = 0.5,
) -> APIRouter:
    """The route; ``slots`` caps the streams open per token and in all (429 beyond)."""
    router = APIRouter(prefix="/api/runs", tags=["runs"], dependencies=[Depends(auth)], responses=ERRORS)

    @router.get(
        "/{run_id}/events",
        response_class=StreamingResponse,
        responses={
            200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"},
            429: {"description": "too many event streams open with this token or on this server"},
        },
    )
    def events(
        request: Request,
        run_id: str,
        after: Annotated[int, Query(ge=0, le=2**62, description="send events with a larger id")] = 0,
        follow: Annotated[bool, Query(description="keep the stream open until the run finishes")] = True,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> StreamingResponse:
        """The run's events from ``after`` (or ``Last-Event-ID``) on, as Server-Sent Events."""
        start = _last_event_id(last_event_id, after)
        store.get_run(run_id)  # 404 before the stream starts
        release = slots.take(request.headers.get("authorization", ""))
        return LimitedStream(
            event_stream(store, run_id, start, follow, poll_s),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            release=release,
        )

    return router

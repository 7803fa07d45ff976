"""``HEAD`` wherever ``GET`` is allowed (issue 21): FastAPI routes declared with ``GET`` answer 405 to it.

The read-only token may GET and HEAD (``auth.READ_METHODS``), and monitors and proxies probe with HEAD.
Rather than declaring HEAD on every route (and on the hot path and the dashboard), this outermost ASGI
middleware runs a HEAD request as the GET it stands for and sends only the answer's status and headers
(``Content-Length`` included, as RFC 9110 allows): one rule for every route, present and future. A
streamed answer (Server-Sent Events) is told the client left once its headers are out, so it stops.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

DISCONNECT: Message = {"type": "http.disconnect"}


class HeadAsGet:
    """ASGI middleware: HEAD answered as GET without the body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        headers_out = asyncio.Event()
        finished = False

        async def head_receive() -> Message:
            """The client's messages until the headers are out; then a disconnect, so a stream that
            waits for one (Starlette's, under ASGI 2.3) stops."""
            if headers_out.is_set():
                return DISCONNECT
            message = asyncio.ensure_future(receive())
            sent = asyncio.ensure_future(headers_out.wait())
            done, pending = await asyncio.wait({message, sent}, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            return message.result() if message in done else DISCONNECT

        async def head_send(message: Message) -> None:
            nonlocal finished
            if message["type"] == "http.response.start":
                await send(message)
                headers_out.set()
            elif message["type"] == "http.response.body" and not finished:
                finished = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        # ASGI 2.3: a streamed answer listens for the disconnect (2.4 would only notice on its next send).
        asgi = {**scope.get("asgi", {}), "spec_version": "2.3"}
        await self.app({**scope, "method": "GET", "asgi": asgi}, head_receive, head_send)

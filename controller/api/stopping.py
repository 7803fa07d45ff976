"""A uvicorn server that tells the app it is stopping before it waits for the open requests.

uvicorn's graceful shutdown stops accepting connections, then waits for every open request to finish,
and only then runs the app's lifespan shutdown. A long poll (a warm hypothesis pod's ``slot/next``, up
to ``slots.WAIT_S``) would hold the whole shutdown for the rest of its wait: ``crucible serve`` until
``GRACEFUL_S`` cancels it, a server without that bound for all of it. ``on_stop`` runs first, so the
app can end such waits at once (``Slots.close``) and the open requests finish promptly.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn


class StoppingServer(uvicorn.Server):
    """``uvicorn.Server`` calling ``on_stop`` (from the server's event loop; it must not block) when
    its shutdown begins, before the open requests are waited for."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.on_stop = on_stop

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.on_stop is not None:
            self.on_stop()
        await super().shutdown(sockets=sockets)

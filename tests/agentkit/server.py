"""A scripted model endpoint on 127.0.0.1 that real coding-agent CLIs talk to, over real HTTP.

The presets' tests run the real Claude Code, Codex, … binaries; what they cannot have here is a model.
This server is one: each wire format is a ``Dialect`` in a module of its own (Anthropic Messages, OpenAI
Responses, …) that answers with the tool calls of one planned edit (``script.py``), then a final message
with a hypothesis. Every request is recorded (path, headers, body) so a test can assert what a CLI sent:
the key, the model, and that nothing else reached the endpoint. ``fail_status`` turns every model call
into an HTTP error, as a broken gateway would answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from tests.agentkit.script import Edit
from tests.support.waiting import SHUTDOWN_POLL_S


@dataclass(frozen=True)
class Request:
    """One request as the server received it; header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"


def json_reply(payload: Any, status: int = 200) -> Reply:
    return Reply(status, json.dumps(payload).encode())


def event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    """One SSE event whose data carries its own ``type``, as both APIs send them."""
    return kind, {"type": kind, **fields}


def sse_reply(events: Sequence[tuple[str | None, Any]]) -> Reply:
    """Server-Sent Events: ``(event name or None, JSON data)`` each, as one body."""
    chunks = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        chunks.append(f"{head}data: {json.dumps(data)}\n\n")
    return Reply(200, "".join(chunks).encode(), "text/event-stream")


@dataclass
class ScriptedModel:
    """What the model does: the edit to make (None: answer with text only and edit nothing), the
    tokens it reports per call, and ``fail_status`` (every model call answered with that error)."""

    edit: Edit | None = None
    input_tokens: int = 1200
    output_tokens: int = 80
    fail_status: int | None = None
    delay_s: float = 0.0  # wait this long before answering a model call (an agent timeout)


class Dialect(Protocol):
    """One wire format: which requests it answers and how."""

    name: str

    def matches(self, method: str, path: str) -> bool: ...

    def reply(self, request: Request, model: ScriptedModel) -> Reply: ...


@dataclass
class ModelServer:
    """A running server: its base URL, the model's script, and the requests received so far."""

    url: str
    model: ScriptedModel
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    def received(self, dialect: str | None = None) -> list[Request]:
        """The requests so far (those a dialect answered, when named); a copy."""
        with self.lock:
            found = list(self.requests)
        return found if dialect is None else [r for r in found if r.headers.get("x-dialect") == dialect]


def _handler(server: ModelServer, dialects: Sequence[Dialect]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet: tests read `requests`
            return

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path = self.path
            dialect = next((d for d in dialects if d.matches(self.command, path.split("?")[0])), None)
            headers = {k.lower(): v for k, v in self.headers.items()}
            if dialect is not None:
                headers["x-dialect"] = dialect.name
            request = Request(self.command, path, headers, body)
            with server.lock:
                server.requests.append(request)
            if dialect is None:
                reply = json_reply({"error": {"message": f"no such route: {self.command} {path}"}}, 404)
            elif server.model.delay_s and server.stopping.wait(server.model.delay_s):
                return  # the server is shutting down: drop the call
            elif server.model.fail_status is not None:
                status = server.model.fail_status
                reply = json_reply({"error": {"type": "api_error", "message": f"scripted {status}"}}, status)
            else:
                reply = dialect.reply(request, server.model)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    return Handler


@contextmanager
def running_model_server(
    dialects: Sequence[Dialect], model: ScriptedModel | None = None
) -> Iterator[ModelServer]:
    """Serve ``dialects`` on a free port of 127.0.0.1 until the block ends."""
    state = ModelServer(url="", model=model or ScriptedModel())
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, dialects))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(
        target=httpd.serve_forever,
        kwargs={"poll_interval": SHUTDOWN_POLL_S},
        name="model-server",
        daemon=True,
    )
    thread.start()
    try:
        yield state
    finally:
        state.stopping.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)

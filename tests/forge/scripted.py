"""A tiny HTTP server (stdlib) that answers scripted responses per (method, path) and records
every request: GitHub faked at the HTTP level, for what the local forge does not do (GitHub App
endpoints) and for replaying GitHub's recorded answers (``tests/forge/test_replay.py``).
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tests.support.waiting import SHUTDOWN_POLL_S

# Headers a recording carries that describe its original transfer, not the answer we send.
_TRANSFER = {"transfer-encoding", "content-encoding", "content-length", "connection", "status"}


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def json(cls, status: int, payload: Any, **headers: str) -> Answer:
        return cls(status, json.dumps(payload), tuple(headers.items()))


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class ScriptedServer:
    url: str
    routes: dict[tuple[str, str], list[Answer]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)

    def answer(self, method: str, path: str, *answers: Answer) -> None:
        """Answer ``method path`` with ``answers`` in turn; the last one repeats."""
        self.routes[(method, path)] = list(answers)

    def next_answer(self, method: str, path: str) -> Answer:
        queue = self.routes.get((method, path))
        if not queue:
            return Answer.json(404, {"message": "Not Found (not scripted)"})
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def seen(self, method: str, path: str) -> list[Request]:
        return [r for r in self.requests if (r.method, r.path) == (method, path)]


@contextmanager
def scripted_server() -> Iterator[ScriptedServer]:
    state: dict[str, ScriptedServer] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            server = state["server"]
            body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            parts = urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            server.requests.append(Request(self.command, parts.path, parts.query, headers, body))
            answer = server.next_answer(self.command, parts.path)
            raw = answer.body.encode()
            self.send_response(answer.status)
            for name, value in answer.headers:
                if name.lower() not in _TRANSFER:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        def log_message(self, *args: Any) -> None:
            return

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["server"] = ScriptedServer(f"http://127.0.0.1:{httpd.server_address[1]}")
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
    )
    thread.start()
    try:
        yield state["server"]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()

"""The operator API's two most repeated reads, answered before FastAPI's per-request machinery.

``GET /api/runs`` and ``GET /api/runs/{id}/turns`` are what a dashboard following runs and the
scripts polling them ask again and again. Through FastAPI each cost 2.6-3.4 ms of server CPU against
0.64 ms for ``/healthz`` (``bench/api_load.py``, ADR-0021): dependency solving and parameter
validation, the thread-pool hop of a ``def`` route, SQLAlchemy's pool checkout and result machinery.
With one worker per replica and 16 clients, p99 is roughly 16 times that.

``HotPath`` is an ASGI middleware that answers the well-formed, authorised cases of those two routes
itself, after one query awaited on the event loop (``store.hot_reads``), with bytes the route would
have sent:

* turns: only a page already in the route's ``PageCache``; the run's version is read and the stored
  body sent if it was rendered under that version, as the route itself would do. Anything else
  (first request of a page, a run that moved) goes on to the route, which renders and stores it.
* runs: the page's rows are read, and the body kept for that page is sent if it was rendered from
  equal rows; otherwise it is rendered from the rows just read (``bodies.run_page_json``, which the
  route uses too) and kept.

Either way the answer is what a single read at that moment shows, whichever replica wrote last: no
clock, no notification, nothing to invalidate. Every other request, and every case the middleware
does not take (a missing or invalid token, a parameter it does not read exactly as FastAPI would, a
database error, all hot-path connections busy), goes through to the FastAPI routes unchanged, so
401/403/404/422/503 answers and the OpenAPI document stay theirs.
"""

from __future__ import annotations

import re
from typing import TypeVar
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from controller.api.auth import ApiTokens, bearer_role
from controller.api.bodies import run_page_json
from controller.api.pagecache import PageCache
from controller.domain.enums import Outcome, RunStatus
from controller.domain.errors import CrucibleError
from controller.store.hot_reads import HotReads, SummaryRows

MAX_PAGE = 500  # items per page at most (the routes declare it too)
MAX_INT = 2**31
RUNS_PATH = "/api/runs"
TURNS_PATH = re.compile(r"/api/runs/(?P<run_id>[^/]+)/turns")  # Starlette's pattern for ``{run_id}``
# An integer parameter the way it is written when written plainly; any other spelling FastAPI may
# or may not accept is left to FastAPI.
_PLAIN_INT = re.compile(r"0|[1-9][0-9]{0,9}")
_JSON = (b"content-type", b"application/json")
_OUTCOMES = {o.value: o for o in Outcome}
_STATUSES = {s.value: s for s in RunStatus}

E = TypeVar("E", Outcome, RunStatus)


class HotPath:
    """The middleware (see the module docstring). ``turn_pages`` is the turns route's own cache;
    ``run_pages`` keeps runs-list bodies by (limit, offset, status)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: ApiTokens,
        reads: HotReads,
        turn_pages: PageCache[int],
        run_pages: PageCache[SummaryRows],
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.reads = reads
        self.turn_pages = turn_pages
        self.run_pages = run_pages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            try:
                await self.app(scope, receive, send)
            finally:
                await self.reads.close()
            return
        if scope["type"] == "http" and scope["method"] == "GET":
            body = await self._answer(scope)
            if body is not None:
                headers = [(b"content-length", str(len(body)).encode()), _JSON]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

    async def _answer(self, scope: Scope) -> bytes | None:
        path: str = scope["path"]
        turns = None if path == RUNS_PATH else TURNS_PATH.fullmatch(path)
        if turns is None and path != RUNS_PATH:
            return None
        if bearer_role(self.tokens, _header(scope, b"authorization")) is None:
            return None
        try:
            if turns is None:
                return await self._runs(scope["query_string"])
            return await self._turns(turns["run_id"], scope["query_string"])
        except _Decline:  # a parameter the route should judge: it answers (422 or otherwise)
            return None
        except CrucibleError:  # unknown run, database trouble: the route answers with its own error
            return None

    async def _runs(self, query: bytes) -> bytes:
        params = _params(query, {"limit", "offset", "status"})
        limit = _int(params.get("limit"), 50, 1, MAX_PAGE)
        offset = _int(params.get("offset"), 0, 0, MAX_INT)
        status = _member(_STATUSES, params.get("status"))
        rows = await self.reads.run_summaries(limit=limit + 1, offset=offset, status=status)

        def render() -> bytes:
            return run_page_json(self.reads.summary_records(rows), limit=limit, offset=offset)

        return self.run_pages.page((limit, offset, status), rows, render)

    async def _turns(self, run_id: str, query: bytes) -> bytes | None:
        params = _params(query, {"after", "limit", "round", "outcome"})
        after = _int(params.get("after"), 0, 0, MAX_INT)
        limit = _int(params.get("limit"), 100, 1, MAX_PAGE)
        round = None if "round" not in params else _int(params["round"], 0, 0, MAX_INT)
        outcome = _member(_OUTCOMES, params.get("outcome"))
        key = turn_page_key(run_id, after, limit, round, outcome)
        if not self.turn_pages.has(key):
            return None  # the route renders it (and keeps it)
        return self.turn_pages.current(key, await self.reads.turns_version(run_id))


class _Decline(Exception):
    """A request the hot path leaves to the routes."""


def turn_page_key(
    run_id: str, after: int, limit: int, round: int | None, outcome: Outcome | None
) -> tuple[object, ...]:
    """The key of a turns page in the route's ``PageCache`` (the route and the hot path share it)."""
    return (run_id, after, limit, round, outcome)


def _header(scope: Scope, name: bytes) -> str:
    """The first ``name`` header (lower case), decoded as Starlette decodes it; "" when absent."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return ""


def _params(query: bytes, known: set[str]) -> dict[str, str]:
    """The query's parameters, each one of ``known`` and given once (else ``_Decline``)."""
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    params = dict(pairs)
    if len(params) != len(pairs) or not params.keys() <= known:
        raise _Decline
    return params


def _int(text: str | None, default: int, low: int, high: int) -> int:
    """``text`` as a plainly written integer within [low, high], ``default`` when absent; any other
    spelling, which FastAPI may or may not accept, is ``_Decline``."""
    if text is None:
        return default
    if not _PLAIN_INT.fullmatch(text) or not low <= int(text) <= high:
        raise _Decline
    return int(text)


def _member(members: dict[str, E], text: str | None) -> E | None:
    """The enum member named by ``text`` (None when absent; ``_Decline`` when no member)."""
    if text is None:
        return None
    if text not in members:
        raise _Decline
    return members[text]

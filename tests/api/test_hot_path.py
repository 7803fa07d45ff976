"""``api/hotpath.py``: the runs list and cached turn pages answered before FastAPI, with the bytes the
routes would send, never staler than a single read, and everything else left to the routes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.api.bodies import RunPage, run_page_json
from controller.api.hotpath import HotPath, turn_page_key
from controller.api.pagecache import PageCache
from controller.config.settings import Settings
from controller.domain.enums import RunStatus, StopReason
from controller.localforge.server import serve_in_thread
from controller.services.views.reads import runs_list
from controller.store import Store
from controller.store.hot_reads import PgHotReads, SummaryRows, hot_reads
from tests.api.conftest import ADMIN, READER, Api, Recorder, new_run
from tests.api.sqlite_only import SQLITE_ONLY
from tests.api.test_turn_pages import _decide


class Inner:
    """The app behind the middleware: records what reached it and answers 299."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = (await receive())["type"]  # lifespan.startup, then lifespan.shutdown
                await send({"type": f"{message}.complete"})
                if message == "lifespan.shutdown":
                    return
        self.seen.append(f"{scope['method']} {scope['path']}?{scope['query_string'].decode()}")
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def bare(store: Store) -> Iterator[tuple[Store, Inner, PageCache[int], httpx.Client]]:
    """The middleware alone over ``Inner``, served by uvicorn."""
    with ExitStack() as stack:
        inner, pages = Inner(), PageCache[int]()
        run_pages: PageCache[SummaryRows] = PageCache()
        app = HotPath(
            inner,
            tokens=ApiTokens(ADMIN, READER),
            reads=hot_reads(store),
            turn_pages=pages,
            run_pages=run_pages,
        )
        url = stack.enter_context(serve_in_thread(app))
        client = stack.enter_context(httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}))
        yield store, inner, pages, client


def test_the_runs_list_is_answered_without_the_routes_exactly_as_they_would(
    bare: tuple[Store, Inner, PageCache[int], httpx.Client],
) -> None:
    store, inner, _pages, client = bare
    for i in range(3):
        new_run(store, f"run{i}", objective=f"objective {i}")
    store.set_run_status("run1", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)
    for params in ({}, {"limit": "2"}, {"limit": "2", "offset": "2"}, {"status": "cancelled"}):
        answer = client.get("/api/runs", params=params)
        limit, offset = int(params.get("limit", 50)), int(params.get("offset", 0))
        status = RunStatus(params["status"]) if "status" in params else None
        records = store.run_summaries(limit=limit + 1, offset=offset, status=status)
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        assert answer.content == run_page_json(records, limit=limit, offset=offset)
        more = len(records) > limit
        page = RunPage(items=runs_list(store, limit=limit, offset=offset, status=status), next_offset=None)
        page.next_offset = offset + limit if more else None
        assert answer.json() == json.loads(page.model_dump_json())
    with httpx.Client(base_url=str(client.base_url), headers={"Authorization": f"Bearer {READER}"}) as reader:
        assert reader.get("/api/runs").status_code == 200
    assert inner.seen == []


@SQLITE_ONLY  # none of these reads the database: the one that does is the test below, on both
@pytest.mark.parametrize(
    ("method", "path", "token"),
    [
        ("GET", "/api/runs", None),
        ("GET", "/api/runs", "wrong"),
        ("GET", "/api/runs?limit=0", ADMIN),
        ("GET", "/api/runs?limit=501", ADMIN),
        ("GET", "/api/runs?limit=05", ADMIN),
        ("GET", "/api/runs?limit=", ADMIN),
        ("GET", "/api/runs?limit=1.0", ADMIN),
        ("GET", "/api/runs?offset=-1", ADMIN),
        ("GET", "/api/runs?limit=1&limit=2", ADMIN),
        ("GET", "/api/runs?status=bogus", ADMIN),
        ("GET", "/api/runs?unknown=1", ADMIN),
        ("GET", "/api/runs/", ADMIN),
        ("POST", "/api/runs", ADMIN),
        ("HEAD", "/api/runs", ADMIN),
        ("GET", "/api/runs/r1", ADMIN),
        ("GET", "/api/runs/r1/turns", ADMIN),  # no page of it is cached
        ("GET", "/api/runs/r1/turns?round=x", ADMIN),
        ("GET", "/api/runs/r1/turns?outcome=bogus", ADMIN),
        ("GET", "/healthz", ADMIN),
    ],
)
def test_everything_else_goes_on_to_the_routes(
    bare: tuple[Store, Inner, PageCache[int], httpx.Client], method: str, path: str, token: str | None
) -> None:
    _goes_on_to_the_routes(bare, method, path, token)


def test_a_cached_page_of_a_run_that_does_not_exist_goes_on_to_the_routes(
    bare: tuple[Store, Inner, PageCache[int], httpx.Client],
) -> None:
    """The one request of those that reads the database (the run's version, on each database's own
    hot reads), and finds no run."""
    _goes_on_to_the_routes(bare, "GET", "/api/runs/nope/turns", ADMIN)


def _goes_on_to_the_routes(
    bare: tuple[Store, Inner, PageCache[int], httpx.Client], method: str, path: str, token: str | None
) -> None:
    store, inner, pages, client = bare
    new_run(store, "r1")
    pages.store(turn_page_key("nope", 0, 100, None, None), 0, b"a page of a run that does not exist")
    headers = {"Authorization": f"Bearer {token}" if token else ""}
    assert client.request(method, path, headers=headers).status_code == 299
    assert len(inner.seen) == 1 and inner.seen[0].startswith(f"{method} {path.split('?')[0]}")


def test_a_cached_turn_page_is_served_only_under_the_run_version_it_was_rendered_at(
    bare: tuple[Store, Inner, PageCache[int], httpx.Client],
) -> None:
    store, inner, pages, client = bare
    new_run(store, "r1")
    for n in (1, 2):
        store.start_turn("r1", n, 0)
    key = turn_page_key("r1", 0, 10, None, None)
    pages.store(key, store.turns_version("r1"), b'{"cached": 1}')
    assert client.get("/api/runs/r1/turns", params={"limit": 10}).content == b'{"cached": 1}'
    assert inner.seen == []
    _decide(store, 1)  # the run moved: the page is stale and the route must render it again
    assert client.get("/api/runs/r1/turns", params={"limit": 10}).status_code == 299
    assert inner.seen == ["GET /api/runs/r1/turns?limit=10"]


def test_a_change_to_a_run_is_visible_on_the_next_request(api: Api) -> None:
    new_run(api.store, "r1")
    with api.client() as client:
        runs = [client.get("/api/runs").json() for _ in range(2)]
        assert runs[0] == runs[1] and [r["status"] for r in runs[0]["items"]] == ["pending"]
        api.store.set_run_status("r1", RunStatus.RUNNING)  # no event: the rows themselves tell
        assert [r["status"] for r in client.get("/api/runs").json()["items"]] == ["running"]
        new_run(api.store, "r2")
        assert [r["run_id"] for r in client.get("/api/runs").json()["items"]] == ["r2", "r1"]
        for n in (1, 2):
            api.store.start_turn("r1", n, 0)
        _decide(api.store, 1)
        first = [client.get("/api/runs/r1/turns").json() for _ in range(3)]
        assert first[0] == first[2] and [t["turn"] for t in first[0]["items"]] == [1]
        _decide(api.store, 2)
        assert [t["turn"] for t in client.get("/api/runs/r1/turns").json()["items"]] == [1, 2]


@pytest.mark.postgres
def test_two_replicas_on_one_database_never_serve_a_stale_page(tmp_path: Path, postgres_url: str) -> None:
    settings = Settings(home=tmp_path / "home", database_url=postgres_url)
    with ExitStack() as stack:
        stores = [stack.enter_context(Store.open(postgres_url, upgrade=True)) for _ in range(2)]
        urls = [
            stack.enter_context(serve_in_thread(create_app(settings, s, ApiTokens(ADMIN), Recorder())))
            for s in stores
        ]
        a, b = (
            stack.enter_context(httpx.Client(base_url=u, headers={"Authorization": f"Bearer {ADMIN}"}))
            for u in urls
        )
        writer = stores[1]  # what replica B's scheduler would write
        new_run(writer, "r1")
        for n in (1, 2):
            writer.start_turn("r1", n, 0)
        _decide(writer, 1)
        for _ in range(2):  # A renders, keeps and then serves its own pages
            assert [r["status"] for r in a.get("/api/runs").json()["items"]] == ["pending"]
            assert [t["turn"] for t in a.get("/api/runs/r1/turns").json()["items"]] == [1]
        writer.set_run_status("r1", RunStatus.RUNNING)
        _decide(writer, 2)
        assert [r["status"] for r in a.get("/api/runs").json()["items"]] == ["running"]
        assert [t["turn"] for t in a.get("/api/runs/r1/turns").json()["items"]] == [1, 2]
        assert a.get("/api/runs").content == b.get("/api/runs").content


@pytest.mark.postgres
@pytest.mark.parametrize("trouble", ["busy", "unreachable"])
def test_when_the_hot_path_cannot_read_the_routes_answer(postgres_url: str, trouble: str) -> None:
    conninfo = postgres_url.replace("+psycopg", "")
    if trouble == "busy":
        reads = PgHotReads(conninfo, max_connections=0)
    else:
        reads = PgHotReads(conninfo.rsplit("/", 1)[0] + "/no_such_database_here")
    inner = Inner()
    app = HotPath(inner, tokens=ApiTokens(ADMIN), reads=reads, turn_pages=PageCache(), run_pages=PageCache())
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        answer = client.get("/api/runs", headers={"Authorization": f"Bearer {ADMIN}"})
    assert answer.status_code == 299 and inner.seen == ["GET /api/runs?"]

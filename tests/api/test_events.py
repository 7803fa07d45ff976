"""``GET /api/runs/{id}/events`` as Server-Sent Events: a client that reconnects with ``Last-Event-ID``
misses no event and sees none twice, while events keep being appended; a finished run's stream ends."""

from __future__ import annotations

import json
import threading

import httpx

from controller.cli.remote import ApiClient
from controller.domain.enums import EventKind, RunStatus, StopReason
from tests.api.conftest import ADMIN, Api, new_run
from tests.api.sqlite_only import SQLITE_ONLY


def _read(response: httpx.Response, count: int | None) -> list[tuple[int, dict[str, object]]]:
    """Up to ``count`` events (all until the stream ends when None)."""
    got: list[tuple[int, dict[str, object]]] = []
    event_id, data = None, None
    for line in response.iter_lines():
        if line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and event_id is not None and data is not None:
            got.append((event_id, data))
            event_id, data = None, None
            if count is not None and len(got) == count:
                break
    return got


def _finish(api: Api, run_id: str) -> None:
    api.store.set_run_status(run_id, RunStatus.RUNNING)
    api.store.set_run_status(run_id, RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
    api.store.append_event(run_id, EventKind.COMPLETED, {"status": "completed"})


def test_reconnecting_with_last_event_id_misses_none_and_repeats_none(api: Api) -> None:
    run_id = new_run(api.store, "sse")
    for i in range(5):
        api.store.append_event(run_id, EventKind.TURN_STARTED, {"turn": i + 1})
    writing = threading.Event()

    def writer() -> None:
        for i in range(5, 40):
            api.store.append_event(run_id, EventKind.TURN_STARTED, {"turn": i + 1})
            if i == 20:
                writing.set()
        _finish(api, run_id)

    seen: list[tuple[int, dict[str, object]]] = []
    with api.client() as client:
        with client.stream("GET", f"/api/runs/{run_id}/events") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            seen += _read(response, 3)  # then the connection drops
        thread = threading.Thread(target=writer)
        thread.start()
        writing.wait(30)
        with client.stream(
            "GET", f"/api/runs/{run_id}/events", headers={"Last-Event-ID": str(seen[-1][0])}
        ) as response:
            seen += _read(response, 10)
        thread.join(30)
        with client.stream(
            "GET", f"/api/runs/{run_id}/events", headers={"Last-Event-ID": str(seen[-1][0])}
        ) as response:
            seen += _read(response, None)  # ends by itself: the run finished
    stored = [e.id for e in api.store.list_events(run_id)]
    ids = [event_id for event_id, _ in seen]
    assert ids == stored and len(set(ids)) == len(ids) == 41
    assert [data["turn"] for _, data in seen[:-1]] == list(range(1, 41))
    assert seen[-1][1]["kind"] == "completed" and seen[-1][1]["run_id"] == run_id


def test_the_cli_client_resumes_a_dropped_stream_and_ends_with_the_run(api: Api) -> None:
    run_id = new_run(api.store, "sse2")
    for i in range(3):
        api.store.append_event(run_id, EventKind.TURN_STARTED, {"turn": i + 1})
    with ApiClient(api.url, ADMIN) as client:
        assert [e["turn"] for e in client.events(run_id, follow=False)] == [1, 2, 3]
        first = next(iter(client.events(run_id)))
        _finish(api, run_id)
        rest = list(client.events(run_id, after=int(first["id"])))  # type: ignore[call-overload]
    assert [e["kind"] for e in rest] == ["turn_started", "turn_started", "completed"]


@SQLITE_ONLY
def test_a_malformed_last_event_id_is_422(api: Api) -> None:
    new_run(api.store, "sse3")
    with api.client() as client:
        response = client.get("/api/runs/sse3/events", headers={"Last-Event-ID": "abc"})
    assert response.status_code == 422

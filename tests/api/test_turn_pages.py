"""``GET /api/runs/{id}/turns``: pages of decided turns, the same turns the full run view shows, and
served from the page cache only while the run has not moved (``api/pagecache.py``)."""

from __future__ import annotations

import pytest

from controller.api.pagecache import PageCache
from controller.domain.enums import Outcome, Reason, RunStatus, SampleArm
from controller.store import Store, TurnDecision
from tests.api.conftest import Api, new_run
from tests.api.sqlite_only import sqlite_only  # noqa: F401  (a fixture: SQLite only)


def _decide(store: Store, number: int) -> None:
    decision = TurnDecision(
        outcome=Outcome.REJECTED,
        reason=Reason.NOT_IMPROVED,
        value=float(number),
        p_value=0.5,
        hypothesis=f"idea {number}",
        changed_paths=("src/a.py",),
        commits={"app": "c" * 40},
        cost_usd=0.0,
        tokens=0,
        duration_s=0.25,
        detail="",
    )
    samples = [
        (SampleArm.CANDIDATE, 0, {"m": float(number)}, True),
        (SampleArm.CHAMPION, 0, {"m": 5.0}, True),
        (SampleArm.CHAMPION, 1, {}, False),
    ]
    store.decide_turn(
        "r1", number, decision, champion=None, component_heads={}, event=("rejected", {}), samples=samples
    )


def test_pages_show_what_the_run_view_shows_and_follow_new_decisions(api: Api) -> None:
    new_run(api.store, "r1")
    api.store.set_run_status("r1", RunStatus.RUNNING)
    for n in (1, 2, 3, 4):
        api.store.start_turn("r1", n, 0)
    for n in (1, 3, 4):  # turn 2 is still running (a parallel round decides out of order)
        _decide(api.store, n)
    with api.client() as client:
        first = client.get("/api/runs/r1/turns", params={"limit": 2}).json()
        again = client.get("/api/runs/r1/turns", params={"limit": 2}).json()
        view = client.get("/api/runs/r1").json()
        assert first == again
        assert [t["turn"] for t in first["items"]] == [1, 3] and first["next_after"] == 3
        assert first["items"] == [t for t in view["turns"] if t["turn"] in (1, 3)]
        assert first["items"][0]["samples"] == [1.0] and first["items"][0]["reference_samples"] == [5.0]
        _decide(api.store, 2)
        moved = client.get("/api/runs/r1/turns", params={"limit": 2}).json()
        assert [t["turn"] for t in moved["items"]] == [1, 2] and moved["next_after"] == 2
        rest = client.get("/api/runs/r1/turns", params={"after": 2}).json()
        assert [t["turn"] for t in rest["items"]] == [3, 4] and rest["next_after"] is None
        assert client.get("/api/runs/nope/turns").status_code == 404


def test_the_cache_serves_a_page_only_under_the_version_it_was_read_at() -> None:
    cache = PageCache(capacity=2)
    renders: list[str] = []

    def render(body: str) -> bytes:
        renders.append(body)
        return body.encode()

    assert cache.page("a", 1, lambda: render("a1")) == b"a1"
    assert cache.page("a", 1, lambda: render("again")) == b"a1"
    assert cache.page("a", 2, lambda: render("a2")) == b"a2"
    assert cache.page("b", 1, lambda: render("b1")) == b"b1"
    assert cache.page("a", 2, lambda: render("again")) == b"a2"  # a is now the most recently used
    assert cache.page("c", 1, lambda: render("c1")) == b"c1"  # evicts b, the least recently used
    assert len(cache) == 2
    assert cache.page("b", 1, lambda: render("b1 again")) == b"b1 again"
    assert renders == ["a1", "a2", "b1", "c1", "b1 again"]
    with pytest.raises(ValueError, match="capacity"):
        PageCache(capacity=0)

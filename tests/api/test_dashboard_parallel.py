"""Parallel hypotheses (``broker.parallel > 1``, ADR-0016) on the dashboard, over real HTTP on a real
store: the run page folds each parallel turn's hypotheses under its row (verdicts incl. ``superseded``,
medians, change, p, the kept one), the turn page lists them with their samples, every text escaped;
the running turn's panel shows each hypothesis's step and its samples from the events that carry
``parallel_index``, and the events keep their shape for a turn of one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from controller.api.dashboard import model, pages
from controller.config.settings import Settings
from controller.domain.enums import Outcome
from tests.api.conftest import READER, Api
from tests.api.dashboard_runs import parallel_turn, running_parallel_turn, running_turn, seeded_run
from tests.api.sqlite_only import sqlite_only  # noqa: F401  (a fixture: SQLite only)

PROBE = '<script>alert(1)</script> "><img src=x onerror=alert(3)>'
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt; &#34;&gt;&lt;img src=x onerror=alert(3)&gt;"


@contextmanager
def _client(api: Api) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        assert client.post("/login", data={"token": READER}).status_code == 303
        yield client


def _seed(api: Api, run_id: str, text: str = "") -> None:
    settings = Settings(home=api.repo.parent / "crucible-home", database_url=api.store.url)
    seeded_run(api.store, settings, run_id, turns=2, text=text)
    parallel_turn(api.store, run_id, 3, text)


def test_the_run_page_folds_a_parallel_turns_hypotheses_under_its_row(api: Api) -> None:
    _seed(api, "par")
    with _client(api) as client:
        html = client.get("/runs/par").text
        fragment = client.get("/runs/par/fragment").text
    for page in (html, fragment):
        assert page.count("<details>") == 1  # only turn 3 ran several hypotheses
        assert "<summary>3 hypotheses, #1 kept</summary>" in page
        rows = page.split('<table class="hypotheses">')[1].split("</table>")[0]
        assert rows.count('<tr class="') == 3
        assert '<tr class="rejected">\n  <th scope="row">#0</th>' in rows
        assert '<th scope="row">#1 <strong>kept</strong></th>' in rows
        assert '<td title="another improved more ">superseded</td>' in rows and ">agent_failed</td>" in rows
        # #0: its median 95 against the champion's 100, -5.0%, p 0.01; #2 never measured
        assert '100, 100, 100">95</td>\n  <td>100</td>\n  <td>-5.0%</td>\n  <td>0.01</td>' in rows
        assert '100, 100, 100">90</td>\n  <td>100</td>\n  <td>-10.0%</td>\n  <td>0.02</td>' in rows
        assert 'champion: -"></td>\n  <td></td>\n  <td></td>\n  <td></td>' in rows
    assert 'href="/runs/par/turns/3"' in html and 'href="/runs/par/turns/1"' in html


def test_the_turn_page_lists_the_hypotheses_with_their_samples(api: Api) -> None:
    _seed(api, "par")
    with _client(api) as client:
        page = client.get("/runs/par/turns/3")
        single = client.get("/runs/par/turns/1").text
        missing = client.get("/runs/par/turns/9", headers={"accept": "text/html"})
        bad = client.get("/runs/par/turns/0")
    assert page.status_code == 200 and page.headers["content-security-policy"].startswith("default-src")
    html = page.text
    assert "<h1>Turn 3 <small>(round 0)</small></h1>" in html
    assert "<strong>#1</strong> (kept): candidate: 90, 90, 90 | champion: 100, 100, 100. kept" in html
    assert "<strong>#2</strong>: candidate: - | champion: -. the agent failed" in html
    assert "another improved more" in html and html.count('<tr class="') == 3
    assert "this turn ran with <code>broker.parallel = 1</code>" in single
    assert missing.status_code == 404 and "decided turn 9" in missing.text
    assert bad.status_code == 422


def test_every_hypothesis_field_renders_as_text(api: Api) -> None:
    _seed(api, "xss", PROBE)
    with _client(api) as client:
        pages = [client.get("/runs/xss").text, client.get("/runs/xss/turns/3").text]
    for html in pages:
        assert "<script>alert" not in html and "<img" not in html
    # the hypotheses' proposals and details on the run page; the turn page adds the samples list
    assert (
        pages[0].count(f"idea 0 {ESCAPED}") == 1 and pages[0].count(f"another improved more {ESCAPED}") == 1
    )
    assert pages[1].count(f"idea 2 {ESCAPED}") == 1 and pages[1].count(f"the agent failed {ESCAPED}") == 2


def test_the_live_panel_shows_each_hypothesis_step_and_samples(api: Api) -> None:
    _seed(api, "live")
    running_parallel_turn(api.store, "live", 4)
    with _client(api) as client:
        html = client.get("/runs/live").text
        with client.stream("GET", "/runs/live/live?after=0") as stream:
            events = []
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                if len(events) >= 4 and events[-1].get("kind") == "sample" and events[-1]["value"] is None:
                    break
    assert "Turn 4 (round 0) is running with 2 hypotheses" in html
    assert '<strong id="turn-live-step">hypothesis #1: proposing</strong>' in html
    assert '<li data-index="0">#0: measuring champion vs candidate</li>' in html
    assert '<li data-index="1">#1: proposing</li>' in html
    assert '<tr data-arm="#0 candidate"><th>#0 candidate</th><td class="values">96.5, invalid</td>' in html
    assert '<tr data-arm="#0 champion"><th>#0 champion</th><td class="values">100</td>' in html
    # the stream carries the index, typed, on the parallel turn's progress events only
    progress = [e for e in events if e["kind"] in ("turn_step", "sample") and e["turn"] == 4]
    assert progress and all(isinstance(e["parallel_index"], int) for e in progress)
    assert progress[0]["arms"] == ["champion", "candidate"] and progress[1]["arms"] == []


def test_a_turn_of_one_keeps_its_events_shape(api: Api) -> None:
    _seed(api, "one")
    running_turn(api.store, "one", 4, samples=1)
    with _client(api) as client:
        html = client.get("/runs/one").text
        with client.stream("GET", "/runs/one/live?after=0") as stream:
            events = []
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                if events and events[-1].get("kind") == "sample" and events[-1]["arm"] == "candidate":
                    break
    step = next(e for e in events if e["kind"] == "turn_step")
    sample = events[-1]
    assert set(step) == {"id", "run_id", "kind", "created_at", "turn", "round", "step", "arms"}
    assert set(sample) == {
        "id",
        "run_id",
        "kind",
        "created_at",
        "turn",
        "round",
        "arm",
        "index",
        "value",
        "valid",
    }
    assert 'id="turn-live-hypotheses" class="hypothesis-steps" hidden' in html
    assert '<tr data-arm="candidate"><th>candidate</th>' in html


def test_only_the_latest_parallel_turns_are_unfolded_on_the_run_page() -> None:
    parallel = [2, 4, 6, 8, 10]  # of turns 1 .. 10, the even ones ran three hypotheses
    assert model.unfolded_turns(parallel, 3) == {6, 8, 10}
    assert model.unfolded_turns(parallel, 20) == {2, 4, 6, 8, 10}
    assert model.unfolded_turns(parallel, 0) == frozenset()
    rejected = dict.fromkeys(range(3), Outcome.REJECTED)
    assert model.hypotheses_summary(rejected) == "3 hypotheses, none kept"
    assert model.hypotheses_summary({**rejected, 2: Outcome.ACCEPTED}) == "3 hypotheses, #2 kept"


def test_an_older_parallel_turn_links_to_its_page_instead(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    _seed(api, "old")
    monkeypatch.setattr(pages, "UNFOLDED", 0)  # as if 20 later parallel turns had followed
    with _client(api) as client:
        html = client.get("/runs/old").text
    assert "<details>" not in html and '<table class="hypotheses">' not in html
    assert '<a href="/runs/old/turns/3">3 hypotheses, #1 kept</a>' in html

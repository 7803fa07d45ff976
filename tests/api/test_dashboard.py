"""The dashboard over real HTTP (uvicorn) on a real store with real runs: login into a session cookie,
the runs list (tallies, filter, pages), the run page (chart, turns, PRs, feedback, rounds, replies,
diff), the live fragment and stream, operator actions behind CSRF and a confirmation, and escaping of
every user-provided field (planted ``<script>``, ``javascript:`` and ``"><img onerror>`` probes)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import httpx

from controller.api.dashboard.session import COOKIE
from controller.config.settings import Settings
from controller.domain.enums import EventKind, Outcome, Reason, RunPhase, RunStatus, StopReason
from controller.store.records import TurnDecision
from tests.api.conftest import ADMIN, READER, Api, new_run
from tests.api.dashboard_runs import seeded_run
from tests.api.sqlite_only import sqlite_only  # noqa: F401  (a fixture: SQLite only)

WATCHING = {"publish_prs": True, "watch_feedback": True}

PROBE = '<script>alert(1)</script> javascript:alert(2) "><img src=x onerror=alert(3)>'


def _settings(api: Api) -> Settings:
    return Settings(home=api.repo.parent / "crucible-home", database_url=api.store.url)


@contextmanager
def _login(api: Api, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        response = client.post("/login", data={"token": token})
        assert response.status_code == 303 and response.headers["location"] == "/"
        yield client


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, html
    return found.group(1)


def test_login_sets_a_strict_httponly_session_and_a_wrong_token_gets_none(api: Api) -> None:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        assert client.get("/").status_code == 303  # to /login
        page = client.get("/login")
        assert page.status_code == 200 and 'name="token"' in page.text
        in_url = client.get("/login", params={"token": ADMIN})  # serve's tokens never log in from a URL
        assert in_url.status_code == 200 and COOKIE not in in_url.cookies and 'name="token"' in in_url.text
        wrong = client.post("/login", data={"token": "nope"})
        assert wrong.status_code == 401 and COOKIE not in wrong.cookies
        ok = client.post("/login", data={"token": ADMIN})
        cookie = ok.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert client.get("/").status_code == 200
        value = client.cookies[COOKIE]
        tampered = value[:-1] + ("0" if value[-1] != "0" else "1")
        client.cookies.set(COOKIE, tampered)  # the signature no longer matches
        assert client.get("/").status_code == 303


def test_pages_send_a_csp_without_inline_scripts_and_ship_their_script(api: Api) -> None:
    with _login(api, ADMIN) as client:
        page = client.get("/")
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert '<script src="/static/live.js"></script>' in page.text
        assert "<script>" not in page.text
        script = client.get("/static/live.js")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        assert "EventSource" in script.text
        assert client.get("/static/../app.py").status_code == 404


def test_the_runs_list_shows_tallies_filters_by_status_and_pages(api: Api) -> None:
    settings = _settings(api)
    seeded_run(api.store, settings, "r-seeded", turns=9)
    for i in range(30):
        new_run(api.store, f"r-{i:02d}", objective=f"objective {i}")
    api.store.set_run_status("r-seeded", RunStatus.RUNNING)
    api.store.set_run_status("r-seeded", RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
    with _login(api, READER) as client:
        first = client.get("/")
        assert first.status_code == 200 and 'rel="next" href="/?offset=25"' in first.text
        assert first.text.count("<tr>") == 25 + 1  # the header row and a page of runs
        completed = client.get("/", params={"status": "completed"})
        row = completed.text.split('href="/runs/r-seeded"')[1].split("</tr>")[0]
        assert "objective" not in completed.text.split("<tbody>")[1].split("r-seeded")[0]
        cells = re.findall(r"<td>([^<]*)</td>", row)
        assert "9/11" in cells and "3" in cells and "1" in cells  # turns done/asked, kept, PRs
        assert "100 → 97.0299" in row and "-3.0%" in row and "max_turns" in row
        second = client.get("/", params={"offset": 25})
        assert second.text.count('href="/runs/') == 31 - 25
        assert client.get("/", params={"status": "nonsense"}).status_code == 422


def test_the_run_page_tells_the_whole_story(api: Api) -> None:
    settings = _settings(api)
    seeded_run(api.store, settings, "story", turns=10)
    api.store.set_run_status("story", RunStatus.RUNNING)
    api.store.set_run_status("story", RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
    with _login(api, READER) as client:
        page = client.get("/runs/story")
    assert page.status_code == 200
    html = page.text
    assert html.count('class="kept"') == 3 and html.count('class="failed"') >= 1
    assert 'class="best"' in html and 'class="baseline"' in html and "round 1" in html
    assert html.count("<tr class=") == 10
    assert "It ran every turn it was asked for." in html
    # the real diff, coloured: +/- lines, and the code's tokens by the file's language (src/a.py)
    assert '<span class="add">+x = <span class="tk-m">2</span>  <span class="tk-c"># </span></span>' in html
    assert "untrusted" in html and "rejected" in html and "Copy" in html
    assert "Round 1 on app: kept" in html
    assert "confirm/cancel" not in html  # a read-only session sees no buttons


def test_every_user_field_renders_as_text(api: Api) -> None:
    settings = _settings(api)
    seeded_run(api.store, settings, "xss", turns=6, text=PROBE, component="app")
    with _login(api, ADMIN) as client:
        pages = [client.get("/").text, client.get("/runs/xss").text, client.get("/runs/xss/fragment").text]
    for html in pages:
        assert "<script>alert" not in html and "<img" not in html and 'href="javascript:' not in html
    run_page = pages[1]
    escaped = (
        "&lt;script&gt;alert(1)&lt;/script&gt; javascript:alert(2) "
        "&#34;&gt;&lt;img src=x onerror=alert(3)&gt;"
    )
    # objective, hypotheses (table and chart labels/tooltips), branch, comment, reason, reply, round, diff
    assert run_page.count(escaped) >= 10, run_page
    assert "crucible/&lt;script&gt;" in run_page
    assert "#7 javascript:alert(1)//" in run_page  # the PR url stays text, not a link


def test_actions_need_a_write_session_a_confirmation_and_the_csrf_token(api: Api) -> None:
    seeded_run(api.store, _settings(api), "act", turns=3, options=WATCHING)
    with _login(api, READER) as reader:
        assert reader.get("/runs/act/confirm/cancel").status_code == 403
        assert reader.post("/runs/act/do/cancel", data={"csrf": "x"}).status_code == 403
    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {ADMIN}"}) as bearer:
        assert bearer.post("/runs/act/do/cancel", data={"csrf": "x"}).status_code == 403
    with _login(api, ADMIN) as admin:
        assert 'href="/runs/act/confirm/cancel"' in admin.get("/runs/act").text
        confirm = admin.get("/runs/act/confirm/cancel")
        assert confirm.status_code == 200 and "Cancel this run?" in confirm.text
        assert admin.post("/runs/act/do/cancel", data={"csrf": "0" * 64}).status_code == 403
        assert api.control.calls == []
        done = admin.post("/runs/act/do/cancel", data={"csrf": _csrf(confirm.text)})
        assert done.status_code == 200 and "cancelling" in done.text
        assert admin.get("/runs/act/confirm/round").status_code == 409  # pending: it watches nothing yet
        api.store.set_run_status("act", RunStatus.RUNNING)
        api.store.set_phase("act", RunPhase.WATCHING)
        token = _csrf(admin.get("/runs/act/confirm/round").text)
        assert admin.post("/runs/act/do/round", data={"csrf": token, "steer": " "}).status_code == 422
        assert admin.post("/runs/act/do/round", data={"csrf": token, "steer": "fix it"}).status_code == 200
    assert api.control.calls == [("cancel", "act"), ("steer", "act")]


def test_the_live_stream_and_fragment_follow_the_run(api: Api) -> None:
    run_id = seeded_run(api.store, _settings(api), "live", turns=2)
    with _login(api, READER) as client:
        before = client.get(f"/runs/{run_id}/fragment").text
        assert before.count("<tr class=") == 2
        after = re.search(r'data-after="(\d+)"', client.get(f"/runs/{run_id}").text)
        assert after is not None and int(after.group(1)) == api.store.list_events(run_id)[-1].id
        api.store.start_turn(run_id, 3, 0)
        decision = TurnDecision(Outcome.REJECTED, Reason.NOT_IMPROVED, value=120.0, hypothesis="a third idea")
        event = (EventKind.REJECTED, {"turn": 3})
        api.store.decide_turn(run_id, 3, decision, champion=None, component_heads={}, event=event)
        api.store.set_run_status(run_id, RunStatus.RUNNING)
        api.store.set_run_status(run_id, RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
        with client.stream("GET", f"/runs/{run_id}/live", params={"after": after.group(1)}) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            kinds = [line[7:] for line in stream.iter_lines() if line.startswith("event: ")]
        assert kinds == ["rejected"]  # only what happened after the page was rendered
        fragment = client.get(f"/runs/{run_id}/fragment").text
        assert fragment.count("<tr class=") == 3 and "a third idea" in fragment
    with httpx.Client(base_url=api.url) as anonymous:
        assert anonymous.get(f"/runs/{run_id}/live").status_code == 401
        assert anonymous.get(f"/runs/{run_id}/fragment").status_code == 401


def test_unknown_pages_and_runs_get_an_html_404_and_the_api_keeps_its_json(api: Api) -> None:
    browser = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    with _login(api, READER) as client:
        run = client.get("/runs/nope")
        assert run.status_code == 404 and run.headers["content-type"].startswith("text/html")
        assert (
            "There is no run nope here." in run.text
            and "script-src 'self'" in run.headers["content-security-policy"]
        )
        probe = client.get("/runs/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E")
        assert probe.status_code == 404 and "<img" not in probe.text and "&lt;img src=x" in probe.text
        page = client.get("/no/such/page", headers=browser)
        assert page.status_code == 404 and "There is no page here." in page.text
        api_error = client.get("/api/runs/nope", headers={**browser, "Authorization": f"Bearer {READER}"})
        assert api_error.status_code == 404 and api_error.json()["kind"] == "not_found"
        assert client.get("/no/such/page").json() == {"detail": "Not Found"}  # a client that wants JSON
    with httpx.Client(base_url=api.url, timeout=30) as anonymous:
        assert anonymous.get("/no/such/page", headers=browser).status_code == 404  # no session needed


def test_the_run_page_shows_the_running_turn_with_its_step_and_samples(api: Api) -> None:
    run_id = seeded_run(api.store, _settings(api), "running", turns=2)
    api.store.set_run_status(run_id, RunStatus.RUNNING)
    api.store.start_turn(run_id, 3, 0, event=(EventKind.TURN_STARTED, {"turn": 3, "round": 0}))
    step = {"turn": 3, "round": 0, "step": "measuring", "arms": ["champion", "candidate"]}
    api.store.append_event(run_id, EventKind.TURN_STEP, step)
    for arm, index, value in [("champion", 0, 100.0), ("candidate", 0, 98.5), ("candidate", 1, None)]:
        sample = {
            "turn": 3,
            "round": 0,
            "arm": arm,
            "index": index,
            "value": value,
            "valid": value is not None,
        }
        api.store.append_event(run_id, EventKind.SAMPLE, sample)
    with _login(api, READER) as client:
        html = client.get(f"/runs/{run_id}").text
        assert "Turn 3 (round 0) is running" in html and 'data-turn="3"' in html
        assert '<strong id="turn-live-step">measuring champion vs candidate</strong>' in html
        assert '<td class="values">98.5, invalid</td><td class="median">98.5</td>' in html
        decision = TurnDecision(Outcome.REJECTED, Reason.NOT_IMPROVED, value=98.5, hypothesis="third")
        event = (EventKind.REJECTED, {"turn": 3})
        api.store.decide_turn(run_id, 3, decision, champion=None, component_heads={}, event=event)
        after = client.get(f"/runs/{run_id}").text
        assert "is running" not in after and 'id="turn-live"' in after  # the panel waits, hidden


def test_the_pr_table_shows_the_base_and_the_drift(api: Api) -> None:
    seeded_run(api.store, _settings(api), "drift", turns=3)
    [pull] = api.store.list_pulls("drift")
    with _login(api, READER) as client:
        row = client.get("/runs/drift").text.split("<h2>Pull requests</h2>")[1].split("</tr>")[1]
        assert f"<code>main @ {pull.base_sha[:10]}</code>" in row and "<td>none</td>" in row
        moved = "b" * 40
        api.store.follow_base(
            "drift", "app", new_base=moved, head_sha=pull.head_sha, event={"component": "app"}
        )
        api.store.save_pull(replace(pull, head_sha="f" * 40, base_sha=moved))
        row = client.get("/runs/drift").text.split("<h2>Pull requests</h2>")[1].split("</tr>")[1]
    assert f"<code>main @ {'b' * 10}</code>" in row
    assert f"followed the base 1× since {pull.base_sha[:10]}" in row
    assert f"someone else pushed {'f' * 10} (crucible pushed {pull.pushed_sha[:10]})" in row


def test_a_run_offers_only_the_actions_its_state_allows(api: Api) -> None:
    seeded_run(api.store, _settings(api), "states", turns=3, options=WATCHING)

    def offered() -> list[str]:
        with _login(api, ADMIN) as admin:
            page = admin.get("/runs/states").text
        return re.findall(r'data-action="(\w+)"', page)

    assert offered() == ["cancel"]  # pending
    api.store.set_run_status("states", RunStatus.RUNNING)
    assert offered() == ["cancel"]  # searching: no round yet
    api.store.set_phase("states", RunPhase.WATCHING)
    assert offered() == ["cancel", "round"]
    api.store.set_run_status("states", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)
    assert offered() == ["resume"]
    api.store.set_run_status("states", RunStatus.RUNNING)
    api.store.set_run_status("states", RunStatus.COMPLETED, stop_reason=StopReason.FEEDBACK_CLOSED)
    assert offered() == []
    with _login(api, ADMIN) as admin:
        assert "operator actions" not in admin.get("/runs/states").text
        refused = admin.get("/runs/states/confirm/cancel")
        assert refused.status_code == 409 and "does not apply to a completed run" in refused.text
    assert api.control.calls == []


def test_what_the_forge_refused_of_the_team_process_shows_on_the_run_page(api: Api) -> None:
    seeded_run(api.store, _settings(api), "refused", turns=2, text="<b>x</b>")
    with _login(api, READER) as client:
        page = client.get("/runs/refused").text
    assert '<ul class="problems"><li>reviewer ghost was refused: 422 &lt;b&gt;x&lt;/b&gt;</li></ul>' in page

"""The dashboard in a real browser: Playwright driving Debian's Chromium, headless, against the app served
by uvicorn on a real store. Pages load without console errors (a CSP violation is one), the planted XSS
probes run nothing, the runs list filters, the run page updates live when a turn is decided (no reload),
an action works with the write token and is absent with the read-only one, and the run page fits 390 px.
Screenshots go to ``$CRUCIBLE_TEST_ARTIFACTS`` (else the test's tmp dir).

Chromium is found at ``$CRUCIBLE_CHROMIUM`` or on PATH (``apt-get install chromium``; ``.ci/run`` installs
it). Without it the tests skip, except where a browser is expected (``CI``, ``CRUCIBLE_BROWSER_REQUIRED=1``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.config.settings import Settings
from controller.domain.enums import EventKind, Outcome, Reason, RunPhase, RunStatus, StopReason
from controller.store.records import TurnDecision
from tests.api.conftest import ADMIN, READER, Api
from tests.api.dashboard_runs import parallel_turn, running_parallel_turn, running_turn, seeded_run
from tests.api.gated_loop import SAMPLES, start_gated_loop
from tests.api.sqlite_only import sqlite_only  # noqa: F401  (a fixture: SQLite only)

WATCHING = {"publish_prs": True, "watch_feedback": True}

playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.slow
# Read at import: the autouse ``_isolated_env`` fixture removes CRUCIBLE_* variables before each test.
CHROMIUM = os.environ.get("CRUCIBLE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRED = bool(os.environ.get("CI")) or os.environ.get("CRUCIBLE_BROWSER_REQUIRED") == "1"
ARTIFACTS = os.environ.get("CRUCIBLE_TEST_ARTIFACTS")
AXE = os.environ.get("CRUCIBLE_AXE")  # axe.min.js of npm's axe-core (scripts/testenv/browser.sh installs it)
PROBE = '<script>alert(1)</script> javascript:alert(2) "><img src=x onerror=alert(3)>'


def _chromium() -> str:
    if CHROMIUM:
        return CHROMIUM
    reason = "no chromium (apt-get install chromium, or set CRUCIBLE_CHROMIUM)"
    if REQUIRED:
        pytest.fail(f"a browser is required here but there is {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium() -> Iterator[playwright_api.Browser]:
    """One Chromium for the module's tests on this worker: launching it cost each test about half a
    second of CPU (issue 23). Each test still opens its own contexts (cookies, storage and cache are
    a context's), which ``browser`` closes after it."""
    path = _chromium()
    with playwright_api.sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def browser(chromium: playwright_api.Browser) -> Iterator[playwright_api.Browser]:
    """Ask for it after ``api``: it closes the test's contexts first, so no page holds the server's
    event streams open."""
    assert not chromium.contexts, "a test left a browser context open"
    yield chromium
    for context in chromium.contexts:
        context.close()


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    out = Path(ARTIFACTS or tmp_path) / "dashboard"
    out.mkdir(parents=True, exist_ok=True)
    return out


class Watched:
    """A page with its console errors and dialogs recorded."""

    def __init__(self, page: playwright_api.Page) -> None:
        self.page = page
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("dialog", self._dialog)

    def _dialog(self, dialog: playwright_api.Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()


def _open(browser: playwright_api.Browser, api: Api, token: str, width: int = 1280) -> Watched:
    context = browser.new_context(viewport={"width": width, "height": 900})
    watched = Watched(context.new_page())
    page = watched.page
    page.goto(f"{api.url}/")
    assert page.url.endswith("/login")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{api.url}/")
    return watched


def _settings(api: Api) -> Settings:
    return Settings(home=api.repo.parent / "crucible-home", database_url=api.store.url)


def test_pages_load_clean_and_the_probes_run_nothing(
    api: Api, browser: playwright_api.Browser, artifacts: Path
) -> None:
    seeded_run(api.store, _settings(api), "xss", turns=12, text=PROBE)
    seeded_run(api.store, _settings(api), "done", turns=4)
    api.store.set_run_status("done", RunStatus.RUNNING)
    watched = _open(browser, api, READER)
    page = watched.page
    page.screenshot(path=str(artifacts / "runs.png"), full_page=True)
    assert page.locator("table.runs tbody tr").count() == 2
    page.click("nav.filters >> text=running")
    page.wait_for_url("**/?status=running")
    assert page.locator("table.runs tbody tr").count() == 1
    page.goto(f"{api.url}/runs/xss")
    page.wait_for_selector("#live[data-following=yes]")
    page.screenshot(path=str(artifacts / "run-xss.png"), full_page=True)
    assert page.locator("p.objective").inner_text().endswith(PROBE)
    assert page.locator("img").count() == 0 and page.locator("main script").count() == 0
    assert page.locator("a[href^='javascript:']").count() == 0
    assert page.locator("svg.chart circle.kept").count() == 4
    assert watched.dialogs == [] and watched.errors == []


def test_the_run_page_updates_live_when_a_turn_is_decided(
    api: Api, browser: playwright_api.Browser, artifacts: Path
) -> None:
    run_id = seeded_run(api.store, _settings(api), "live", turns=5)
    api.store.set_run_status(run_id, RunStatus.RUNNING)
    watched = _open(browser, api, READER)
    page = watched.page
    page.goto(f"{api.url}/runs/{run_id}")
    page.wait_for_selector("#live[data-following=yes]")
    assert page.locator("table.turns tbody tr").count() == 5
    page.evaluate("window.__sameDocument = true")
    api.store.start_turn(run_id, 6, 1)
    decision = TurnDecision(Outcome.REJECTED, Reason.NOT_IMPROVED, value=150.0, hypothesis="a sixth idea")
    api.store.decide_turn(
        run_id, 6, decision, champion=None, component_heads={}, event=(EventKind.REJECTED, {})
    )
    playwright_api.expect(page.locator("table.turns tbody tr")).to_have_count(6, timeout=20000)
    assert page.evaluate("window.__sameDocument") is True  # no reload
    assert "a sixth idea" in page.locator("table.turns").inner_text()
    assert page.locator("#live-step").inner_text() == "last event: rejected"  # nothing older replayed
    running_turn(api.store, run_id, 7)  # the next turn's step and samples appear as they arrive
    expect = playwright_api.expect
    expect(page.locator("#turn-live-title")).to_have_text("Turn 7 (round 0) is running", timeout=20000)
    expect(page.locator("#turn-live-samples tr[data-arm=candidate] td.values")).to_have_text(
        "97.5, 96.5, 95.5"
    )
    expect(page.locator("#turn-live-samples tr[data-arm=candidate] td.median")).to_have_text("96.5")
    assert page.evaluate("window.__sameDocument") is True
    page.screenshot(path=str(artifacts / "run-live.png"), full_page=True)
    assert watched.errors == []


def test_the_panel_follows_each_hypothesis_of_a_parallel_turn(
    api: Api, browser: playwright_api.Browser, artifacts: Path
) -> None:
    run_id = seeded_run(api.store, _settings(api), "par", turns=3)
    api.store.set_run_status(run_id, RunStatus.RUNNING)
    watched = _open(browser, api, READER)
    page = watched.page
    page.goto(f"{api.url}/runs/{run_id}")
    page.wait_for_selector("#live[data-following=yes]")
    page.evaluate("window.__sameDocument = true")
    running_parallel_turn(api.store, run_id, 4)  # the events arrive over the stream, no reload
    expect = playwright_api.expect
    title = "Turn 4 (round 0) is running with 2 hypotheses"
    expect(page.locator("#turn-live-title")).to_have_text(title, timeout=20000)
    expect(page.locator("#turn-live-hypotheses li")).to_have_text(
        ["#0: measuring champion vs candidate", "#1: proposing"]
    )
    expect(page.locator("#turn-live-step")).to_have_text("hypothesis #1: proposing")
    row = page.locator('#turn-live-samples tr[data-arm="#0 candidate"]')
    expect(row.locator("td.values")).to_have_text("96.5, invalid")
    expect(row.locator("td.median")).to_have_text("96.5")
    expect(page.locator('#turn-live-samples tr[data-arm="#0 champion"] td.values')).to_have_text("100")
    assert page.evaluate("window.__sameDocument") is True
    page.screenshot(path=str(artifacts / "run-live-parallel.png"), full_page=True)
    assert watched.errors == []


def test_an_action_works_with_the_write_token_and_is_absent_for_a_reader(
    api: Api, browser: playwright_api.Browser, artifacts: Path
) -> None:
    seeded_run(api.store, _settings(api), "act", turns=3)
    reader = _open(browser, api, READER).page
    reader.goto(f"{api.url}/runs/act")
    assert reader.locator("nav.actions").count() == 0
    admin = _open(browser, api, ADMIN)
    admin.page.goto(f"{api.url}/runs/act")
    admin.page.click("text=Cancel this run")
    admin.page.click("text=Confirm: cancel this run")
    assert "cancelling" in admin.page.locator("main").inner_text()
    assert api.control.calls == [("cancel", "act")]
    assert admin.errors == []


def test_the_run_page_fits_a_small_screen(api: Api, browser: playwright_api.Browser, artifacts: Path) -> None:
    seeded_run(api.store, _settings(api), "small", turns=20)
    parallel_turn(api.store, "small", 21, PROBE)
    running_parallel_turn(api.store, "small", 22)  # the running turn's panel shows too, per hypothesis
    watched = _open(browser, api, ADMIN, width=390)
    page = watched.page
    page.goto(f"{api.url}/runs/small")
    assert page.locator("#turn-live").is_visible() and page.locator("#turn-live-hypotheses li").count() == 2
    page.click("td.parallel summary")  # the parallel turn's hypotheses, unfolded
    assert page.locator("table.hypotheses tbody tr").count() == 3
    page.screenshot(path=str(artifacts / "run-390.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.goto(f"{api.url}/runs/small/turns/21")
    page.screenshot(path=str(artifacts / "turn-390.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.locator("img").count() == 0 and watched.dialogs == []
    assert watched.errors == []


def test_axe_finds_no_serious_violation_on_any_page(api: Api, browser: playwright_api.Browser) -> None:
    if not AXE or not Path(AXE).is_file():
        reason = "no axe-core (scripts/testenv/browser.sh installs it and sets CRUCIBLE_AXE)"
        if REQUIRED:
            pytest.fail(f"axe-core is required here but there is {reason}")
        pytest.skip(reason)
    seeded_run(api.store, _settings(api), "a11y", turns=8, text="<b>x</b>")
    parallel_turn(api.store, "a11y", 9, "<b>x</b>")
    running_parallel_turn(api.store, "a11y", 10)  # axe sees the running turn's panel as well
    # The CSP forbids the injected (inline) script; this context alone bypasses it, for axe only.
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    found: dict[str, list[str]] = {}
    for path in ["/login", "/", "/runs/a11y", "/runs/a11y/turns/9", "/runs/a11y/confirm/cancel"]:
        if path == "/":
            page.fill("#token", ADMIN)
            page.click("button[type=submit]")
            page.wait_for_url(f"{api.url}/")
        else:
            page.goto(f"{api.url}{path}")
        if path == "/runs/a11y":
            page.click("td.parallel summary")  # the hypotheses' table, unfolded
        page.add_script_tag(path=AXE)
        result = page.evaluate("async () => (await axe.run()).violations")
        serious = [f"{v['id']}: {v['help']}" for v in result if v["impact"] in ("serious", "critical")]
        found[path] = serious
    context.close()
    assert found == {path: [] for path in found}


def test_the_page_of_a_running_local_loop_updates_live(
    browser: playwright_api.Browser, artifacts: Path, tmp_path: Path
) -> None:
    """``crucible loop --dashboard``: the printed link logs in and lands on the run, whose running turn
    shows its step and each sample as the (gated) metric lets it through, then the decided turn."""
    expect = playwright_api.expect
    loop = start_gated_loop(tmp_path, "--turns", "2")
    try:
        link = loop.link()
        loop.allow(SAMPLES)  # the baseline; turn 1's first sample is then held
        loop.wait_for("turn 1's first sample to be taken", lambda: loop.taken() >= SAMPLES + 1)
        watched = Watched(browser.new_context(viewport={"width": 1280, "height": 900}).new_page())
        page = watched.page
        page.goto(link)
        page.wait_for_selector("#live[data-following=yes]")
        expect(page.locator("#turn-live-title")).to_have_text("Turn 1 (round 0) is running")
        expect(page.locator("#turn-live-step")).to_have_text("measuring champion vs candidate")
        page.evaluate("window.__sameDocument = true")
        values = "#turn-live-samples tr[data-arm={}] td.{}"
        loop.allow(SAMPLES + 1)
        expect(page.locator(values.format("champion", "values"))).to_have_text("10", timeout=20000)
        loop.allow(SAMPLES + 3)
        expect(page.locator(values.format("candidate", "values"))).to_have_text("9, 9", timeout=20000)
        expect(page.locator(values.format("candidate", "median"))).to_have_text("9")
        page.screenshot(path=str(artifacts / "loop-running-turn.png"), full_page=True)
        loop.allow(3 * SAMPLES)  # the rest of turn 1; turn 2 then waits in its measurement
        expect(page.locator("table.turns tbody tr.accepted")).to_have_count(1, timeout=30000)
        expect(page.locator("#turn-live-title")).to_have_text("Turn 2 (round 0) is running", timeout=20000)
        assert page.evaluate("window.__sameDocument") is True  # no reload
        assert "one less than the champion" in page.locator("table.turns").inner_text()
        assert watched.errors == []
        page.context.close()
        loop.allow(10**6)
        assert loop.proc.wait(timeout=120) == 0, loop.stderr()
    finally:
        loop.stop()


CHART_BOXES = """() => {
  const svg = document.querySelector("svg.chart");
  return [...svg.querySelectorAll("text")].filter((t) => t.textContent.trim()).map((t) => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent, cls: t.getAttribute("class") || "", box: [r.left, r.top, r.right, r.bottom]};
  });
}"""


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.parametrize("width", [390, 1280])
def test_no_two_labels_of_the_chart_overlap(
    api: Api, browser: playwright_api.Browser, artifacts: Path, width: int
) -> None:
    # A long metric name, values whose tick labels are wide, kept turns with labels, and a round.
    seeded_run(api.store, _settings(api), "axes", turns=30, text="x" * 30, metric="p50_latency_ms")
    watched = _open(browser, api, READER, width=width)
    page = watched.page
    page.goto(f"{api.url}/runs/axes")
    page.locator("svg.chart").screenshot(path=str(artifacts / f"chart-{width}.png"))
    texts = page.evaluate(CHART_BOXES)

    title = next(t for t in texts if t["cls"] == "axis-title")
    assert title["text"] == "p50_latency_ms"
    top_tick = min((t for t in texts if t["cls"] == "tick"), key=lambda t: t["box"][1])
    assert title["box"][3] <= top_tick["box"][1], (title, top_tick)  # the title sits above the top tick
    clashes = [
        (a["text"], b["text"])
        for i, a in enumerate(texts)
        for b in texts[i + 1 :]
        if _overlap(a["box"], b["box"])
    ]
    assert clashes == []
    assert watched.errors == []


@pytest.mark.parametrize("width", [390, 1280])
def test_a_finished_run_offers_no_action_and_a_cancelled_one_only_resume(
    api: Api, browser: playwright_api.Browser, width: int
) -> None:
    seeded_run(api.store, _settings(api), "ended", turns=3)
    api.store.set_run_status("ended", RunStatus.RUNNING)
    api.store.set_run_status("ended", RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
    seeded_run(api.store, _settings(api), "stopped", turns=3)
    api.store.set_run_status("stopped", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)
    seeded_run(api.store, _settings(api), "watching", turns=3, options=WATCHING)
    api.store.set_run_status("watching", RunStatus.RUNNING)
    api.store.set_phase("watching", RunPhase.WATCHING)
    admin = _open(browser, api, ADMIN, width=width)
    admin.page.goto(f"{api.url}/runs/ended")
    assert admin.page.locator("nav.actions").count() == 0
    assert admin.page.get_by_text("Cancel this run").count() == 0
    admin.page.goto(f"{api.url}/runs/stopped")
    assert admin.page.locator("nav.actions a").all_inner_texts() == ["Resume this run"]
    admin.page.goto(f"{api.url}/runs/watching")
    buttons = admin.page.locator("nav.actions a")
    assert buttons.all_inner_texts() == ["Cancel this run", "Start a refinement round"]
    for i in range(buttons.count()):  # each action is on screen, whole, at this width
        box = buttons.nth(i).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    assert admin.errors == []


@pytest.mark.parametrize("width", [390, 1280])
def test_what_the_forge_refused_is_shown_beside_the_pull_request(
    api: Api, browser: playwright_api.Browser, width: int
) -> None:
    seeded_run(api.store, _settings(api), "refused", turns=2, text="<b>x</b>")
    reader = _open(browser, api, READER, width=width)
    reader.page.goto(f"{api.url}/runs/refused")
    problem = reader.page.locator("ul.problems li")
    assert problem.all_inner_texts() == ["reviewer ghost was refused: 422 <b>x</b>"]
    problem.scroll_into_view_if_needed()
    assert problem.is_visible()
    assert reader.errors == []

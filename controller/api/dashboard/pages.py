"""The operator dashboard at ``/``: server-rendered pages over the same views as the REST API.

Pages are Jinja2 templates with autoescape on, so every user-provided text (objective, hypotheses,
comments, branch names, diffs) is text, never markup. Each response carries a Content-Security-Policy
that allows scripts and styles only from this origin (``/static/…``, shipped in the package: no CDN,
no build step), no inline script, no plugin, no framing. Reads need a session (``session.py``) or a
bearer token; operator actions need an admin session, a CSRF token and a confirmation page first, and
are the same ``RunControl`` calls as the REST routes. A read-only session sees no buttons and is
refused anyway. The run page's live part (chart and turn table) is a fragment that the shipped
script re-fetches when the run's event stream (``/runs/{id}/live``, cookie-authenticated) says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypedDict

from fastapi import APIRouter, FastAPI, Form, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.exceptions import HTTPException as StarletteHTTPException

from controller.api.auth import ApiTokens
from controller.api.dashboard import highlight, model
from controller.api.dashboard.chart import Point, render_chart
from controller.api.dashboard.session import COOKIE, TTL_S, Role, Session, Sessions
from controller.api.events import event_stream
from controller.api.runs import RunControl
from controller.api.streams import LimitedStream, StreamSlots
from controller.config.settings import Settings
from controller.domain.enums import Direction, EventKind, Outcome, RunStatus
from controller.domain.errors import NotFoundError
from controller.services.views import schemas
from controller.services.views.reads import run_view, turns_page
from controller.store.ports import RunViews, SessionRevocations
from controller.store.records import RunRecord

HERE = Path(__file__).parent
PAGE = 25
RUNNING_EVENTS = 2000  # the running turn's steps and samples read for the page, at most
UNFOLDED = 20  # the latest parallel turns whose hypotheses' table the run page carries (older: a link)
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css"}


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"], default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = lambda v: "" if v is None else f"{v:.6g}"
    env.filters["usd"] = lambda v: f"${v:.2f}"
    return env


class RunPage(TypedDict):
    """What ``run.html`` and ``live.html`` are rendered with (the templates name these keys)."""

    running: model.RunningTurn | None
    run: schemas.Run
    record: RunRecord
    after: int
    chart: str
    turns: list[model.TurnLine]
    change: str
    stop: str
    duration: str
    diff_html: Callable[[str], Markup]
    hypothesis_lines: Callable[[schemas.Turn], list[model.HypothesisLine]]
    hypotheses_summary: Callable[[Mapping[int, Outcome]], str]
    parallel: dict[int, dict[int, Outcome]]  # each parallel turn's hypotheses' outcomes, by index
    unfolded: frozenset[int]
    safe_url: Callable[[str], str | None]
    kept: int
    pulls: dict[str, model.PullLine]


def chart_svg(run: schemas.Run) -> str:
    points = [Point(t.turn, t.round, t.outcome, t.value, t.hypothesis) for t in run.turns]
    return render_chart(
        points,
        baseline=run.baseline.value,
        metric=run.metric.name,
        minimize=run.metric.direction is Direction.MINIMIZE,
    )


class Dashboard:
    """The page handlers' shared parts: templates, sessions and the store.

    ``control`` None serves the pages read-only (no action routes at all: ``crucible loop
    --dashboard``); ``link_login`` names where ``GET /login?token=…`` lands after setting the
    session, for the link a local loop prints (None: only the login form, as ``crucible serve``)."""

    def __init__(
        self,
        settings: Settings,
        store: RunViews,
        tokens: ApiTokens,
        control: RunControl | None,
        *,
        link_login: str | None = None,
        slots: StreamSlots | None = None,
        revocations: SessionRevocations | None = None,
    ) -> None:
        self.settings, self.store, self.control = settings, store, control
        api = settings.api
        self.slots = slots or StreamSlots(
            per_credential=api.max_event_streams_per_token, total=api.max_event_streams
        )
        self.link_login = link_login
        self.sessions = Sessions(tokens, revocations=revocations)
        self.env = _environment()

    def session(self, request: Request) -> Session | None:
        found = self.sessions.check(request.cookies.get(COOKIE))
        if found is not None:
            return found
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        role = self.sessions.role_of(value) if scheme.lower() == "bearer" and value else None
        return Session(role, "bearer") if role else None

    def render(self, name: str, http_status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(**context)
        return HTMLResponse(html, status_code=http_status, headers=HEADERS)

    def page(self, request: Request, name: str, session: Session, **context: Any) -> HTMLResponse:
        csrf = self.sessions.csrf(session)
        return self.render(name, session=session, csrf=csrf, **context)

    def run_context(self, run_id: str, *, with_diffs: bool) -> RunPage:
        after = self.store.last_event_id(run_id)  # read first: an event in between is re-sent, not lost
        # What each parallel turn's folded row shows, then the samples of the few turns it unfolds only.
        parallel = self.store.hypothesis_outcomes(run_id)
        unfolded = model.unfolded_turns(parallel, UNFOLDED)
        run = run_view(self.settings, self.store, run_id, with_diffs=with_diffs, hypotheses_of=unfolded)
        record = self.store.get_run(run_id)
        return {
            "running": self.running_turn(run_id, after) if record.status is RunStatus.RUNNING else None,
            "run": run,
            "record": record,
            "after": after,
            "chart": chart_svg(run),
            "turns": model.turn_lines(run.turns, run.baseline.value),
            "change": model.change_pct(run.baseline.value, run.best.value if run.best else None),
            "stop": model.stop_sentence(run.stop_reason, run.message),
            "duration": model.duration(run.created_at, run.finished_at),
            "diff_html": highlight.diff_html,
            "hypothesis_lines": model.hypothesis_lines,
            "hypotheses_summary": model.hypotheses_summary,
            "parallel": parallel,
            "unfolded": unfolded,
            "safe_url": model.safe_url,
            "kept": sum(1 for t in run.turns if t.outcome == "accepted"),
            "pulls": model.pull_lines(self.store.list_pulls(run_id), self.store.list_components(run_id))
            if run.pull_requests
            else {},
        }

    def running_turn(self, run_id: str, upto: int) -> model.RunningTurn | None:
        """The undecided turn from the events up to ``upto`` (the live script follows from there)."""
        started = self.store.last_event_of(run_id, EventKind.TURN_STARTED)
        if started is None or started.id > upto:
            return None
        events = self.store.list_events(run_id, after_id=started.id - 1, limit=RUNNING_EVENTS)
        return model.running_turn([e for e in events if e.id <= upto])

    def not_found(self, request: Request, what: str) -> HTMLResponse:
        session = self.sessions.check(request.cookies.get(COOKIE))
        return self.render("404.html", http_status=404, session=session, what=what)


def _login_redirect() -> RedirectResponse:
    return RedirectResponse("/login", status_code=303, headers=HEADERS)


def _logged_in(request: Request, dash: Dashboard, role: Role, target: str) -> RedirectResponse:
    response = RedirectResponse(target, status_code=303, headers=HEADERS)
    response.set_cookie(
        COOKIE,
        dash.sessions.issue(role),
        max_age=TTL_S,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


def dashboard_router(
    settings: Settings,
    store: RunViews,
    tokens: ApiTokens,
    control: RunControl | None,
    *,
    link_login: str | None = None,
    slots: StreamSlots | None = None,
    revocations: SessionRevocations | None = None,
) -> APIRouter:
    """The pages; ``slots`` caps live streams, shared with the API's (default: the settings' own);
    ``revocations`` holds the logouts (``crucible serve``: the store, shared by its replicas; default:
    this process's memory)."""
    dash = Dashboard(
        settings, store, tokens, control, link_login=link_login, slots=slots, revocations=revocations
    )
    router = APIRouter(include_in_schema=False)
    _session_routes(router, dash)
    _read_routes(router, dash)
    if control is not None:
        _action_routes(router, dash, control)
    return router


API_PREFIXES = ("/api/", "/webhooks/", "/healthz", "/readyz", "/metrics", "/docs", "/openapi.json")


def install_not_found_page(app: FastAPI) -> None:
    """A 404 for a browser (``Accept: text/html``) outside the API is the dashboard's page; the API,
    webhooks, probes and any client that does not ask for HTML keep the JSON error."""
    env = _environment()

    async def not_found(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        wants_html = "text/html" in request.headers.get("accept", "")
        if exc.status_code != 404 or not wants_html or request.url.path.startswith(API_PREFIXES):
            return await http_exception_handler(request, exc)
        html = env.get_template("404.html").render(session=None, what="page")
        return HTMLResponse(html, status_code=404, headers=HEADERS)

    app.add_exception_handler(StarletteHTTPException, not_found)


def _session_routes(router: APIRouter, dash: Dashboard) -> None:
    @router.get("/login", response_model=None)
    def login_form(request: Request, token: Annotated[str | None, Query(max_length=4096)] = None) -> Response:
        if token is not None and dash.link_login is not None:
            role = dash.sessions.role_of(token)
            if role is not None:
                return _logged_in(request, dash, role, dash.link_login)
            return dash.render("login.html", http_status=401, error="That link's token is not valid.")
        return dash.render("login.html", error=None)

    @router.post("/login", response_model=None)
    def login(request: Request, token: Annotated[str, Form(max_length=4096)] = "") -> Response:
        role = dash.sessions.role_of(token)
        if role is None:
            return dash.render("login.html", http_status=401, error="That token is not valid.")
        return _logged_in(request, dash, role, "/")

    @router.post("/logout")
    def logout(request: Request) -> RedirectResponse:
        session = dash.sessions.check(request.cookies.get(COOKIE))
        if session is not None:
            dash.sessions.revoke(session)
        response = _login_redirect()
        response.delete_cookie(COOKIE, path="/")
        return response

    @router.get("/static/{name}")
    def static(name: str) -> Response:
        path = HERE / "static" / name
        kind = STATIC_TYPES.get(path.suffix)
        if kind is None or "/" in name or not path.is_file():
            raise HTTPException(status_code=404, detail="not found")
        return Response(
            path.read_bytes(), media_type=kind, headers={**HEADERS, "Cache-Control": "max-age=300"}
        )


def _read_routes(router: APIRouter, dash: Dashboard) -> None:
    @router.get("/", response_model=None)
    def runs(
        request: Request,
        status: RunStatus | None = None,
        offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    ) -> Response:
        session = dash.session(request)
        if session is None:
            return _login_redirect()
        records = dash.store.page_runs(limit=PAGE + 1, offset=offset, status=status)
        more = len(records) > PAGE
        records = records[:PAGE]
        tallies = dash.store.run_tallies([r.id for r in records])
        lines = [model.RunLine(r, tallies[r.id]) for r in records]
        return dash.page(
            request,
            "runs.html",
            session,
            lines=lines,
            status=status,
            statuses=list(RunStatus),
            offset=offset,
            prev_offset=max(0, offset - PAGE) if offset else None,
            next_offset=offset + PAGE if more else None,
        )

    @router.get("/runs/{run_id}", response_model=None)
    def run_page(request: Request, run_id: str) -> Response:
        session = dash.session(request)
        if session is None:
            return _login_redirect()
        try:
            context = dash.run_context(run_id, with_diffs=True)
        except NotFoundError:
            return dash.not_found(request, f"run {run_id}")
        record = context["record"]
        actions = model.run_actions(record, dash.store.list_pulls(run_id)) if dash.control else {}
        return dash.page(request, "run.html", session, actions=actions, **context)

    @router.get("/runs/{run_id}/turns/{number}", response_model=None)
    def turn_page(
        request: Request, run_id: str, number: Annotated[int, PathParam(ge=1, le=2**31)]
    ) -> Response:
        session = dash.session(request)
        if session is None:
            return _login_redirect()
        try:
            record = dash.store.get_run(run_id)
        except NotFoundError:
            return dash.not_found(request, f"run {run_id}")
        before = turns_page(dash.store, run_id, after=0, limit=number)  # the champion it faced
        lines = model.turn_lines(before, record.baseline_value)
        line = next((x for x in lines if x.turn.turn == number), None)
        if line is None:
            return dash.not_found(request, f"decided turn {number} in run {run_id}")
        context = {"run_id": run_id, "line": line, "metric": record.metric_name}
        return dash.page(request, "turn.html", session, hypothesis_lines=model.hypothesis_lines, **context)

    @router.get("/runs/{run_id}/fragment", response_model=None)
    def fragment(request: Request, run_id: str) -> Response:
        session = dash.session(request)
        if session is None:
            raise HTTPException(status_code=401, detail="log in first")
        return dash.page(request, "live.html", session, **dash.run_context(run_id, with_diffs=False))

    @router.get("/runs/{run_id}/live", response_model=None)
    def live(request: Request, run_id: str, after: Annotated[int, Query(ge=0, le=2**62)] = 0) -> Response:
        if dash.session(request) is None:
            raise HTTPException(status_code=401, detail="log in first")
        dash.store.get_run(run_id)
        header = request.headers.get("last-event-id", "")
        start = max(after, int(header)) if header.isdigit() else after
        credential = request.cookies.get(COOKIE) or request.headers.get("authorization", "")
        return LimitedStream(
            event_stream(dash.store, run_id, start, True, 0.5),
            media_type="text/event-stream",
            headers={**HEADERS, "X-Accel-Buffering": "no"},
            release=dash.slots.take(credential),
        )


def _action_routes(router: APIRouter, dash: Dashboard, control: RunControl) -> None:
    def writer(request: Request) -> Session:
        session = dash.session(request)
        if session is None:
            raise HTTPException(status_code=401, detail="log in first")
        if not session.can_write:
            raise HTTPException(status_code=403, detail="the read-only token may not change anything")
        return session

    @router.get("/runs/{run_id}/confirm/{action}")
    def confirm(request: Request, run_id: str, action: str) -> HTMLResponse:
        session = writer(request)
        if action not in model.ACTIONS:
            raise HTTPException(status_code=404, detail=f"action: no such action {action[:40]!r}")
        run = dash.store.get_run(run_id)
        if action not in model.run_actions(run, dash.store.list_pulls(run_id)):
            detail = f"action: {model.ACTIONS[action].lower()} does not apply to a {run.status} run"
            raise HTTPException(status_code=409, detail=detail)
        title = model.ACTIONS[action]
        return dash.page(request, "confirm.html", session, run=run, action=action, title=title)

    @router.post("/runs/{run_id}/do/{action}")
    def act(
        request: Request,
        run_id: str,
        action: str,
        csrf: Annotated[str, Form(max_length=200)] = "",
        steer: Annotated[str, Form(max_length=20000)] = "",
    ) -> HTMLResponse:
        session = writer(request)
        if session.nonce == "bearer" or not dash.sessions.csrf_ok(session, csrf):
            raise HTTPException(status_code=403, detail="csrf: the form's token is missing or stale")
        if action == "cancel":
            message = control.cancel(run_id)
        elif action == "resume":
            message = control.resume(run_id)
        elif action == "round":
            if not steer.strip():
                raise HTTPException(status_code=422, detail="steer: say what the round should address")
            message = control.steer(run_id, steer).message
        else:
            raise HTTPException(status_code=404, detail=f"action: no such action {action[:40]!r}")
        return dash.page(request, "done.html", session, run_id=run_id, message=message)

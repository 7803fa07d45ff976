"""The controller's one FastAPI application: operator API, webhooks, probes, metrics and ``/docs``.

``create_app`` only assembles routers from what it is given (store, tokens, the run control, the
webhook secret); it reads no environment and starts nothing but the webhook writer (through the
router's lifespan), so tests build it with real parts and ``crucible serve`` builds it once in the
composition root. FastAPI is imported in ``controller.api`` only. ``/`` is the dashboard
(``controller.api.dashboard``).
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI

from controller.api import errors
from controller.api.apidocs import docs_router
from controller.api.auth import ApiTokens, BearerAuth
from controller.api.dashboard.pages import dashboard_router, install_not_found_page
from controller.api.events import events_router
from controller.api.head import HeadAsGet
from controller.api.hotpath import HotPath
from controller.api.ops import ServiceStats, ops_router
from controller.api.pagecache import PageCache
from controller.api.runs import RunControl, runs_router
from controller.api.streams import StreamSlots
from controller.api.webhooks import webhook_router
from controller.api.worker import worker_router
from controller.config.settings import Settings
from controller.services.control.admission import Admission
from controller.services.control.submit import ForgeFactory
from controller.services.remote.remote_rounds import RemoteRounds
from controller.store.hot_reads import hot_reads
from controller.store.store import Store

API_VERSION = "1"


def create_app(
    settings: Settings,
    store: Store,
    tokens: ApiTokens,
    control: RunControl,
    *,
    webhook_secret: str | None = None,
    on_delivery: Callable[[], None] | None = None,
    stats: ServiceStats | None = None,
    forge_for: ForgeFactory | None = None,
    events_poll_s: float = 0.5,
    remote: RemoteRounds | None = None,
    admission: Admission | None = None,
) -> FastAPI:
    app = FastAPI(
        title="crucible controller",
        version=API_VERSION,
        description="The operator REST API of crucible. Bearer token: CRUCIBLE_API_TOKEN "
        "(everything) or CRUCIBLE_API_READONLY_TOKEN (GET and HEAD only; HEAD answers wherever GET does).",
        docs_url=None,  # our own /docs: Swagger UI from the package, under the CSP (``apidocs``)
        redoc_url=None,
    )
    errors.install(app)
    install_not_found_page(app)
    auth = BearerAuth(tokens)
    turn_pages: PageCache[int] = PageCache()
    # The runs list and cached turn pages, answered before FastAPI's machinery (ADR-0021).
    app.add_middleware(
        HotPath, tokens=tokens, reads=hot_reads(store), turn_pages=turn_pages, run_pages=PageCache()
    )
    app.add_middleware(HeadAsGet)  # outermost: HEAD is a GET to everything inside (hot path, auth)
    app.include_router(runs_router(settings, store, control, auth, forge_for, turn_pages, admission))
    api = settings.api
    slots = StreamSlots(per_credential=api.max_event_streams_per_token, total=api.max_event_streams)
    app.include_router(events_router(store, auth, slots, poll_s=events_poll_s))
    app.include_router(docs_router())
    app.include_router(ops_router(store, stats or ServiceStats()))
    app.include_router(webhook_router(store, webhook_secret, on_delivery=on_delivery))
    app.include_router(dashboard_router(settings, store, tokens, control, slots=slots, revocations=store))
    if remote is not None:
        # The routes of ``crucible worker`` (their own per-round tokens; not in /docs: ADR-0014).
        app.include_router(worker_router(remote))
    return app

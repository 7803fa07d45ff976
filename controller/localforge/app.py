"""Assembles the local forge's ASGI application from its services, routes and middleware."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from controller.localforge import (
    graphql_api,
    routes_access,
    routes_checks,
    routes_contents,
    routes_pulls,
    routes_repos,
    routes_reviews,
    routes_triage,
    smarthttp,
    web,
)
from controller.localforge.assignees import Assignees
from controller.localforge.checks import Checks
from controller.localforge.comments import Comments
from controller.localforge.errors import Forbidden
from controller.localforge.faults import Fault, FaultInjector, FaultPlan
from controller.localforge.hooks import Hooks
from controller.localforge.httpkit import (
    ApiHeaders,
    DateHeader,
    Services,
    TrailingSlash,
    get_ctx,
    install_error_handlers,
    json_body,
)
from controller.localforge.issues import Issues
from controller.localforge.labels import Labels
from controller.localforge.pulls import Pulls
from controller.localforge.ratelimit import RateLimiter
from controller.localforge.refs import PushEvents, Refs
from controller.localforge.review_requests import ReviewRequests
from controller.localforge.reviews import Reviews
from controller.localforge.service import Ctx, Forge
from controller.localforge.storage import Clock, utc_now
from controller.localforge.webhooks import Target


def create_app(
    root: Path,
    *,
    webhook_url: str | None = None,
    webhook_secret: str | None = None,
    public_url: str | None = None,
    clock: Clock = utc_now,
    faults: FaultPlan | None = None,
) -> FastAPI:
    """The forge serving ``root`` (``forge.db`` and ``git/``), created on first use.

    ``webhook_url``/``webhook_secret`` receive every event of every repository (besides hooks
    created through the API). ``public_url`` fixes the URL root printed in answers and payloads;
    by default it is taken from each request's ``Host``.
    """
    root.mkdir(parents=True, exist_ok=True)
    target = Target(webhook_url, webhook_secret) if webhook_url else None
    forge = Forge(root, webhook=target, clock=clock)
    PushEvents(forge)  # before Pulls: GitHub sends ``push`` before ``pull_request.synchronize``
    pulls = Pulls(forge)
    limiter = RateLimiter(clock=lambda: clock().timestamp())  # one clock for the whole forge
    plan = faults if faults is not None else FaultPlan()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        forge.close()

    app = FastAPI(
        title="crucible local forge",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
        redirect_slashes=False,  # TrailingSlash serves ``/x/`` as ``/x``, as GitHub does
    )
    labels, assignees = Labels(forge, pulls), Assignees(forge, pulls)
    app.state.services = Services(
        forge=forge,
        refs=Refs(forge),
        pulls=pulls,
        reviews=Reviews(forge, pulls),
        comments=Comments(forge, pulls),
        hooks=Hooks(forge),
        labels=labels,
        assignees=assignees,
        review_requests=ReviewRequests(forge, pulls),
        issues=Issues(forge, pulls, labels, assignees),
        checks=Checks(forge, pulls),
        limiter=limiter,
        public_url=public_url,
    )
    app.state.faults = plan
    install_error_handlers(app)
    app.include_router(routes_checks.router)  # before routes_repos: its ``/commits/{ref}`` takes any path
    app.include_router(routes_triage.router)
    app.include_router(routes_repos.router)
    app.include_router(routes_contents.router)
    app.include_router(routes_access.router)
    app.include_router(routes_pulls.router)
    app.include_router(routes_reviews.router)
    app.include_router(graphql_api.router)
    app.add_api_route("/_forge/faults", _add_fault, methods=["POST"], status_code=201)
    app.include_router(smarthttp.router)
    app.include_router(web.router)
    app.add_middleware(ApiHeaders, limiter=limiter)
    app.add_middleware(FaultInjector, plan=plan)
    app.add_middleware(DateHeader, clock=clock)
    app.add_middleware(TrailingSlash)
    return app


def _add_fault(
    request: Request,
    ctx: Annotated[Ctx, Depends(get_ctx)],
    body: Annotated[dict[str, Any], Depends(json_body)],
) -> JSONResponse:
    """Site admins add a fault rule over HTTP (see ``faults``)."""
    if ctx.actor is None or not ctx.actor.site_admin:
        raise Forbidden("Only site administrators may inject faults.")
    try:
        fault = Fault(**body)
    except (TypeError, ValueError) as exc:
        return JSONResponse({"message": str(exc)}, status_code=422)
    plan: FaultPlan = request.app.state.faults
    plan.add(fault)
    return JSONResponse({"added": body}, status_code=201)

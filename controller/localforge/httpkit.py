"""The forge's HTTP edge: credentials, request context, JSON bodies, errors, pagination, headers.

Errors become GitHub-shaped bodies in exactly one place (``install_error_handlers``). The
``ApiHeaders`` middleware gives every ``/api/`` answer GitHub's ``X-RateLimit-*`` headers, an
``ETag`` on successful GETs and ``304 Not Modified`` (not counted against the rate limit) when the
client's ``If-None-Match`` matches.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import formatdate, parsedate_to_datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controller.localforge.assignees import Assignees
from controller.localforge.checks import Checks
from controller.localforge.comments import Comments
from controller.localforge.errors import DOCS, BadRequest, ForgeError, Invalid, NotFound, Unauthorized
from controller.localforge.hooks import Hooks
from controller.localforge.issues import Issues
from controller.localforge.labels import Labels
from controller.localforge.media import BodyFormat, body_format, with_bodies
from controller.localforge.pulls import Pulls
from controller.localforge.ratelimit import RateLimiter
from controller.localforge.refs import Refs
from controller.localforge.render import Urls
from controller.localforge.review_requests import ReviewRequests
from controller.localforge.reviews import Reviews
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]
# The GitHub Enterprise Server release whose API the forge answers as (clients read the header to
# tell GHES from github.com, and ``/meta`` reports it as ``installed_version``).
ENTERPRISE_VERSION = "3.17.0"


@dataclass
class Services:
    """Everything a route needs, stored on ``app.state.services``."""

    forge: Forge
    refs: Refs
    pulls: Pulls
    reviews: Reviews
    comments: Comments
    hooks: Hooks
    labels: Labels
    assignees: Assignees
    review_requests: ReviewRequests
    issues: Issues
    checks: Checks
    limiter: RateLimiter
    public_url: str | None = None


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


def credentials(header: str | None) -> str | None:
    """The token in ``Authorization``: ``token T``, ``Bearer T`` or HTTP basic with T as password."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() in {"token", "bearer"}:
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            user, _, password = base64.b64decode(value.strip()).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise Unauthorized("Bad credentials") from exc
        if password and password != "x-oauth-basic":  # token as password (git, x-access-token:T)
            return password
        return user or None  # token as user name (GitHub's T:x-oauth-basic form)
    raise Unauthorized("Bad credentials")


def caller_key(authorization: str | None, client_host: str | None) -> str:
    """Whom the rate limit counts: the credentials when given, else the client address."""
    if authorization:
        return hashlib.sha256(authorization.encode()).hexdigest()
    return f"ip:{client_host or 'local'}"


def base_url(request: Request) -> str:
    return services(request).public_url or str(request.base_url)


def get_ctx(request: Request) -> Ctx:
    """FastAPI dependency: the caller (401 for a bad token) and the URL root to render with."""
    forge = services(request).forge
    actor = forge.authenticate(credentials(request.headers.get("authorization")))
    return Ctx(actor, Urls(base_url(request)))


async def json_body(request: Request) -> Json:
    """FastAPI dependency: the JSON object body ({} when empty)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise BadRequest("Problems parsing JSON") from exc
    if not isinstance(data, dict):
        raise BadRequest("Problems parsing JSON")
    return data


async def json_value(request: Request) -> Any:
    """FastAPI dependency: any JSON body, object or array (GitHub takes ``["bug"]`` for labels)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise BadRequest("Problems parsing JSON") from exc


def bodies(request: Request, item: Json, *, body_required: bool = True) -> Json:
    """``item`` with the ``body_html``/``body_text`` the request's ``Accept`` asks for (``media``)."""
    return with_bodies(item, body_format(request.headers.get("accept")), body_required=body_required)


def params(request: Request) -> dict[str, str]:
    return dict(request.query_params)


def since(request: Request) -> str | None:
    """The ``since`` query parameter normalised to the stored timestamp format."""
    raw = request.query_params.get("since")
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise Invalid([{"resource": "Search", "field": "since", "code": "invalid"}]) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _int_param(request: Request, name: str, default: int) -> int:
    try:
        return int(request.query_params.get(name, default))
    except ValueError:
        return default


def paginated(request: Request, items: list[Json], *, key: str | None = None) -> JSONResponse:
    """One page of ``items`` (``per_page``/``page``) with GitHub's ``Link`` header; with ``key``,
    the page is wrapped as ``{"total_count": N, key: page}`` (check runs, for one)."""
    per_page = min(max(_int_param(request, "per_page", 30), 1), 100)
    page = max(_int_param(request, "page", 1), 1)
    last = max(math.ceil(len(items) / per_page), 1)
    url = base_url(request).rstrip("/") + request.url.path
    query = dict(request.query_params)

    def link(number: int, rel: str) -> str:
        return f'<{url}?{urlencode({**query, "page": str(number)})}>; rel="{rel}"'

    links = []
    if page > 1:
        links.append(link(min(page - 1, last), "prev"))
    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    if page > 1:
        links.append(link(1, "first"))
    headers = {"Link": ", ".join(links)} if links else {}
    shown = items[(page - 1) * per_page : page * per_page]
    if key is not None:
        return JSONResponse({"total_count": len(items), key: shown}, headers=headers)
    return JSONResponse(shown, headers=headers)


# -- errors ------------------------------------------------------------------------------------


def _error(status: int, body: Json) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Basic realm="GitHub"'} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Map forge errors, unknown routes and unparsable requests to GitHub's error bodies."""

    async def forge_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, ForgeError)
        return _error(exc.status, exc.body())

    async def http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 405:  # GitHub has no 405: a method a path does not serve is Not Found
            return _error(404, NotFound().body())
        message = "Not Found" if exc.status_code == 404 else str(exc.detail)
        return _error(
            exc.status_code, {"message": message, "documentation_url": DOCS, "status": str(exc.status_code)}
        )

    async def validation_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if any(err.get("loc", ("",))[0] == "path" for err in exc.errors()):
            return _error(404, NotFound().body())
        return _error(400, BadRequest("Problems parsing JSON").body())

    app.add_exception_handler(ForgeError, forge_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)


# -- headers middleware ------------------------------------------------------------------------


def _etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    wanted = etag.removeprefix("W/")
    return any(t.strip() == "*" or t.strip().removeprefix("W/") == wanted for t in header.split(","))


def _last_modified(body: bytes) -> float | None:
    """The ``updated_at`` of a single-object answer, as a timestamp (GitHub's ``Last-Modified``)."""
    if not body.startswith(b"{"):
        return None
    try:
        stamp = json.loads(body).get("updated_at")
        return (
            datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            if isinstance(stamp, str)
            else None
        )
    except ValueError:
        return None


def _not_modified_since(header: str | None, modified: float) -> bool:
    if not header:
        return False
    try:
        return modified <= parsedate_to_datetime(header).timestamp()
    except (TypeError, ValueError):
        return False


class TrailingSlash:
    """Pure ASGI middleware serving ``/api/v3/x/`` as ``/api/v3/x``, as GitHub does (its router
    ignores a trailing slash), instead of redirecting: clients do not all follow a redirect, and
    a redirect that met a catch-all route answered the wrong thing (``/commits/`` read as a ref).
    The API root is ``/api/v3/`` with its slash."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        fixed = path
        if path == "/api/v3":
            fixed = "/api/v3/"
        elif path.startswith("/api/v3/") and len(path) > len("/api/v3/") and path.endswith("/"):
            fixed = path.rstrip("/") or "/"
        if fixed != path:
            scope = {**scope, "path": fixed, "raw_path": fixed.encode()}
        await self.app(scope, receive, send)


class DateHeader:
    """Pure ASGI middleware stamping every answer's ``Date`` from the forge's clock, exactly.

    uvicorn's own ``Date`` is refreshed about once a second, so it can lag the ``updated_at`` the
    same answer carries; the poller compares the two to decide whether a same-second update could
    still be hidden (GitHub's ``Date`` is exact), so the servers run with ``date_header=False``.
    """

    def __init__(self, app: ASGIApp, clock: Callable[[], datetime]) -> None:
        self.app = app
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["Date"] = formatdate(self.clock().timestamp(), usegmt=True)
            await send(message)

        await self.app(scope, receive, stamped)


class ApiHeaders:
    """Pure ASGI middleware adding rate-limit headers, ETags and 304s to ``/api/`` answers."""

    def __init__(self, app: ASGIApp, limiter: RateLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        auth = headers.get("authorization")
        client = scope.get("client") or ("local", 0)
        key = caller_key(auth, client[0])
        resource = "graphql" if scope["path"] == "/api/graphql" else "core"
        free = scope["path"].rstrip("/").endswith("/rate_limit")
        quota = self.limiter.peek(key, resource, authenticated=bool(auth))
        if quota.remaining == 0 and not free:
            body = {"message": "API rate limit exceeded.", "documentation_url": DOCS}
            response = JSONResponse(body, status_code=403, headers=quota.headers())
            await response(scope, receive, send)
            return
        conditional = scope["method"] in {"GET", "HEAD"}
        state = _Exchange(self, key, resource, bool(auth), free, headers.get("if-none-match"))
        state.accept = headers.get("accept")
        state.since = headers.get("if-modified-since")
        await self.app(scope, receive, state.wrap(send, conditional))


class _Exchange:
    """One request's response, buffered for GETs so the ETag can be computed over the body."""

    def __init__(self, owner: ApiHeaders, key: str, resource: str, auth: bool, free: bool, match: str | None):
        self.owner, self.key, self.resource, self.auth, self.free, self.match = (
            owner,
            key,
            resource,
            auth,
            free,
            match,
        )
        self.accept: str | None = None
        self.since: str | None = None
        self.start: Message | None = None
        self.chunks: list[bytes] = []

    def _decorate(self, start: Message, *, counted: bool) -> MutableHeaders:
        limiter = self.owner.limiter
        if counted and not self.free:
            quota = limiter.hit(self.key, self.resource, authenticated=self.auth)
        else:
            quota = limiter.peek(self.key, self.resource, authenticated=self.auth)
        headers = MutableHeaders(scope=start)
        for name, value in quota.headers().items():
            headers[name] = value
        fmt = body_format(self.accept)
        param = "" if fmt is BodyFormat.RAW else f" param={fmt.value};"
        headers["X-GitHub-Media-Type"] = f"github.v3;{param} format=json"
        headers["X-GitHub-Request-Id"] = uuid.uuid4().hex[:20].upper()
        headers["X-GitHub-Enterprise-Version"] = ENTERPRISE_VERSION
        headers["Access-Control-Expose-Headers"] = (
            "ETag, Link, Location, Retry-After, X-RateLimit-Limit, "
            "X-RateLimit-Remaining, X-RateLimit-Used, X-RateLimit-Resource, X-RateLimit-Reset"
        )
        return headers

    def wrap(self, send: Send, conditional: bool) -> Send:
        async def passthrough(message: Message) -> None:
            if message["type"] == "http.response.start":
                self._decorate(message, counted=True)
            await send(message)

        async def buffered(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.start = message
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            self.chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                await self._finish(send)

        return buffered if conditional else passthrough

    async def _finish(self, send: Send) -> None:
        assert self.start is not None
        body = b"".join(self.chunks)
        start = self.start
        if start["status"] != 200:
            self._decorate(start, counted=True)
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return
        etag = f'W/"{hashlib.sha256(body).hexdigest()}"'
        modified = _last_modified(body)
        if _etag_matches(self.match, etag) or (
            self.match is None and modified is not None and _not_modified_since(self.since, modified)
        ):
            start = {"type": "http.response.start", "status": 304, "headers": []}
            headers = self._decorate(start, counted=False)
            body = b""
        else:
            headers = self._decorate(start, counted=True)
        headers["ETag"] = etag
        if modified is not None:
            headers["Last-Modified"] = formatdate(modified, usegmt=True)
        headers["Cache-Control"] = "private, max-age=60, s-maxage=60"
        headers["Vary"] = "Accept, Authorization, Cookie, X-GitHub-OTP"
        await send(start)
        await send({"type": "http.response.body", "body": body})

"""Checks the forge's answers against GitHub's own OpenAPI description (the oracle subset).

``Recorder`` is an ASGI middleware that keeps every ``/api/v3`` exchange of a test; ``validate``
runs each JSON answer whose operation is in the subset through ``openapi-core``. Answers of
operations outside the subset are returned separately so a test can see what was skipped (the
forge's README lists those routes and why).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from openapi_core import Config, OpenAPI
from openapi_core.templating.responses.exceptions import ResponseNotFound
from openapi_core.testing import MockRequest, MockResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.testdata import OPENAPI_SUBSET as SUBSET


@dataclass(frozen=True)
class Exchange:
    method: str
    path: str
    query: str
    status: int
    content_type: str
    body: bytes


class Recorder:
    """ASGI middleware recording every ``/api/v3`` request's answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.exchanges: list[Exchange] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/v3"):
            await self.app(scope, receive, send)
            return
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def spy(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    headers = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
                    self.exchanges.append(
                        Exchange(
                            scope["method"],
                            scope["path"],
                            scope["query_string"].decode(),
                            start["status"],
                            headers.get("content-type", ""),
                            b"".join(chunks),
                        )
                    )
            await send(message)

        await self.app(scope, receive, spy)


def _null_in_nullable_enums(node: Any) -> Any:
    """Add ``None`` to the ``enum`` of every ``nullable`` schema, in place.

    GitHub's description marks e.g. ``start_side`` and ``state_reason`` ``nullable`` with an enum
    that lists only the strings, and GitHub sends ``null`` for them. OpenAPI 3.0.3 leaves open
    whether ``nullable`` admits ``null`` past an ``enum``; openapi-core says no, GitHub's own
    answers say yes, so the oracle follows GitHub.
    """
    if isinstance(node, dict):
        if node.get("nullable") is True and isinstance(node.get("enum"), list) and None not in node["enum"]:
            node["enum"].append(None)
        for value in node.values():
            _null_in_nullable_enums(value)
    elif isinstance(node, list):
        for value in node:
            _null_in_nullable_enums(value)
    return node


def _contents_any_of(description: Any) -> Any:
    """Let the contents API's answers validate at all.

    For ``GET /contents/{path}`` GitHub's description puts a ``discriminator`` on ``type`` over a
    ``oneOf`` whose first member, ``content-directory``, is an array: an array has no ``type``
    member, so no directory listing (which GitHub does send) could ever validate, and a file could
    match ``content-symlink`` as well. The 409 of ``PUT`` is ``oneOf`` ``basic-error`` and
    ``repository-rule-violation-error``, and every ``basic-error`` body is both. The oracle checks
    these answers against ``anyOf`` the same schemas instead.
    """
    item = description["paths"]["/repos/{owner}/{repo}/contents/{path}"]
    for method, status in (("get", "200"), ("put", "409")):
        content = item[method]["responses"][status]["content"]["application/json"]
        content["schema"] = {"anyOf": content["schema"]["oneOf"]}
    return description


def _simple_label_descriptions(description: Any) -> Any:
    """``pull-request-simple``'s labels get the nullable ``description`` of ``pull-request``'s.

    The two schemas inline the same label object, and GitHub's description marks its
    ``description`` nullable in ``pull-request`` (and in ``label``) but not in
    ``pull-request-simple``: a label created without one (as a bot's labels are, by
    ``POST /issues/{n}/labels``) is ``null`` in both answers.
    """
    labels = description["components"]["schemas"]["pull-request-simple"]["properties"]["labels"]
    labels["items"]["properties"]["description"]["nullable"] = True
    return description


@functools.cache
def spec() -> OpenAPI:
    # The description is GitHub's and known valid: skip re-validating it (a second per session).
    description = json.loads(SUBSET.read_text())
    description = _simple_label_descriptions(_contents_any_of(_null_in_nullable_enums(description)))
    return OpenAPI.from_dict(description, config=Config(spec_validator_cls=None))


@functools.cache
def _operations() -> list[tuple[str, re.Pattern[str]]]:
    ops = []
    for template, item in json.loads(SUBSET.read_text())["paths"].items():
        pattern = re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$")
        ops += [
            (method.upper(), pattern)
            for method in item
            if method in {"get", "post", "patch", "put", "delete"}
        ]
    return ops


def in_subset(method: str, api_path: str) -> bool:
    return any(m == method and p.match(api_path) for m, p in _operations())


def encoded_path(path: str) -> str:
    """Refs and file paths contain ``/``; the subset's ``git/ref/{ref}`` and ``contents/{path}``
    templates need them ``%2F``-encoded."""
    match = re.match(r"^(/repos/[^/]+/[^/]+/(?:git/(?:ref|refs|matching-refs)|contents|compare)/)(.+)$", path)
    return match.group(1) + match.group(2).replace("/", "%2F") if match else path


def validate(exchanges: list[Exchange]) -> tuple[list[str], list[Exchange]]:
    """``(failures, exchanges outside the subset)`` for the JSON answers among ``exchanges``."""
    failures, outside = [], []
    for ex in exchanges:
        api_path = encoded_path(ex.path.removeprefix("/api/v3") or "/")
        if not in_subset(ex.method, api_path):
            outside.append(ex)
            continue
        if ex.status == 304 or not ex.content_type.startswith("application/json"):
            continue
        query = dict(pair.split("=", 1) for pair in ex.query.split("&") if "=" in pair)
        request = MockRequest("https://api.github.com", ex.method, api_path, args=query)
        response = MockResponse(ex.body, status_code=ex.status, content_type="application/json")
        try:
            spec().validate_response(request, response)
        except ResponseNotFound:
            # GitHub's description omits some error statuses (403 on writes without access, ...):
            # such answers must still be GitHub's ``basic-error`` shape.
            body = json.loads(ex.body)
            if not (isinstance(body.get("message"), str) and isinstance(body.get("documentation_url"), str)):
                failures.append(f"{ex.method} {ex.path} -> {ex.status}: not a basic-error body: {body}")
        except Exception as exc:  # openapi-core raises a family of errors; each is a failure here
            cause = exc.__cause__
            detail = getattr(cause, "schema_errors", None) or cause or exc
            failures.append(f"{ex.method} {ex.path} -> {ex.status}: {type(exc).__name__}: {detail}"[:3000])
    return failures, outside

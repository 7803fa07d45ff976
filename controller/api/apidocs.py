"""``/docs``: Swagger UI over ``/openapi.json``, served from files installed with crucible (issue 21).

FastAPI's own ``/docs`` loads Swagger UI from a CDN: blank in an air-gapped cluster, and a script from
another origin that the dashboard's Content-Security-Policy would refuse. The Swagger UI files come from
the ``fastapi-offline`` package (a dependency; only its files are used, ``swagger-ui-bundle.js`` and
``swagger-ui.css``, Swagger UI 5, which reads OpenAPI 3.1), the page and its start script are ours, and
every answer carries the dashboard's CSP: scripts and styles from this origin only, no inline script.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse, Response

from controller.api.dashboard.pages import HEADERS

ASSETS_PACKAGE = "fastapi_offline"
ASSETS = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css"}
START_JS = """\
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true});
});
"""
PAGE = """\
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>crucible controller: API</title>
<link rel="stylesheet" href="/docs/static/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/static/swagger-ui-bundle.js"></script>
<script src="/docs/static/start.js"></script>
</body>
</html>
"""
CACHED = {**HEADERS, "Cache-Control": "max-age=3600"}


def _asset(name: str) -> bytes:
    """A Swagger UI file of the installed package; 503 naming the package when it is missing."""
    try:
        return (resources.files(ASSETS_PACKAGE) / "static" / name).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        detail = (
            f"Swagger UI's files are not installed (the {ASSETS_PACKAGE} package): pip install crucible again"
        )
        raise HTTPException(status_code=503, detail=detail) from None


def docs_router() -> APIRouter:
    """The page and its files (not in the OpenAPI document)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/docs")
    def docs() -> HTMLResponse:
        return HTMLResponse(PAGE, headers=HEADERS)

    @router.get("/docs/static/{name}")
    def static(name: str) -> Response:
        if name == "start.js":
            return Response(START_JS, media_type="text/javascript", headers=CACHED)
        kind = ASSETS.get(name)
        if kind is None:
            raise HTTPException(status_code=404, detail="not found")
        return Response(_asset(name), media_type=kind, headers=CACHED)

    return router

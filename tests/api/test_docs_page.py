"""``/docs`` works offline and under the dashboard's CSP (issue 21): Swagger UI's files come from the
installed package, never a CDN; in Chromium with no route outside this server, the page renders every
operation with no console error (a CSP violation is one)."""

from __future__ import annotations

import httpx

from tests.api.conftest import Api
from tests.api.sqlite_only import sqlite_only  # noqa: F401  (a fixture: SQLite only)
from tests.api.test_dashboard_browser import Watched, browser, chromium, playwright_api

__all__ = ["browser", "chromium"]  # the fixtures, shared with the dashboard's browser tests


def test_docs_and_its_files_come_from_this_server_under_the_csp(api: Api) -> None:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "cdn" not in page.text.lower() and "https://" not in page.text
        for name, kind in (("swagger-ui-bundle.js", "text/javascript"), ("swagger-ui.css", "text/css")):
            asset = client.get(f"/docs/static/{name}")
            assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind), name
            assert len(asset.content) > 10_000, name
        assert client.get("/docs/static/start.js").status_code == 200
        assert client.get("/docs/static/..%2Fpages.py").status_code == 404


def test_docs_renders_every_operation_offline_without_a_console_error(
    api: Api, browser: playwright_api.Browser
) -> None:
    context = browser.new_context()
    # Offline: any request that is not to this server fails, as in an air-gapped cluster.
    context.route(
        "**/*", lambda route: route.continue_() if route.request.url.startswith(api.url) else route.abort()
    )
    watched = Watched(context.new_page())
    watched.page.goto(f"{api.url}/docs")
    watched.page.wait_for_selector(".swagger-ui .opblock")
    operations = watched.page.locator(".swagger-ui .opblock").count()
    assert operations >= 10, operations
    assert watched.errors == [], watched.errors
    context.close()

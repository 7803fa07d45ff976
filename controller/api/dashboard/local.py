"""The dashboard of one local run: what ``crucible loop --dashboard HOST:PORT`` serves while it runs.

The same pages as ``crucible serve`` (same templates, same store reads, same live stream), read-only:
the process that drives the run is the one serving it, and Ctrl-C is its cancel button. A loopback
address is not a trust boundary (other users of the machine, and any web page in the user's browser
through DNS rebinding, can reach it), so the pages still need a session: a random read-only token is
made for this process and printed inside a link (``/login?token=…``, like Jupyter's), which sets the
session cookie and lands on the run. The admin token of the session key is random too and never
shown, so no session can act. ADR-0017 records the choice.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from urllib.parse import quote

from fastapi import FastAPI

from controller.api import errors
from controller.api.auth import ApiTokens
from controller.api.dashboard.pages import dashboard_router, install_not_found_page
from controller.config.settings import Settings
from controller.store.ports import RunViews


@dataclass(frozen=True)
class LocalDashboard:
    app: FastAPI
    token: str  # read-only; goes into the printed link only
    run_path: str

    def link(self, base_url: str) -> str:
        return f"{base_url}/login?token={self.token}"


def local_dashboard(settings: Settings, store: RunViews, run_id: str) -> LocalDashboard:
    """The read-only dashboard app of ``run_id`` with a fresh token for its link."""
    token = secrets.token_urlsafe(24)
    tokens = ApiTokens(admin=secrets.token_urlsafe(32), readonly=token)
    run_path = f"/runs/{quote(run_id, safe='')}"
    app = FastAPI(title="crucible dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    errors.install(app)
    install_not_found_page(app)
    app.include_router(dashboard_router(settings, store, tokens, None, link_login=run_path))
    return LocalDashboard(app, token, run_path)

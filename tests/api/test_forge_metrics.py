"""``/metrics`` of ``crucible serve`` counts the requests its forge clients send and shows the rate limit
the forge last reported (issue 8): a real request to the local forge, through crucible's own client
(PyGithub for REST calls, the httpx reader for polls), moves the counter and the gauge."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from controller.api.auth import ApiTokens
from controller.api.serve import serve_app
from controller.config.settings import Settings
from controller.localforge.server import serve_in_thread
from controller.wiring import Mode, Root, build
from tests.forgekit import TOKENS, AppForge, app_forge
from tests.support.fixtures import migrated_sqlite_url

ADMIN = "admin-token-0123456789"

pytestmark = pytest.mark.slow


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[AppForge]:
    with app_forge(tmp_path) as app:
        yield app


@pytest.fixture
def root(tmp_path: Path, forge: AppForge) -> Iterator[Root]:
    environ = {
        **os.environ,
        "CRUCIBLE_HOME": str(tmp_path / "home"),
        "CRUCIBLE_DATABASE_URL": migrated_sqlite_url(tmp_path / "crucible.db"),
        "CRUCIBLE_GITHUB_TOKEN": TOKENS["alice"],
        "CRUCIBLE_FORGE_WRITE_INTERVAL": "0",
        # As an operator configures a controller that publishes to the local forge (serve mode).
        "CRUCIBLE_FORGE_HOSTS": forge.handle.api_url,
        "CRUCIBLE_ALLOW_UNSANDBOXED": "1",
    }
    built = build(environ, settings=Settings.from_env(environ), mode=Mode.SERVE)
    yield built
    built.close()


def _sample(text: str, name: str, forge: str) -> float | None:
    match = re.search(rf'^{name}\{{forge="{re.escape(forge)}"\}} (\S+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else None


def test_forge_requests_and_rate_limit_left_follow_real_requests(forge: AppForge, root: Root) -> None:
    url = forge.handle.api_url
    app, _scheduler = serve_app(
        root.service(),
        root.store(),
        ApiTokens(ADMIN),
        max_concurrent_runs=1,
        webhook_secret=None,
        forge_for=root.forges.for_spec,
        forge_usage=root.forges.usage,
    )
    with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=30) as http:
        before = http.get("/metrics").text
        assert _sample(before, "crucible_forge_requests_total", url) is None, "no client, no sample"

        client = root.forges.for_url(url)
        assert client.repo("alice/app").full_name == "alice/app"  # one REST call through PyGithub
        once = http.get("/metrics").text
        assert _sample(once, "crucible_forge_requests_total", url) == 1.0
        left = _sample(once, "crucible_forge_rate_limit_remaining", url)
        assert left is not None and left > 0

        page = client.feedback_reader().list_issue_comments("alice/app", since=None, etag=None)
        client.branch_sha("alice/app", "main")
        twice = http.get("/metrics").text
        assert _sample(twice, "crucible_forge_requests_total", url) == 3.0
        after = _sample(twice, "crucible_forge_rate_limit_remaining", url)
        assert after is not None and after < left, "the forge counted the two reads against the quota"
        assert not page.not_modified

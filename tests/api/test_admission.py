"""A write token cannot take the controller's secrets (issue 21): ``crucible serve`` refuses an unsandboxed
spec unless the operator allows it, an ``agent.env_allow`` naming a variable the controller holds a secret
in, and a ``publish.forge`` the operator did not configure, with 422 naming the field, before anything is
stored and before any request leaves: the forge a spec names is a real listener that must receive nothing.
"""

from __future__ import annotations

import os
import select
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.config.settings import ForgeSettings, Settings
from controller.config.spec import parse_spec
from controller.domain.errors import SpecError
from controller.localforge.server import serve_in_thread
from controller.services.control.admission import Admission, forge_origin
from controller.store import Store
from controller.wiring import ForgeClients
from tests.api.conftest import ADMIN, Recorder
from tests.api.sqlite_only import sqlite_only  # noqa: F401 (database_url on SQLite only: the HTTP edge)
from tests.api.test_serve import serving
from tests.conftest import make_repo
from tests.support.fixtures import migrated_sqlite_url

FORGE_TOKEN = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
SPEC = """
objective = "o"
[agent]
command = "true"
{agent}
[sandbox]
mode = "{mode}"
[metric]
command = "echo METRIC m=1"
name = "m"
[[component]]
name = "app"
repo = "."
base = "main"
mutable = ["src/**"]
upstream = "acme/app"
{tail}
"""


@contextmanager
def listener() -> Iterator[tuple[str, socket.socket]]:
    """A TCP listener standing in for a forge of the submitter's choosing; nothing may connect to it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", sock


def connected(sock: socket.socket) -> bool:
    """Whether anything connected: the kernel completes a handshake into the backlog without accept()."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def spec(*, mode: str = "bwrap", env_allow: str = "", forge: str = "") -> str:
    agent = f"env_allow = {env_allow}" if env_allow else ""
    tail = f'[publish]\nforge = "{forge}"' if forge else ""
    return SPEC.format(agent=agent, mode=mode, tail=tail)


@pytest.fixture
def strict(tmp_path: Path, database_url: str, store: Store) -> Iterator[tuple[httpx.Client, Store, Path]]:
    """A controller with the defaults (nothing unsandboxed, GitHub's API only) holding a forge token that
    its environment also has under another name, as ``GITHUB_TOKEN``."""
    settings = Settings(
        home=tmp_path / "home",
        database_url=database_url,
        forge=ForgeSettings(github_token=SecretStr(FORGE_TOKEN)),
    )
    environ = {"GITHUB_TOKEN": FORGE_TOKEN, "OPENAI_API_KEY": "sk-agent-key-0123456789"}
    admission = Admission.of(settings, environ)
    forges = ForgeClients(settings.forge, admission)
    repo = make_repo(tmp_path / "app", {"src/a.py": "x = 1\n"})
    app = create_app(
        settings, store, ApiTokens(ADMIN), Recorder(), forge_for=forges.for_spec, admission=admission
    )
    auth = {"Authorization": f"Bearer {ADMIN}"}
    with serve_in_thread(app) as base, httpx.Client(base_url=base, headers=auth) as client:
        yield client, store, repo


@pytest.mark.parametrize(
    ("env_allow", "key"),
    [
        ('["CRUCIBLE_API_TOKEN"]', "agent.env_allow[0]"),
        ('["OPENAI_API_KEY", "CRUCIBLE_GITHUB_TOKEN"]', "agent.env_allow[1]"),
        ('["crucible_webhook_secret"]', "agent.env_allow[0]"),
        ('["GIT_CONFIG_VALUE_0"]', "agent.env_allow[0]"),
        ('["SSH_AUTH_SOCK"]', "agent.env_allow[0]"),
        ('["PGPASSWORD"]', "agent.env_allow[0]"),
        ('["GITHUB_TOKEN"]', "agent.env_allow[0]"),  # the forge token under another name
    ],
)
def test_env_allow_never_passes_a_secret_of_the_controller(
    strict: tuple[httpx.Client, Store, Path], env_allow: str, key: str
) -> None:
    client, store, repo = strict
    answer = client.post("/api/runs", json={"spec": spec(env_allow=env_allow), "spec_dir": str(repo)})
    assert answer.status_code == 422, answer.text
    assert answer.json()["key"] == key
    assert store.run_summaries(limit=10) == []


def test_an_unsandboxed_spec_is_refused_unless_the_operator_allows_it(
    strict: tuple[httpx.Client, Store, Path], tmp_path: Path
) -> None:
    client, store, repo = strict
    answer = client.post("/api/runs", json={"spec": spec(mode="none"), "spec_dir": str(repo)})
    assert answer.status_code == 422, answer.text
    assert answer.json()["key"] == "sandbox.mode"
    assert "CRUCIBLE_ALLOW_UNSANDBOXED" in answer.json()["detail"]
    assert store.run_summaries(limit=10) == []

    # The operator's variable, read as crucible serve reads its environment: admitted, no SpecError.
    allowing = Settings.from_env({"CRUCIBLE_HOME": str(tmp_path / "h2"), "CRUCIBLE_ALLOW_UNSANDBOXED": "1"})
    Admission.of(allowing, {}).check(parse_spec(spec(mode="none"), repo))


def test_a_forge_the_operator_did_not_configure_gets_no_request(
    strict: tuple[httpx.Client, Store, Path],
) -> None:
    client, store, repo = strict
    with listener() as (url, sock):
        for publish in (True, False):
            body = {"spec": spec(forge=url), "spec_dir": str(repo), "publish_prs": publish}
            answer = client.post("/api/runs", json=body)
            assert answer.status_code == 422, answer.text
            assert answer.json()["key"] == "publish.forge"
            assert "CRUCIBLE_FORGE_HOSTS" in answer.json()["detail"]
        assert not connected(sock), "the controller connected to a forge nobody configured"
    assert store.run_summaries(limit=10) == []


def test_forge_clients_refuse_an_unconfigured_forge_before_any_request() -> None:
    """A spec stored before the rule (resumed, polled) reaches the forge clients directly: they refuse too."""
    settings = ForgeSettings(github_token=SecretStr(FORGE_TOKEN), forge_hosts=("ghe.acme.dev",))
    clients = ForgeClients(settings, Admission(forges=frozenset({forge_origin("ghe.acme.dev")})))
    with listener() as (url, sock):
        with pytest.raises(SpecError) as refused:
            clients.for_url(url)
        assert refused.value.key == "publish.forge"
        assert not connected(sock)


def test_forge_origins_compare_scheme_host_and_port() -> None:
    assert (
        forge_origin("https://API.github.com/")
        == forge_origin("api.github.com")
        == "https://api.github.com:443"
    )
    assert forge_origin("https://ghe.acme.dev/api/v3") == "https://ghe.acme.dev:443"
    assert forge_origin("http://127.0.0.1:8080/api") != forge_origin("http://127.0.0.1:8081/api")
    assert forge_origin("http://ghe.acme.dev") != forge_origin("https://ghe.acme.dev")
    with pytest.raises(ValueError):
        forge_origin("ftp://ghe.acme.dev")


@pytest.mark.slow
def test_crucible_serve_holds_submitted_specs_to_the_operators_rules(tmp_path: Path) -> None:
    """The real server: its environment configures the rules (no forge hosts, nothing unsandboxed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRUCIBLE_")}
    env.update(
        CRUCIBLE_HOME=str(tmp_path / "home"),
        # At the schema's head, as `crucible db upgrade` leaves it (tests/e2e runs that command).
        CRUCIBLE_DATABASE_URL=migrated_sqlite_url(tmp_path / "crucible.db"),
        CRUCIBLE_API_TOKEN=ADMIN,
        CRUCIBLE_GITHUB_TOKEN=FORGE_TOKEN,
        GITHUB_TOKEN=FORGE_TOKEN,
    )
    repo = make_repo(tmp_path / "app", {"src/a.py": "x = 1\n"})
    auth = {"Authorization": f"Bearer {ADMIN}"}
    with listener() as (forge, sock), serving(env, tmp_path / "serve.log") as (_proc, url):
        with httpx.Client(base_url=url, headers=auth, timeout=30) as client:
            refusals = {
                "sandbox.mode": {"spec": spec(mode="none")},
                "agent.env_allow[0]": {"spec": spec(env_allow='["GITHUB_TOKEN"]')},
                "publish.forge": {"spec": spec(forge=forge), "publish_prs": True},
            }
            for key, body in refusals.items():
                answer = client.post("/api/runs", json={**body, "spec_dir": str(repo)})
                assert (answer.status_code, answer.json().get("key")) == (422, key), answer.text
            assert client.get("/api/runs").json()["items"] == []
        assert not connected(sock), "crucible serve connected to a forge nobody configured"

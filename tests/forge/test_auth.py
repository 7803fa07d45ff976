"""Forge credentials from the environment, and GitHub App authentication end to end against a
scripted HTTP server: the JWT is signed with the App's key, the installation is looked up per
repository, and its token (never the JWT) is what the REST calls and git use."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from controller.domain.errors import SpecError
from controller.forge.auth import ForgeCredentials, from_env
from controller.forge.base import ForgeNotFound
from controller.forge.github import GithubForge
from tests.forge.conftest import Sleeps
from tests.forge.scripted import Answer, ScriptedServer, scripted_server

APP_ID = "123456"


@pytest.fixture(scope="module")
def key_pair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


@pytest.fixture
def github_app() -> Iterator[ScriptedServer]:
    with scripted_server() as server:
        for repo in ("acme/widget", "acme/gadget"):
            server.answer(
                "GET", f"/api/v3/repos/{repo}/installation", Answer.json(200, {"id": 77, "app_id": 1})
            )
            server.answer(
                "GET",
                f"/api/v3/repos/{repo}",
                Answer.json(
                    200,
                    {"full_name": repo, "clone_url": f"{server.url}/{repo}.git", "default_branch": "main"},
                ),
            )
        server.answer(
            "POST",
            "/api/v3/app/installations/77/access_tokens",
            Answer.json(201, {"token": "ghs_installation77", "expires_at": "2099-01-01T00:00:00Z"}),
        )
        yield server


# -- credentials ----------------------------------------------------------------------------------


def test_a_token_from_the_environment(key_pair: tuple[str, str]) -> None:
    creds = from_env({"CRUCIBLE_GITHUB_TOKEN": " ghp_secret123 \n"})
    assert creds == ForgeCredentials.for_token("ghp_secret123") and not creds.is_app
    assert "ghp_secret123" not in repr(creds) and "ghp_secret123" not in str(creds)
    assert from_env({}) is None
    assert ForgeCredentials.from_env({"UNRELATED": "x"}) is None


def test_an_app_from_the_environment_with_the_key_inline_or_in_a_file(
    key_pair: tuple[str, str], tmp_path: Path
) -> None:
    private, _ = key_pair
    inline = from_env({"CRUCIBLE_GITHUB_APP_ID": APP_ID, "CRUCIBLE_GITHUB_APP_PRIVATE_KEY": private})
    path = tmp_path / "app.pem"
    path.write_text(private)
    in_file = from_env({"CRUCIBLE_GITHUB_APP_ID": APP_ID, "CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE": str(path)})
    assert inline == in_file and inline is not None and inline.is_app and inline.app_id == APP_ID
    body = private.splitlines()[1]
    assert body not in repr(inline) and "PRIVATE" not in repr(inline) and APP_ID in repr(inline)


@pytest.mark.parametrize(
    ("environ", "key"),
    [
        ({"CRUCIBLE_GITHUB_TOKEN": "t", "CRUCIBLE_GITHUB_APP_ID": APP_ID}, "CRUCIBLE_GITHUB_APP_ID"),
        ({"CRUCIBLE_GITHUB_APP_ID": APP_ID}, "CRUCIBLE_GITHUB_APP_PRIVATE_KEY"),
        ({"CRUCIBLE_GITHUB_APP_PRIVATE_KEY": "-----BEGIN"}, "CRUCIBLE_GITHUB_APP_ID"),
        (
            {"CRUCIBLE_GITHUB_APP_ID": APP_ID, "CRUCIBLE_GITHUB_APP_PRIVATE_KEY": "not a key"},
            "CRUCIBLE_GITHUB_APP_PRIVATE_KEY",
        ),
        (
            {"CRUCIBLE_GITHUB_APP_ID": APP_ID, "CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE": "/no/such/key.pem"},
            "CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE",
        ),
        (
            {
                "CRUCIBLE_GITHUB_APP_ID": APP_ID,
                "CRUCIBLE_GITHUB_APP_PRIVATE_KEY": "x",
                "CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE": "y",
            },
            "CRUCIBLE_GITHUB_APP_PRIVATE_KEY",
        ),
    ],
)
def test_half_configured_credentials_name_the_variable(environ: dict[str, str], key: str) -> None:
    with pytest.raises(SpecError) as caught:
        from_env(environ)
    assert caught.value.key == key


def test_credentials_are_one_kind_or_the_other() -> None:
    with pytest.raises(ValueError):
        ForgeCredentials(token="t", app_id="1", private_key="k")
    with pytest.raises(ValueError):
        ForgeCredentials(app_id="1")
    with pytest.raises(ValueError):
        ForgeCredentials.for_token("  ")


# -- GitHub App end to end ------------------------------------------------------------------------


def test_an_app_signs_a_jwt_resolves_the_installation_per_repository_and_uses_its_token(
    key_pair: tuple[str, str], github_app: ScriptedServer
) -> None:
    private, public = key_pair
    sleeps = Sleeps()
    forge = GithubForge(
        f"{github_app.url}/api/v3",
        ForgeCredentials.for_app(APP_ID, private),
        sleep=sleeps.sleep,
        clock=sleeps.clock,
    )
    assert forge.repo("acme/widget").clone_url == f"{github_app.url}/acme/widget.git"

    lookup = github_app.seen("GET", "/api/v3/repos/acme/widget/installation")
    assert len(lookup) == 1
    scheme, _, token = lookup[0].headers["authorization"].partition(" ")
    claims = jwt.decode(token, public, algorithms=["RS256"])
    assert scheme == "Bearer" and claims["iss"] == APP_ID and claims["exp"] > claims["iat"]
    minted = github_app.seen("POST", "/api/v3/app/installations/77/access_tokens")
    assert len(minted) == 1 and minted[0].headers["authorization"].startswith("Bearer ")
    assert (
        github_app.seen("GET", "/api/v3/repos/acme/widget")[0].headers["authorization"]
        == "token ghs_installation77"
    )

    basic = forge.git_auth_env("acme/widget")["GIT_CONFIG_VALUE_0"].split()[-1]
    assert base64.b64decode(basic).decode() == "x-access-token:ghs_installation77"
    forge.repo("acme/gadget")  # same installation: looked up for this repository, token reused
    assert len(github_app.seen("GET", "/api/v3/repos/acme/gadget/installation")) == 1
    assert len(github_app.seen("GET", "/api/v3/repos/acme/widget/installation")) == 1
    assert len(github_app.seen("POST", "/api/v3/app/installations/77/access_tokens")) == 1
    assert sleeps.calls == []


def test_a_repository_without_the_app_installed_is_not_found(
    key_pair: tuple[str, str], github_app: ScriptedServer
) -> None:
    forge = GithubForge(f"{github_app.url}/api/v3", ForgeCredentials.for_app(APP_ID, key_pair[0]))
    with pytest.raises(ForgeNotFound, match="installation"):
        forge.repo("other/repo")

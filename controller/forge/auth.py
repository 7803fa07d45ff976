"""Forge credentials, read from the environment once at the edge and passed in, never read again.

Crucible authenticates to GitHub (or GitHub Enterprise, or the local forge) either with a token
(``CRUCIBLE_GITHUB_TOKEN``: a personal access token, or any token the forge accepts) or as a GitHub
App (``CRUCIBLE_GITHUB_APP_ID`` plus the private key as PEM text in
``CRUCIBLE_GITHUB_APP_PRIVATE_KEY`` or as a file path in ``CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE``),
whose installation is resolved per repository by the adapter. Never from the run spec.

The secret never shows in ``repr``/``str``, so a credential that ends up in a log line, an
exception or a debugger shows only which kind it is. This module deliberately does not import
PyGithub: ``controller.forge.github`` turns a credential into PyGithub's auth objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from controller.config.settings import ForgeSettings
from controller.domain.errors import SpecError

TOKEN_VAR = "CRUCIBLE_GITHUB_TOKEN"
APP_ID_VAR = "CRUCIBLE_GITHUB_APP_ID"
APP_KEY_VAR = "CRUCIBLE_GITHUB_APP_PRIVATE_KEY"
APP_KEY_FILE_VAR = "CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE"


@dataclass(frozen=True)
class ForgeCredentials:
    """A token, or a GitHub App (id + PEM private key); exactly one of the two.

    token: sent as ``Authorization: token ...`` to the REST API and as HTTP basic
        ``x-access-token:<token>`` to git.
    app_id / private_key: the App's JWT is signed with the key (RS256); each repository's
        installation token is then fetched by the adapter (``GET /repos/{o}/{r}/installation``).
    """

    token: str | None = field(default=None, repr=False)
    app_id: str | None = None
    private_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.token is not None and (self.app_id is not None or self.private_key is not None):
            raise ValueError("forge credentials are either a token or a GitHub App, not both")
        if self.token is None and (self.app_id is None or self.private_key is None):
            raise ValueError("forge credentials need a token, or an App id and its private key")
        if self.token is not None and not self.token.strip():
            raise ValueError("the forge token is empty")

    @classmethod
    def for_token(cls, token: str) -> ForgeCredentials:
        return cls(token=token)

    @classmethod
    def for_app(cls, app_id: str | int, private_key: str) -> ForgeCredentials:
        return cls(app_id=str(app_id), private_key=private_key)

    @property
    def is_app(self) -> bool:
        return self.app_id is not None

    def __str__(self) -> str:
        return repr(self)

    def __repr__(self) -> str:
        kind = f"app_id={self.app_id!r}" if self.is_app else "token=<redacted>"
        return f"ForgeCredentials({kind})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ForgeCredentials | None:
        """The credentials the environment names, or None when it names none.

        Raises ``SpecError`` (``key`` = the variable) when the App is configured halfway, both a
        token and an App are set, or the key file cannot be read.
        """
        token = environ.get(TOKEN_VAR, "").strip()
        app_id = environ.get(APP_ID_VAR, "").strip()
        if token and app_id:
            raise SpecError(APP_ID_VAR, f"set either {TOKEN_VAR} or a GitHub App, not both")
        if token:
            return cls(token=token)
        if app_id:
            return cls(app_id=app_id, private_key=_private_key(environ))
        for name in (APP_KEY_VAR, APP_KEY_FILE_VAR):
            if environ.get(name, "").strip():
                raise SpecError(APP_ID_VAR, f"{name} is set but {APP_ID_VAR} is not")
        return None


def from_settings(settings: ForgeSettings) -> ForgeCredentials | None:
    """The credentials the settings name (read from the environment once, by the composition root),
    with the same checks and errors as ``ForgeCredentials.from_env``."""
    values = {
        TOKEN_VAR: settings.github_token.get_secret_value() if settings.github_token else "",
        APP_ID_VAR: settings.github_app_id or "",
        APP_KEY_VAR: settings.github_app_private_key.get_secret_value()
        if settings.github_app_private_key
        else "",
        APP_KEY_FILE_VAR: str(settings.github_app_private_key_file or ""),
    }
    return ForgeCredentials.from_env(values)


def from_env(environ: Mapping[str, str]) -> ForgeCredentials | None:
    """``ForgeCredentials.from_env``, as a function."""
    return ForgeCredentials.from_env(environ)


def _private_key(environ: Mapping[str, str]) -> str:
    text = environ.get(APP_KEY_VAR, "").strip()
    path = environ.get(APP_KEY_FILE_VAR, "").strip()
    if text and path:
        raise SpecError(APP_KEY_VAR, f"set either {APP_KEY_VAR} or {APP_KEY_FILE_VAR}, not both")
    if path:
        try:
            text = Path(path).expanduser().read_text().strip()
        except OSError as exc:
            raise SpecError(APP_KEY_FILE_VAR, f"cannot read the App's private key: {exc}") from None
        key = APP_KEY_FILE_VAR
    else:
        key = APP_KEY_VAR
    if not text:
        raise SpecError(APP_KEY_VAR, f"{APP_ID_VAR} is set but no private key is given")
    if not text.startswith("-----BEGIN") or "PRIVATE KEY-----" not in text:
        raise SpecError(key, "the App's private key must be PEM text (-----BEGIN ... PRIVATE KEY-----)")
    return text + "\n"

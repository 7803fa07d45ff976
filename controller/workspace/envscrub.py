"""What the agent, validation and metric commands may see of the controller's environment.

These commands are untrusted code: an agent is a language model with a shell. The controller's
environment may hold forge tokens, cloud keys and crucible's own configuration, so commands get a
copy with everything secret-looking removed (DESIGN §4), and the removed values are remembered so
that logs and stored output can be redacted. Scrubbing alone does not stop same-user code from
reading ``/proc/<pid>/environ``; that is the sandbox's job (``sandbox.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

PROTOCOL_VARS = frozenset(
    {
        "CRUCIBLE_RUN_ID",
        "CRUCIBLE_ROUND",
        "CRUCIBLE_TURN",
        "CRUCIBLE_WORKSPACE",
        "CRUCIBLE_CANDIDATE",
        "CRUCIBLE_STEER_FILE",
    }
)

# Name fragments (case-insensitive) that mark a variable as secret. DESIGN §4 names the first five;
# PASSWD, AUTH, PASSPHRASE and COOKIE catch common spellings of the same thing (SSH_AUTH_SOCK,
# NPM_CONFIG__AUTH, XAUTHORITY, GPG_PASSPHRASE …).
SECRET_NAME_PARTS = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "PASSPHRASE",
    "COOKIE",
)
MIN_SECRET_LEN = 6  # shorter removed values are not redacted: "1", "true" would mangle every log

# scheme://userinfo@ — the userinfo (user, or user:password) of a URL is a credential.
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://([^/\s@]+)@")

REDACTED = "[REDACTED]"


@dataclass(frozen=True)
class ScrubbedEnv:
    """``env``: what commands get. ``secrets``: removed values that looked secret, for :func:`redact`."""

    env: dict[str, str]
    secrets: tuple[str, ...]


def _secret_name(name: str) -> bool:
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS) or upper.endswith("_PWD")


def _url_credentials(value: str) -> list[str]:
    """The userinfo parts (raw and percent-decoded, and the password alone) of URLs in ``value``."""
    found: list[str] = []
    for match in _URL_USERINFO.finditer(value):
        userinfo = match.group(1)
        found += [userinfo, unquote(userinfo)]
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            found += [password, unquote(password)]
    return found


def scrub_env(environ: Mapping[str, str], allow: Iterable[str] = ()) -> ScrubbedEnv:
    """Copy ``environ`` without what commands must not see.

    Removed: every ``CRUCIBLE_*`` variable (the caller adds the protocol variables afterwards),
    every ``GIT_*`` variable (``GIT_CONFIG_VALUE_n`` may carry an ``http.extraHeader`` token), any
    name containing one of SECRET_NAME_PARTS or ending in ``_PWD`` (``SSH_AUTH_SOCK`` among them),
    and any variable whose value holds a URL with userinfo (``scheme://user:pw@host``). Names in
    ``allow`` are kept whatever they match (exact, case-sensitive names).

    ``secrets`` holds the values removed for their name or for a URL credential (and the
    credential parts of such URLs) and ``GIT_CONFIG_VALUE_n`` values (``http.extraHeader``), each
    at least MIN_SECRET_LEN characters long, longest first.
    """
    allowed = frozenset(allow)
    env: dict[str, str] = {}
    secrets: set[str] = set()
    for name, value in environ.items():
        if name in allowed:
            env[name] = value
            continue
        credentials = _url_credentials(value)
        if _secret_name(name) or credentials or name.startswith("GIT_CONFIG_VALUE_"):
            secrets.update([value, *credentials])
        elif not name.startswith(("CRUCIBLE_", "GIT_")):
            env[name] = value
    kept = sorted((s for s in secrets if len(s) >= MIN_SECRET_LEN), key=lambda s: (-len(s), s))
    return ScrubbedEnv(env=env, secrets=tuple(kept))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by ``[REDACTED]`` (longest first)."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text

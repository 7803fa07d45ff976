"""What the agent, validation and metric commands may see of the controller's environment.

These commands are untrusted code: an agent is a language model with a shell. The controller's
environment may hold forge tokens, cloud keys and crucible's own configuration, so commands get a
copy with everything secret-looking removed (docs/security.md), and the removed values are remembered so
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

# Name fragments (case-insensitive) that mark a variable as secret. The first five are the original list;
# PASSWD, AUTH, PASSPHRASE, COOKIE, PRIVATE and SESSION catch common spellings of the same thing
# (SSH_AUTH_SOCK, NPM_CONFIG__AUTH, XAUTHORITY, GPG_PASSPHRASE, GPG_PRIVATE_KEY, DBUS_SESSION_BUS …).
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
    "PRIVATE",
    "SESSION",
)
# Short fragments that would hit innocent names as substrings (PATH, COMPASS): they count only as a
# whole "_"-separated word of the name (GH_PAT, DB_PASS, DATABASE_DSN, PASS).
SECRET_NAME_WORDS = frozenset({"PASS", "PAT", "DSN", "PW"})
MIN_SECRET_LEN = 6  # shorter removed values are not redacted: "1", "true" would mangle every log

# scheme://userinfo@ — the userinfo (user, or user:password) of a URL is a credential.
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://([^/\s@]+)@")

# Values that look like credentials whatever the variable is called: forge and cloud tokens by their
# published prefixes, PEM private keys, and ``password=…`` pairs (libpq DSNs, ODBC strings).
CREDENTIAL_PATTERNS = (
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
)
# ``password=secret``, ``PWD='secret'``, ``pass: secret``: the value part (group 1) is the credential.
_PASSWORD_PAIR = re.compile(
    r"(?i)\b(?:password|passwd|pwd|pass|secret|token)\s*[=:]\s*(\"[^\"]*\"|'[^']*'|[^\s;&,'\"]+)"
)

REDACTED = "[REDACTED]"


@dataclass(frozen=True)
class ScrubbedEnv:
    """``env``: what commands get. ``secrets``: removed values that looked secret, for :func:`redact`."""

    env: dict[str, str]
    secrets: tuple[str, ...]


def _secret_name(name: str) -> bool:
    upper = name.upper()
    if any(part in upper for part in SECRET_NAME_PARTS) or upper.endswith("_PWD"):
        return True
    return any(word in SECRET_NAME_WORDS for word in upper.split("_"))


def credential_values(text: str) -> list[str]:
    """Credential-looking pieces of ``text``: URL userinfo, token prefixes, PEM keys, password pairs."""
    found = _url_credentials(text)
    for pattern in CREDENTIAL_PATTERNS:
        found += [match.group(0) for match in pattern.finditer(text)]
    for match in _PASSWORD_PAIR.finditer(text):
        value = match.group(1).strip("'\"")
        if value:
            found.append(value)
    return found


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
    name containing one of SECRET_NAME_PARTS, having one of SECRET_NAME_WORDS as a word, or ending
    in ``_PWD`` (``SSH_AUTH_SOCK`` among them), and any variable whose value looks like a credential
    (``credential_values``: a URL with userinfo, a ``ghp_``/``AKIA``… token, a PEM key,
    ``password=``). Names in ``allow`` are kept whatever they match (exact, case-sensitive names),
    except ``CRUCIBLE_*``: crucible's own secrets never pass, even for a spec stored before the spec
    refused such names.

    ``secrets`` holds the values removed for their name or for a URL credential (and the
    credential parts of such URLs) and ``GIT_CONFIG_VALUE_n`` values (``http.extraHeader``), each
    at least MIN_SECRET_LEN characters long, longest first.
    """
    allowed = frozenset(name for name in allow if not name.upper().startswith("CRUCIBLE_"))
    env: dict[str, str] = {}
    secrets: set[str] = set()
    for name, value in environ.items():
        if name in allowed:
            env[name] = value
            continue
        credentials = credential_values(value)
        if _secret_name(name) or credentials or name.startswith("GIT_CONFIG_VALUE_"):
            secrets.update([value, *credentials])
        elif not name.startswith(("CRUCIBLE_", "GIT_")):
            env[name] = value
    kept = sorted((s for s in secrets if len(s) >= MIN_SECRET_LEN), key=lambda s: (-len(s), s))
    return ScrubbedEnv(env=env, secrets=tuple(kept))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by ``[REDACTED]`` (longest first), and
    every credential-looking value (``credential_values``) too, known or not: an agent may print a
    token it found in a file."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for found in sorted(set(credential_values(text)), key=len, reverse=True):
        if len(found) >= MIN_SECRET_LEN and REDACTED not in found:
            text = text.replace(found, REDACTED)
    return text

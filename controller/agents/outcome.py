"""What a preset's turn makes of the CLI's run: the brief's preamble, the protocol's lines, the endpoint
check before the CLI starts, and the removal of the CLI's ``HOME`` afterwards.

The controller runs these itself, before the spawn and after the exit (``turn``, ADR-0038); they used to
run in a Python wrapper around the CLI inside the sandbox (ADR-0023, ADR-0033).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from controller.agents.base import Usage

EXIT_FAILED = 3  # the exit status a failed turn reports when the CLI itself exited 0 (or never started)
CONNECT_TIMEOUT_S = 10.0
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
DEFAULT_ENDPOINTS = {"claude-code": "https://api.anthropic.com", "codex": "https://api.openai.com/v1"}
NO_NETWORK = "sandbox.network = false gives the agent no network"

PREAMBLE = """\
You are one turn of a measured optimisation loop. Make one focused change to the files in your working \
directory that you expect to improve the objective below; crucible then measures it and keeps it only if \
it is better.
Working directory: {workdir}

Rules: edit files in place; do not commit, stage, reset, switch branches or push (crucible commits a kept \
change itself); touch only what the brief allows.
End your final message with one line of the form
HYPOTHESIS: <what this change tries, in one line>

The brief (CANDIDATE.md) follows.

"""


class Price(NamedTuple):
    """USD per million tokens."""

    input: float
    output: float


def cost_line(usage: Sequence[Usage], prices: dict[str, Price], model: str | None) -> str | None:
    """``COST usd=… tokens=…``: a price given for the model wins over the CLI's own estimate; without
    either, only tokens. None when the CLI reported nothing."""
    if not usage:
        return None
    tokens = sum(u.tokens for u in usage)
    usd: float | None = 0.0
    for used in usage:
        price = next((prices[name] for name in (used.model, model) if name and name in prices), None)
        if price is not None:
            assert usd is not None
            usd += (used.input_tokens * price.input + used.output_tokens * price.output) / 1e6
        elif used.usd is not None and usd is not None:
            usd += used.usd
        else:
            usd = None
    return f"COST usd={usd:.6f} tokens={tokens}" if usd is not None else f"COST tokens={tokens}"


def hypothesis(message: str | None) -> str | None:
    """The final message's last ``HYPOTHESIS:`` line, else its first non-empty line."""
    if not message:
        return None
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("HYPOTHESIS:"):
            return line.removeprefix("HYPOTHESIS:").strip() or None
    return lines[0][:500] if lines else None


def unreachable(
    preset: str, base_url: str | None, environ: Mapping[str, str], *, offline: bool = False
) -> str | None:
    """Why the model endpoint cannot be reached, found with one TCP connect from the controller before
    the CLI starts (a CLI may retry a refused connection for minutes); None when it answers, or when a
    proxy stands between. ``offline``: the CLI runs in a sandbox without network (``sandbox.network =
    false``), where no endpoint answers whatever the controller reaches."""
    if any(environ.get(name) for name in PROXY_VARIABLES):
        return None
    url = base_url or DEFAULT_ENDPOINTS.get(preset)
    if not url:
        return None
    if offline:
        return f"cannot reach the model endpoint {url}: {NO_NETWORK}"
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT_S):
            return None
    except OSError as error:
        reason = error.strerror or str(error)
        hint = f" ({NO_NETWORK})" if isinstance(error, socket.gaierror) else ""
        return f"cannot reach the model endpoint {url}: {reason}{hint}"


def remove_tree(root: Path) -> None:
    """Remove ``root`` and everything under it, ignoring what cannot be removed (``shutil.rmtree``'s
    ``ignore_errors``, without importing ``shutil``). Symbolic links are removed, never followed."""
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files:
            _ignore(os.unlink, os.path.join(folder, name))
        for name in dirs:
            path = os.path.join(folder, name)
            _ignore(os.unlink if os.path.islink(path) else os.rmdir, path)
    _ignore(os.rmdir, root)


def _ignore(remove: Callable[[str | Path], None], path: str | Path) -> None:
    with contextlib.suppress(OSError):
        remove(path)


def home_variables(home: Path) -> dict[str, str]:
    """``HOME`` and the XDG folders inside it: a CLI that reads ``XDG_CONFIG_HOME`` must not find the
    user's real configuration either."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }

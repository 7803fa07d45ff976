"""Where the test environment installed the real coding-agent CLIs (scripts/testenv/agents.sh).

Read once at import, before the autouse fixture points ``HOME`` into a temporary folder and drops every
``CRUCIBLE_*`` variable. A test that needs a CLI that is not installed is skipped, and fails under CI or
``CRUCIBLE_AGENTS_REQUIRED=1``, where the script installed them all.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

REAL_HOME = Path(os.path.expanduser("~")).resolve()
AGENTS_BIN = Path(
    os.environ.get("CRUCIBLE_AGENTS_BIN")
    or Path(os.environ.get("XDG_CACHE_HOME") or REAL_HOME / ".cache") / "crucible-agents" / "bin"
)
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("CRUCIBLE_AGENTS_REQUIRED") == "1"


def cli(program: str) -> Path:
    """The installed CLI ``program`` (``claude``, ``codex``, …); skips (or fails when required) without it."""
    path = AGENTS_BIN / program
    if path.exists() and os.access(path, os.X_OK):
        return path
    message = f"{program} is not installed in {AGENTS_BIN} (bash scripts/testenv/agents.sh installs it)"
    if REQUIRED:
        pytest.fail(message)
    pytest.skip(message)


def refused_url() -> str:
    """An http URL on 127.0.0.1 whose port was bound a moment ago and closed: a connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"

"""The local forge: a small GitHub-compatible server (REST subset, git smart HTTP, signed webhooks).

It exists so crucible can publish and receive feedback without GitHub: tests, the demo and
air-gapped users point the unmodified PyGithub-based ``github`` adapter at it through ``base_url``.
It is a separate application inside the package: its own HTTP layer (FastAPI) and its own SQLite
storage. Crucible's core never imports it; it talks to it over HTTP and git, exactly as to GitHub.
"""

from __future__ import annotations

from controller.localforge.app import create_app
from controller.localforge.faults import Fault, FaultPlan
from controller.localforge.server import ForgeHandle, running_forge, serve, serve_in_thread
from controller.localforge.users import add_org, add_user

__all__ = [
    "Fault",
    "FaultPlan",
    "ForgeHandle",
    "add_org",
    "add_user",
    "create_app",
    "running_forge",
    "serve",
    "serve_in_thread",
]

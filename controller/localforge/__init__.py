"""The local forge: a small GitHub-compatible server (REST subset, git smart HTTP, signed webhooks).

It exists so crucible can publish and receive feedback without GitHub: tests, the demo and
air-gapped users point the unmodified PyGithub-based ``github`` adapter at it through ``base_url``.
It is a separate application inside the package: its own HTTP layer (FastAPI) and its own SQLite
storage. Crucible's core never imports it; it talks to it over HTTP and git, exactly as to GitHub.
"""

from __future__ import annotations

"""Who may steer a refinement round (docs/security.md, "Trust in review feedback", issue 4 deliverable 3).

Review feedback becomes text an agent reads, so it is a prompt-injection channel: only people who
could change the code anyway may steer. ``author_association`` OWNER is proof enough; MEMBER and
COLLABORATOR are not (an organization member or a triage collaborator may have read access only),
so everyone else is checked with the forge's collaborator-permission API, whose answers are cached
per (repository, login) for at most a minute, and dropped when a webhook says access changed, to keep
a busy review from costing one call per comment. Bots are trusted only when listed, whatever their
permission, and crucible's own activity never triggers anything.

This module decides; it does not strip or render text (that happens where the steer is built).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection

from controller.forge.base import FeedbackEvent, Forge, ForgeNotFound

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
# A reviewer downgraded to read must stop steering soon: at most a minute late, and at once when a
# ``member``/``repository`` webhook says access changed (``forget``).
PERMISSION_TTL_S = 60.0


class TrustPolicy:
    """``decide(event)`` -> (trusted?, reason); permission answers cached ``ttl_s`` seconds."""

    def __init__(
        self,
        forge: Forge,
        *,
        trusted_bots: Collection[str],
        own_logins: Collection[str],
        ttl_s: float = PERMISSION_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._forge = forge
        self._bots = {login.lower() for login in trusted_bots}
        self._own = {login.lower() for login in own_logins}
        self._ttl_s = ttl_s
        self._clock = clock
        self._cache: dict[tuple[str, str], tuple[float, str]] = {}
        self._lock = threading.Lock()  # ``forget`` runs on the feedback hub's thread

    def decide(self, event: FeedbackEvent) -> tuple[bool, str]:
        login = event.author.lower()
        if login in self._own:
            return False, "crucible's own activity"
        if login in self._bots:
            return True, "trusted bot"
        if event.author_type.lower() == "bot" or login.endswith("[bot]"):
            # Whatever its permission: an app with write access is not a reviewer (issue 11 §3).
            return False, "a bot not listed in feedback.trusted_bots"
        if event.association.upper() == "OWNER":
            return True, "repository owner"
        permission = self.permission(event.repo, event.author)
        if permission in WRITE_PERMISSIONS:
            return True, f"{permission} access"
        return False, f"no write access (permission: {permission})"

    def forget(self, repo: str) -> None:
        """Drop the cached answers for ``repo`` (``owner/name``), or all of them for ``"*"``."""
        with self._lock:
            if repo == "*":
                self._cache.clear()
                return
            for key in [k for k in self._cache if k[0] == repo.lower()]:
                del self._cache[key]

    def permission(self, repo: str, login: str) -> str:
        """The forge's answer for ``login`` on ``repo``, at most ``ttl_s`` seconds old; ``none`` for
        a login the forge does not know (a deleted account). Other forge errors propagate: the
        caller decides again later rather than guessing."""
        key = (repo.lower(), login.lower())
        now = self._clock()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and now - cached[0] < self._ttl_s:
            return cached[1]
        try:
            permission = self._forge.permission(repo, login)
        except ForgeNotFound:
            permission = "none"
        with self._lock:
            self._cache[key] = (now, permission)
        return permission

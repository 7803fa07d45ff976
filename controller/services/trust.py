"""Who may steer a refinement round (DESIGN §7 "Trust", issue 4 deliverable 3).

Review feedback becomes text an agent reads, so it is a prompt-injection channel: only people who
could change the code anyway may steer. ``author_association`` OWNER is proof enough; MEMBER and
COLLABORATOR are not (an organization member or a triage collaborator may have read access only),
so everyone else is checked with the forge's collaborator-permission API, whose answers are cached
per (repository, login) for a while to keep a busy review from costing one call per comment. Bots
are trusted only when configured, and crucible's own activity never triggers anything.

This module decides; it does not strip or render text (that happens where the steer is built).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from controller.forge.base import FeedbackEvent, Forge, ForgeNotFound

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})


class TrustPolicy:
    """``decide(event)`` -> (trusted?, reason); permission answers cached ``ttl_s`` seconds."""

    def __init__(
        self,
        forge: Forge,
        *,
        trusted_bots: Collection[str],
        own_logins: Collection[str],
        ttl_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._forge = forge
        self._bots = {login.lower() for login in trusted_bots}
        self._own = {login.lower() for login in own_logins}
        self._ttl_s = ttl_s
        self._clock = clock
        self._cache: dict[tuple[str, str], tuple[float, str]] = {}

    def decide(self, event: FeedbackEvent) -> tuple[bool, str]:
        login = event.author.lower()
        if login in self._own:
            return False, "crucible's own activity"
        if login in self._bots:
            return True, "trusted bot"
        if event.association.upper() == "OWNER":
            return True, "repository owner"
        permission = self.permission(event.repo, event.author)
        if permission in WRITE_PERMISSIONS:
            return True, f"{permission} access"
        return False, f"no write access (permission: {permission})"

    def permission(self, repo: str, login: str) -> str:
        """The forge's answer for ``login`` on ``repo``, at most ``ttl_s`` seconds old; ``none`` for
        a login the forge does not know (a deleted account). Other forge errors propagate: the
        caller decides again later rather than guessing."""
        key = (repo.lower(), login.lower())
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < self._ttl_s:
            return cached[1]
        try:
            permission = self._forge.permission(repo, login)
        except ForgeNotFound:
            permission = "none"
        self._cache[key] = (now, permission)
        return permission

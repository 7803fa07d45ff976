"""Process-wide settings, built once from the environment at the edge and passed in (STYLE.md rule 7)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.config.units import parse_duration
from controller.domain.errors import SpecError


@dataclass(frozen=True)
class Settings:
    """Where crucible keeps its state.

    home: CRUCIBLE_HOME; worktrees, logs, artifacts and the default SQLite database live here, never in
        the user's checkout. Default ``~/.local/share/crucible``.
    database_url: CRUCIBLE_DATABASE_URL; default SQLite at ``<home>/crucible.db``.
    lease_ttl_s: CRUCIBLE_LEASE_TTL (``30s``): how long a run's lease outlives its holder's last
        heartbeat (renewed every third of it), so how soon a dead holder's run is taken over.
    """

    home: Path
    database_url: str
    lease_ttl_s: float = 30.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        raw_home = env.get("CRUCIBLE_HOME")
        if raw_home:
            home = Path(raw_home).expanduser().resolve()
        else:
            base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
            home = Path(base).expanduser().resolve() / "crucible"
        url = env.get("CRUCIBLE_DATABASE_URL") or f"sqlite:///{home / 'crucible.db'}"
        ttl = parse_duration(env.get("CRUCIBLE_LEASE_TTL") or "30s", "CRUCIBLE_LEASE_TTL")
        if ttl <= 0:
            raise SpecError("CRUCIBLE_LEASE_TTL", "must be a positive duration")
        return cls(home=home, database_url=url, lease_ttl_s=ttl)

    def run_dir(self, run_id: str) -> Path:
        """Everything one run owns: workspaces, logs, CANDIDATE.md."""
        return self.home / "runs" / run_id

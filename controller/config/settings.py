"""Process-wide settings, built once from the environment at the edge and passed in (STYLE.md rule 7)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """Where crucible keeps its state.

    home: CRUCIBLE_HOME; worktrees, logs, artifacts and the default SQLite database live here, never in
        the user's checkout. Default ``~/.local/share/crucible``.
    database_url: CRUCIBLE_DATABASE_URL; default SQLite at ``<home>/crucible.db``.
    """

    home: Path
    database_url: str

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
        return cls(home=home, database_url=url)

    def run_dir(self, run_id: str) -> Path:
        """Everything one run owns: workspaces, logs, CANDIDATE.md."""
        return self.home / "runs" / run_id

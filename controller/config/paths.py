"""Where crucible keeps its state (``CRUCIBLE_HOME``) and which database it uses, from an environment
mapping: the part of the settings every command needs, without pydantic.

``Settings.from_env`` resolves both through these functions, and so does ``crucible runs list``,
which must not pay for pydantic and the settings models to print a few lines (ADR-0013). Reads only
the mapping it is handed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def home_dir(environ: Mapping[str, str]) -> Path:
    """``CRUCIBLE_HOME``, else ``$XDG_DATA_HOME/crucible``, else ``~/.local/share/crucible``."""
    raw_home = environ.get("CRUCIBLE_HOME")
    if raw_home:
        return Path(raw_home).expanduser().resolve()
    user_home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    base = environ.get("XDG_DATA_HOME") or str(user_home / ".local" / "share")
    return Path(base).expanduser().resolve() / "crucible"


def database_url(environ: Mapping[str, str], home: Path) -> str:
    """``CRUCIBLE_DATABASE_URL``, else SQLite at ``<home>/crucible.db``."""
    return environ.get("CRUCIBLE_DATABASE_URL") or f"sqlite:///{home / 'crucible.db'}"

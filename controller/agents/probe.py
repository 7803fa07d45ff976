"""Which presets' CLIs are installed here, and their versions (``crucible agents``).

Each CLI is looked up on ``PATH`` and asked for its version (``--version``), all at once: a Node CLI takes
a good part of a second to start, and there are several.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from controller.agents.base import Preset
from controller.agents.registry import PRESETS

VERSION_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Found:
    """One preset as found here: ``path`` None when its CLI is not on ``PATH``."""

    preset: str
    title: str
    program: str
    path: str | None
    version: str | None
    install: str
    keys: tuple[str, ...]
    keys_set: tuple[str, ...]


def _version(path: str, chosen: Preset) -> str | None:
    try:
        done = subprocess.run(
            [path, *chosen.version_args()],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return lines[0] if done.returncode == 0 and lines else None


def probe(environ: Mapping[str, str]) -> list[Found]:
    """Every preset, in the registry's order, with its CLI found on ``environ``'s ``PATH``."""
    search = environ.get("PATH")
    paths = {name: shutil.which(chosen.program, path=search) for name, chosen in PRESETS.items()}
    with ThreadPoolExecutor(max_workers=len(PRESETS)) as pool:
        versions = {
            name: pool.submit(_version, path, PRESETS[name])
            for name, path in paths.items()
            if path is not None
        }
        return [
            Found(
                preset=name,
                title=chosen.title,
                program=chosen.program,
                path=paths[name],
                version=versions[name].result() if name in versions else None,
                install=chosen.install,
                keys=chosen.keys,
                keys_set=tuple(k for k in chosen.keys if environ.get(k)),
            )
            for name, chosen in PRESETS.items()
        ]

"""Process groups of running commands, recorded where ``resume`` on this host will look.

A process group id only means something on the machine that spawned it, so the record lives in the
run's directory under CRUCIBLE_HOME (one small file per group), not in a database that several
hosts may share. Writing a file costs microseconds; a database commit per spawned command cost a
third of a small turn's overhead. The record is written right after spawn, before the command can
do anything, and survives a ``kill -9`` of the controller (it is in the page cache, not in us).
"""

from __future__ import annotations

from pathlib import Path


class GroupRegistry:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def record(self, pgid: int, command: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / str(pgid)).write_text(command)

    def clear(self, pgid: int) -> None:
        (self.directory / str(pgid)).unlink(missing_ok=True)

    def list(self) -> list[tuple[int, str]]:
        if not self.directory.is_dir():
            return []
        found = []
        for entry in sorted(self.directory.iterdir()):
            if entry.name.isdigit():
                found.append((int(entry.name), entry.read_text(errors="replace")))
        return found

"""Process groups of running commands, recorded where ``resume`` on this host will look.

A process group id only means something on the machine that spawned it, so the record lives in the
run's directory under CRUCIBLE_HOME, not in a database that several hosts may share. The record is
written right after spawn and survives a ``kill -9`` of the controller (it is in the page cache, not
in us).

One *slot* file per command running at once (``slot-N``, a fixed-size record: the pgid on its first
line, then the command), overwritten in place and blanked when the command ends (ADR-0050): creating
and deleting a file per command cost 0.4-0.5 ms of CPU each on ext4 here, a write over an existing one
a few microseconds. A registry reuses only the slots it blanked itself or found blank, never one that
still names a group a dead controller left (``resume`` kills that group first and blanks it). Files
named by the pgid alone are the layout before ADR-0050: still listed and cleared.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

SLOT_PREFIX = "slot-"
RECORD_BYTES = 1024  # a pgid line and a command of at most 200 characters (800 bytes of UTF-8), padded
_BLANK = b" " * RECORD_BYTES


def _record(pgid: int, command: str) -> bytes:
    body = f"{pgid}\n".encode() + command.encode("utf-8", "replace")
    return body[:RECORD_BYTES].ljust(RECORD_BYTES, b" ")


def _parse(data: bytes) -> tuple[int, str] | None:
    """(pgid, command) of a slot's record; None for a blank slot (or one that is not a record)."""
    first, _, rest = data.partition(b"\n")
    text = first.strip()
    if not text.isdigit():
        return None
    return int(text), rest.rstrip(b" ").decode("utf-8", "replace")


def _slots(directory: Path) -> list[tuple[str, tuple[int, str] | None]]:
    """Every slot of ``directory`` with its record (None: blank)."""
    if not directory.is_dir():
        return []
    out = []
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith(SLOT_PREFIX):
            try:
                out.append((entry.name, _parse(entry.read_bytes())))
            except OSError:
                continue
    return out


def _blank_slots(directory: Path) -> tuple[list[str], int]:
    """The blank slots of ``directory`` (to reuse), and the number after its highest slot (for new ones)."""
    free, after = [], 0
    for name, record in _slots(directory):
        number = name[len(SLOT_PREFIX) :]
        if number.isdigit():
            after = max(after, int(number) + 1)
            if record is None:
                free.append(name)
    return free, after


class GroupRegistry:
    """The process groups recorded in ``directory``; safe to share between threads."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._free: list[str] | None = None  # blank slots (names) this registry may write; None: not read yet
        self._next = 0  # the number of the next new slot
        self._held: dict[int, str] = {}  # pgid -> the slot this registry recorded it in

    def record(self, pgid: int, command: str) -> None:
        with self._lock:
            if self._free is None:
                self._free, self._next = _blank_slots(self.directory)
            if self._free:
                slot = self._free.pop()
            else:
                slot, self._next = f"{SLOT_PREFIX}{self._next}", self._next + 1
            self._held[pgid] = slot
        self._write(slot, _record(pgid, command))

    def clear(self, pgid: int) -> None:
        """Forget group ``pgid``: blank the slot that names it (a slot this registry wrote, or any
        slot of the directory naming it: ``resume``'s registry clears what a dead one recorded)."""
        with self._lock:
            slot = self._held.pop(pgid, None)
        if slot is not None:
            self._write(slot, _BLANK)
            with self._lock:
                if self._free is not None:
                    self._free.append(slot)
            return
        (self.directory / str(pgid)).unlink(missing_ok=True)  # the layout before ADR-0050
        for name, found in _slots(self.directory):
            if found is not None and found[0] == pgid:
                self._write(name, _BLANK)

    def list(self) -> list[tuple[int, str]]:
        found = [record for _name, record in _slots(self.directory) if record is not None]
        if self.directory.is_dir():
            for entry in self.directory.iterdir():
                if entry.name.isdigit():  # the layout before ADR-0050: one file per group
                    found.append((int(entry.name), entry.read_text(errors="replace")))
        return sorted(found)

    def _write(self, slot: str, data: bytes) -> None:
        """``data`` over the slot's whole record, in place (a new slot is created once)."""
        path = self.directory / slot
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        except FileNotFoundError:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)

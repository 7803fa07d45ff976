"""Running agent, validation and metric commands: own process group, timeouts, cancel, capped output.

A command is whatever the user wrote, so it may fork daemons, ignore SIGTERM, print gigabytes or
never finish. Each one therefore runs as the leader of a new session and process group
(pgid == pid), reported to the caller through ``on_spawn`` so it can be recorded durably and
killed by :func:`kill_process_group` after a controller crash. When the leader exits, times out or
is cancelled, the whole group is SIGKILLed, and then whatever left the group and session
(``setsid``, double forks) is found and killed too (``escapees``), so nothing it started outlives it.
The leader is only reaped after the group kill, which keeps its pid (and the group id) from being
reused in between.

Output is read from both pipes in this thread with a selector (no deadlock on a chatty command,
no reader thread left blocked on a pipe that an escaped grandchild holds open) and capped per
stream: the first and last halves are kept. Lines starting with one of ``capture_prefixes``
(``METRIC``, ``COST`` …) are collected from the whole stream before any truncation.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from controller.workspace.escapees import (
    SPAWN_LOCK,
    active_sessions,
    ensure_subreaper,
    reap_escapees,
    start_ticks,
)

KILL_GRACE_S = 2.0  # seconds between SIGTERM and SIGKILL on timeout or cancel
POLL_S = 0.05  # how often the cancel event and the deadline are checked
DRAIN_S = 2.0  # how long to wait for pipe EOF after the group is dead (an escaped process may hold it)
MAX_MATCHED_LINE = 64 * 1024  # longest captured line kept; longer ones are cut
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class CommandResult:
    """What a command did. ``returncode`` is None when crucible killed it (timeout or cancel) and
    negative (-signal) when something else killed it."""

    returncode: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    matched_lines: tuple[str, ...]
    timed_out: bool
    cancelled: bool
    duration_s: float
    stderr_truncated: bool = False
    # Processes the command started that were still alive after the kill at its end (see ``escapees``).
    survivors: tuple[int, ...] = ()
    # Why a sandboxed command could not start (exit 126/127): the missing path, named by the caller.
    start_problem: str | None = None


class _CappedBuffer:
    """Keeps the first and last ``cap // 2`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self._half = max(cap // 2, 1)
        self._cap = cap
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._half - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self._half:
                del self._tail[: len(self._tail) - self._half]

    @property
    def truncated(self) -> bool:
        return self.total > self._cap

    def text(self) -> str:
        if not self.truncated:
            whole = bytes(self._head + self._tail)
            return whole.decode("utf-8", "replace")
        tail = bytes(self._tail[-self._half :])
        dropped = self.total - len(self._head) - len(tail)
        marker = f"\n[... {dropped} bytes truncated ...]\n"
        return self._head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace")


class _LineMatcher:
    """Collects every complete line that starts with one of the prefixes, across chunk borders."""

    def __init__(self, prefixes: Sequence[str]) -> None:
        self._prefixes = tuple(p.encode() for p in prefixes if p)
        self._pending = bytearray()
        self.lines: list[str] = []

    def feed(self, data: bytes) -> None:
        if not self._prefixes:
            return
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                self._append(data[start:])
                return
            self._append(data[start:end])
            self._finish_line()
            start = end + 1

    def close(self) -> None:
        if self._pending:
            self._finish_line()

    def _append(self, piece: bytes) -> None:
        room = MAX_MATCHED_LINE - len(self._pending)
        if room > 0:
            self._pending += piece[:room]

    def _finish_line(self) -> None:
        line = bytes(self._pending)
        self._pending.clear()
        if line.startswith(self._prefixes):
            self.lines.append(line.rstrip(b"\r").decode("utf-8", "replace"))


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _leader_exited(pid: int) -> bool:
    """True once the leader has exited, without reaping it (its pid keeps the group id reserved)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


class _Pump:
    """Moves bytes from the child's pipes into the buffers until EOF on both."""

    def __init__(self, proc: subprocess.Popen[bytes], cap: int, prefixes: Sequence[str]) -> None:
        self.stdout = _CappedBuffer(cap)
        self.stderr = _CappedBuffer(cap)
        self.matcher = _LineMatcher(prefixes)
        self._selector = selectors.DefaultSelector()
        self._idle = 0.001
        assert proc.stdout is not None and proc.stderr is not None
        self._selector.register(proc.stdout, selectors.EVENT_READ, "out")
        self._selector.register(proc.stderr, selectors.EVENT_READ, "err")

    @property
    def open(self) -> bool:
        return bool(self._selector.get_map())

    def pump(self, timeout: float) -> None:
        if not self.open:
            # Both pipes are closed; the leader usually exits within a millisecond of that, so back
            # off from 1 ms instead of sleeping a whole poll interval per command.
            time.sleep(min(timeout, self._idle))
            self._idle = min(self._idle * 2, POLL_S)
            return
        for key, _ in self._selector.select(timeout):
            data = os.read(key.fd, _CHUNK)
            if not data:
                self._selector.unregister(key.fileobj)
            elif key.data == "out":
                self.stdout.feed(data)
                self.matcher.feed(data)
            else:
                self.stderr.feed(data)

    def drain(self, limit_s: float) -> None:
        deadline = time.monotonic() + limit_s
        while self.open and time.monotonic() < deadline:
            self.pump(POLL_S)
        self.matcher.close()
        self._selector.close()


def _spawn_failed(error: OSError, started: float) -> CommandResult:
    return CommandResult(
        returncode=127,
        stdout="",
        stderr=f"crucible: cannot start command: {error}",
        stdout_truncated=False,
        matched_lines=(),
        timed_out=False,
        cancelled=False,
        duration_s=time.monotonic() - started,
    )


def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None,
    cancel: threading.Event | None = None,
    on_spawn: Callable[[int], None] | None = None,
    capture_prefixes: Sequence[str] = (),
    cap_bytes: int = 1 << 20,
    stdin_devnull: bool = True,
) -> CommandResult:
    """Run ``argv`` in its own process group and wait for it (see the module docstring).

    ``timeout`` in seconds (None: no limit). On timeout or when ``cancel`` is set: SIGTERM to the
    group, up to KILL_GRACE_S for the leader to exit, then SIGKILL to the group; the result then
    has ``returncode=None``. A command that cannot be started at all (missing program or cwd)
    gives returncode 127 and the reason in stderr, like a shell would. If ``on_spawn`` raises,
    the group is killed and the exception propagates.
    """
    started = time.monotonic()
    ensure_subreaper()
    SPAWN_LOCK.acquire()  # until the new session is in active_sessions (see ``escapees``)
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL if stdin_devnull else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as error:
        SPAWN_LOCK.release()
        return _spawn_failed(error, started)
    pgid = proc.pid
    since = start_ticks(pgid)
    active_sessions.add(pgid)
    SPAWN_LOCK.release()
    pump = _Pump(proc, cap_bytes, capture_prefixes)
    stop: str | None = None
    try:
        if on_spawn is not None:
            on_spawn(pgid)
        deadline = None if timeout is None else started + timeout
        stop = _wait_or_stop(proc.pid, pump, deadline, cancel)
        if stop is not None:
            _terminate(proc.pid, pump)
    finally:
        _killpg(pgid, signal.SIGKILL)
        proc.wait()
        active_sessions.discard(pgid)
        survivors = reap_escapees(pgid, since)
        pump.drain(DRAIN_S)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return CommandResult(
        returncode=None if stop is not None else proc.returncode,
        stdout=pump.stdout.text(),
        stderr=pump.stderr.text(),
        stdout_truncated=pump.stdout.truncated,
        matched_lines=tuple(pump.matcher.lines),
        timed_out=stop == "timeout",
        cancelled=stop == "cancel",
        duration_s=time.monotonic() - started,
        stderr_truncated=pump.stderr.truncated,
        survivors=tuple(survivors),
    )


def _wait_or_stop(
    pid: int, pump: _Pump, deadline: float | None, cancel: threading.Event | None
) -> str | None:
    """Pump output until the leader exits (None), the deadline passes ("timeout") or ``cancel`` is set
    ("cancel")."""
    while not _leader_exited(pid):
        if cancel is not None and cancel.is_set():
            return "cancel"
        if deadline is not None and time.monotonic() >= deadline:
            return "timeout"
        wait = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
        pump.pump(wait)
    return None


def _terminate(pid: int, pump: _Pump) -> None:
    """SIGTERM the group and give the leader KILL_GRACE_S to exit; the caller SIGKILLs the group."""
    _killpg(pid, signal.SIGTERM)
    grace_end = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < grace_end and not _leader_exited(pid):
        pump.pump(POLL_S)


def kill_process_group(pgid: int, *, require_env: Mapping[str, str] | None = None) -> bool:
    """SIGKILL process group ``pgid`` if a process of it still runs; True if one was signalled.

    Used by ``resume`` for groups a dead controller recorded. After a reboot a recorded pgid may
    belong to an unrelated process: pass ``require_env`` (e.g. ``{"CRUCIBLE_RUN_ID": run_id}``) to
    kill the group only if one of its members has all those variables in its environment.
    """
    if pgid <= 1:
        raise ValueError(f"refusing to signal process group {pgid}")
    if not _live_members(pgid):
        return False
    if require_env is not None and not _group_has_env(pgid, require_env):
        return False
    try:
        return _killpg(pgid, signal.SIGKILL)
    except PermissionError:
        return False


def process_group_alive(pgid: int) -> bool:
    """True while a process of group ``pgid`` is running (zombies waiting to be reaped do not count)."""
    if pgid <= 1:
        raise ValueError(f"not a process group id: {pgid}")
    return bool(_live_members(pgid))


def _live_members(pgid: int) -> list[int]:
    """Pids of the non-zombie processes in group ``pgid``, from /proc/<pid>/stat."""
    members: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(entry.name))
    return members


def _group_has_env(pgid: int, required: Mapping[str, str]) -> bool:
    wanted = {f"{name}={value}".encode() for name, value in required.items()}
    for pid in _live_members(pgid):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/environ", "rb") as handle:
            if wanted <= set(handle.read().split(b"\0")):
                return True
    return False

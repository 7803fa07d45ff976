"""Processes that left a command's process group and session, found and killed when the command ends.

Killing a command's process group does not reach what it started with ``setsid`` (or a double fork):
``setsid sh -c "sleep 8; echo 99 > src/value.txt" &`` outlived its turn and rewrote the candidate after
it was measured. Without a sandbox's PID namespace, crucible makes the controller a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``): an orphaned descendant is re-parented to the controller instead of
to init, so it stays findable. When a command ends, :func:`reap_escapees` kills, until none is left,
every process of the command's session and every orphan re-parented to the controller that started
after the command, in a session that is neither the controller's own nor that of another command still
running (those are found by that command's own end) nor one the controller started on purpose
(:func:`own_session`: bounded git). Zombie orphans are reaped.

A cgroup per command would need a delegated cgroup-v2 subtree, which containers and many CI runners
do not give; the subreaper works for any unprivileged process on Linux ≥ 3.4 (ADR 0007).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import TypeVar

PR_SET_CHILD_SUBREAPER = 36
ESCAPEE_GRACE_S = 2.0  # how long killed escapees get to disappear before they count as survivors
_STAT_BYTES = 4096  # /proc/PID/stat is 52 numbers and a name of at most 64 bytes: well under this

# Sessions this process started on purpose and still owns: the running commands', and those of
# :func:`own_session` (bounded git). Guarded by SPAWN_LOCK while one is being started, so a scan never
# mistakes a process that was just spawned for an orphan.
active_sessions: set[int] = set()
SPAWN_LOCK = threading.Lock()
_Process = TypeVar("_Process", bound="subprocess.Popen[bytes]")
_subreaper = threading.Lock()
_subreaper_on: list[bool] = []


def ensure_subreaper() -> bool:
    """Make this process a child subreaper (once); False where the kernel or libc does not allow it."""
    with _subreaper:
        if not _subreaper_on:
            libc_name = ctypes.util.find_library("c")
            ok = False
            if libc_name is not None:
                libc = ctypes.CDLL(libc_name, use_errno=True)
                ok = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            _subreaper_on.append(ok)
        return _subreaper_on[0]


def own_session(start: Callable[[], _Process]) -> _Process:
    """Start a process in a session of its own (``start`` passes ``start_new_session=True``) that no
    command's escapee scan takes for something the command left behind; :func:`release_session` once
    it has been waited for.

    Any child of this process in a foreign session that started after a command looks like an orphan
    the command re-parented here, so a command ending in one thread killed git over a worker's input
    that a server thread had just started (``crucible serve`` runs both in one process)."""
    with SPAWN_LOCK:
        process = start()
        active_sessions.add(process.pid)
    return process


def release_session(pid: int) -> None:
    """Forget a session :func:`own_session` started, once its leader was waited for (a pid is reused)."""
    with SPAWN_LOCK:
        active_sessions.discard(pid)


def _stat(pid: str) -> tuple[int, int, bytes, int] | None:
    """(parent pid, session id, state, start time in clock ticks) of ``pid`` from /proc, or None.

    One ``os.read`` of the file (a few hundred bytes, made whole by the kernel on the first read),
    not a buffered file object: a scan reads every process's, after every command, and the file
    object cost twice the read itself."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, _STAT_BYTES)
        fields = data[data.rindex(b")") + 2 :].split(b" ", 20)  # the name may hold ") "; fields 3-22
        return int(fields[1]), int(fields[3]), fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None
    finally:
        os.close(fd)


def start_ticks(pid: int) -> int:
    """When ``pid`` started (clock ticks since boot); 0 if it is already gone."""
    found = _stat(str(pid))
    return 0 if found is None else found[3]


@dataclass(frozen=True)
class _Walk:
    """One pass over ``/proc``: (pid, parent, session, state, start ticks) of every process but this
    one, and the sessions registered as running when the pass began."""

    running_before: frozenset[int]
    rows: tuple[tuple[int, int, int, bytes, int], ...]


def _walk_proc() -> _Walk:
    me = os.getpid()
    with SPAWN_LOCK:
        running_before = frozenset(active_sessions)
    rows = []
    inodes: dict[int, int] = {}  # of the processes read: pid -> inode of its /proc entry
    skipped: set[int] = set()
    outside = _OUTSIDE.known()
    for entry in os.scandir("/proc"):
        name = entry.name
        if not name.isdigit():
            continue
        pid, inode = int(name), entry.inode()
        if outside.get(pid) == inode:
            skipped.add(pid)  # proven not to descend from this process: nothing it does is a command's
            continue
        if pid == me:
            continue
        found = _stat(name)
        if found is not None:
            parent, sid, state, started = found
            rows.append((pid, parent, sid, state, started))
            inodes[pid] = inode
    _OUTSIDE.learn(skipped, {pid: inodes[pid] for pid in outside_of(me, rows, skipped)})
    return _Walk(running_before, tuple(rows))


def outside_of(me: int, rows: Sequence[tuple[int, int, int, bytes, int]], known: Set[int]) -> set[int]:
    """The pids of ``rows`` (pid, parent, session, state, start ticks: one pass) proven not to descend
    from ``me``: each parent up to the root (pid 0's children) was read in the same pass, or is in
    ``known`` (proven so by an earlier pass and not read in this one: the same process, by the inode of
    its /proc entry), and none is ``me``. A parent
    whose row is missing (it exited meanwhile) or which started after its child (its pid was reused)
    proves nothing: such a process is read again at the next pass.

    Why that is enough: a process's parent is always its creator or, once that exited, the nearest
    living subreaper above it (this process is one, ``ensure_subreaper``) or init, so the parent of a
    descendant of ``me`` is ``me`` or a descendant, whenever it is read; a process outside never
    becomes a descendant. Every process an escapee scan acts on (of a command's session, or whose
    parent is ``me``) descends from ``me``, so skipping those proven outside loses nothing."""
    parent = {pid: ppid for pid, ppid, _sid, _state, _started in rows}
    started = {pid: start for pid, _ppid, _sid, _state, start in rows}
    verdict: dict[int, bool | None] = {}  # True: outside; False: me or below me; None: not proven
    out: set[int] = set()
    for pid, *_ in rows:
        path: list[int] = []
        current = pid
        while True:
            if current in verdict:
                found = verdict[current]
                break
            if current == me:
                found = False
                break
            if current == 0 or current in known:
                found = True
                break
            up = parent.get(current)
            if up is None or current in path:
                found = None
                break
            path.append(current)
            if up != 0 and up not in known and up in started and started[up] > started[current]:
                found = None  # the parent's pid belongs to a process started after its child
                break
            current = up
        for step in path:
            verdict[step] = found
        if found:
            out.update(path)
    return out


class _Outside:
    """The processes walks proved not to descend from this one, by pid and /proc inode (a pid reused
    by a new process comes with a new inode: it is read and judged again), skipped by later walks once
    two passes in a row found it so: a parent released while a pass read it may read as a root (its
    parent pid 0), and the next pass reads its orphaned child's new parent, this process. Forgotten once
    gone from ``/proc``. In ``bench/scheduler.py``'s steady state nine processes in ten on the machine
    are outside, and a pass that reads only the others costs a fifth as much (ADR-0050)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[int, int] = {}
        self._once: dict[int, int] = {}  # found outside by the last pass only

    def known(self) -> dict[int, int]:
        with self._lock:
            return dict(self._known)

    def learn(self, skipped: Set[int], outside: Mapping[int, int]) -> None:
        """After a pass that skipped ``skipped`` (still there, as they were) and found ``outside`` (pid ->
        inode) outside: forget what is gone, skip from now on what the pass before found outside too."""
        with self._lock:
            for pid in self._known.keys() - skipped:
                del self._known[pid]
            once = {}
            for pid, inode in outside.items():
                if self._once.get(pid) == inode:
                    self._known[pid] = inode
                else:
                    once[pid] = inode
            self._once = once


_OUTSIDE = _Outside()


class _SharedWalks:
    """Passes over ``/proc`` shared by the command ends that ask for one before it begins (ADR-0048).

    Concurrent runs' commands end together: in ``bench/scheduler.py``'s steady state more than half of
    the scans began while another was under way. A caller is only ever given a pass that *began after
    it asked*: what it must see is what is left once its command ended (its leader waited for, its
    session out of ``active_sessions``), so a pass under way when it asks is not its own; it waits for
    the next one, which every caller that asked meanwhile shares. Each caller filters the rows for its
    own command (``_escapees``)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._begun = 0  # passes begun so far
        self._walking = False
        self._last: tuple[int, _Walk] | None = None  # the number and result of the last pass finished

    def walk(self) -> _Walk:
        with self._changed:
            wanted = self._begun + 1  # the first pass to begin from now on
            while self._last is None or self._last[0] < wanted:
                if not self._walking:
                    self._walking, self._begun = True, self._begun + 1
                    number = self._begun
                    break
                self._changed.wait()
            else:
                return self._last[1]
        try:
            found = _walk_proc()
        except BaseException:
            with self._changed:
                self._walking = False
                self._changed.notify_all()
            raise
        with self._changed:
            self._walking, self._last = False, (number, found)
            self._changed.notify_all()
        return found


_WALKS = _SharedWalks()


def _escapees(session: int, since: int) -> tuple[list[int], list[int]]:
    """(live, zombie) pids of ``session`` and of orphans re-parented to this process that started no
    earlier than the command (``since``, clock ticks) in a session that is neither this process's
    nor another running command's. The start time keeps processes this program started itself in
    their own session before the command (a server, a test's fixture) out of it. From a pass over
    ``/proc`` that began after the call (``_SharedWalks``)."""
    me, own_session = os.getpid(), os.getsid(0)
    walk = _WALKS.walk()
    live: list[tuple[int, int]] = []  # (pid, session)
    zombies: list[tuple[int, int]] = []
    for pid, parent, sid, state, started in walk.rows:
        foreign = parent == me and sid != own_session
        if state in (b"Z", b"X"):
            # A dead orphan is reaped whenever it started: as a subreaper this process inherits the
            # zombies of everything that leaves one (bwrap's namespace init after a probe, say).
            if parent == me and (sid == session or foreign):
                zombies.append((pid, sid))
        elif sid == session or (foreign and (started, pid) > (since, session)):
            # Started after the command's leader: a later clock tick, or the same tick (10 ms) and a
            # higher pid (pids are handed out in order; a wrap within one tick is not a concern).
            live.append((pid, sid))
    # The sessions of running commands are read *after* the scan: a command another thread spawned
    # while the scan ran is registered by then (it registers under SPAWN_LOCK before the lock is
    # free), so it is never taken for an orphan. Read before the scan only, a server's concurrent
    # runs killed each other's freshly started commands (ADR-0012). They are read *before* it too: a
    # command that ended while the scan ran left the set meanwhile, and what the scan saw of its
    # session is its own thread's to reap, by a scan that begins after it left the set (ADR-0048); a
    # session ``own_session`` released meanwhile is git's, which this process started itself.
    # Read after only, such a session looked orphaned: the scan was repeated, and a pid of it that
    # had already been reaped was signalled.
    with SPAWN_LOCK:
        running = (walk.running_before | active_sessions) - {session}
    live = [(pid, sid) for pid, sid in live if sid not in running]
    zombies = [(pid, sid) for pid, sid in zombies if sid not in running]
    return [pid for pid, _ in live], [pid for pid, _ in zombies]


def reap_escapees(session: int, since: int, grace_s: float = ESCAPEE_GRACE_S) -> list[int]:
    """SIGKILL what is left of the command whose session was ``session`` and which started at
    ``since`` (:func:`start_ticks` of its leader); return the pids still alive after ``grace_s``
    (empty when everything is gone)."""
    deadline = time.monotonic() + grace_s
    while True:
        live, zombies = _escapees(session, since)
        for pid in zombies:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        if not live:
            return []
        if time.monotonic() >= deadline:
            return live
        for pid in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)

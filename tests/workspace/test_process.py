"""Commands in their own process group: timeouts, cancel, stragglers, capped output."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controller.workspace import escapees, process
from controller.workspace.process import (
    CommandResult,
    kill_process_group,
    process_group_alive,
    run_command,
)
from tests.support.waiting import wait_until


@pytest.fixture(autouse=True)
def _short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "KILL_GRACE_S", 0.3)
    monkeypatch.setattr(process, "DRAIN_S", 0.5)


@pytest.fixture
def spawned() -> Iterator[list[int]]:
    """Pids a test started outside run_command; SIGKILLed afterwards whatever happened."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def eventually(condition: Callable[[], bool]) -> bool:
    """SIGKILL is asynchronous: the kernel tears a process down a moment after it was sent, so wait
    (up to 10 s) for the condition instead of asserting on a race."""
    try:
        wait_until(condition, "the processes' exit", timeout=10, interval=0.01)
    except AssertionError:
        return False
    return True


def gone(pid: int) -> bool:
    """The process stops running (absent, or a zombie waiting for a reaper that is not us)."""
    return eventually(lambda: _dead(pid))


def group_gone(pgid: int) -> bool:
    return eventually(lambda: not process_group_alive(pgid))


def sh(script: str, tmp_path: Path, **kwargs: object) -> CommandResult:
    env = {"PATH": os.environ["PATH"]}
    return run_command(["sh", "-c", script], cwd=tmp_path, env=env, **kwargs)  # type: ignore[arg-type]


def test_captures_output_exit_code_and_prefixed_lines(tmp_path: Path) -> None:
    result = sh(
        "echo hello; echo 'METRIC p50=1.5'; echo oops >&2; printf 'COST usd=0.1\\r\\nMETRICS no\\n'; exit 3",
        tmp_path,
        timeout=30,
        capture_prefixes=("METRIC ", "COST "),
    )
    assert result.returncode == 3
    assert result.stdout == "hello\nMETRIC p50=1.5\nCOST usd=0.1\r\nMETRICS no\n"
    assert result.stderr == "oops\n"
    assert result.matched_lines == ("METRIC p50=1.5", "COST usd=0.1")
    assert not (result.timed_out or result.cancelled or result.stdout_truncated)
    assert result.duration_s >= 0


def test_runs_in_cwd_with_exactly_the_given_env(tmp_path: Path) -> None:
    result = run_command(
        [sys.executable, "-c", "import os; print(os.getcwd()); print(sorted(os.environ))"],
        cwd=tmp_path,
        env={"ONLY": "1"},
        timeout=30,
    )
    cwd, names = result.stdout.splitlines()
    assert Path(cwd) == tmp_path
    assert "ONLY" in names and "HOME" not in names


def test_own_process_group_reported_on_spawn(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []

    def record(pgid: int) -> None:
        seen.append((pgid, os.getpgid(pgid)))

    result = sh("echo $$", tmp_path, timeout=30, on_spawn=record)
    ((pgid, actual_pgid),) = seen
    assert pgid == actual_pgid == int(result.stdout)
    assert pgid != os.getpgid(0)
    assert group_gone(pgid)


def test_timeout_kills_the_whole_group_even_children_ignoring_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    result = sh(
        f"trap '' TERM; sleep 1000 & echo $! > {pidfile}; echo started; wait",
        tmp_path,
        timeout=0.5,
    )
    assert result.timed_out and not result.cancelled
    assert result.returncode is None
    assert result.stdout == "started\n"
    assert gone(int(pidfile.read_text()))


def test_background_child_does_not_outlive_its_leader(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    groups: list[int] = []
    result = sh(f"sleep 1000 & echo $! > {pidfile}; exit 0", tmp_path, timeout=30, on_spawn=groups.append)
    assert result.returncode == 0 and not result.timed_out
    assert gone(int(pidfile.read_text()))
    assert group_gone(groups[0])


def test_escaped_grandchild_holding_the_pipe_does_not_hang(tmp_path: Path, spawned: list[int]) -> None:
    pidfile = tmp_path / "escaped.pid"
    result = sh(f"setsid sleep 1000 & echo $! > {pidfile}; echo out", tmp_path, timeout=30)
    spawned.append(int(pidfile.read_text()))
    assert result.returncode == 0
    assert result.stdout == "out\n"


def test_cancel_event_stops_the_command(tmp_path: Path) -> None:
    cancel = threading.Event()
    pidfile = tmp_path / "child.pid"

    result = sh(
        f"trap '' TERM; sleep 1000 & echo $! > {pidfile}; wait",
        tmp_path,
        timeout=None,
        cancel=cancel,
        on_spawn=lambda _pgid: cancel.set(),
    )
    assert result.cancelled and not result.timed_out
    assert result.returncode is None
    assert not pidfile.exists() or gone(int(pidfile.read_text()))


def test_on_spawn_failure_kills_the_group(tmp_path: Path) -> None:
    groups: list[int] = []

    def explode(pgid: int) -> None:
        groups.append(pgid)
        raise RuntimeError("cannot record")

    with pytest.raises(RuntimeError):
        sh("sleep 1000", tmp_path, timeout=None, on_spawn=explode)
    assert group_gone(groups[0])


def test_output_is_capped_but_every_metric_line_is_kept(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "w = sys.stdout.write\n"
        "w('METRIC first=1\\n')\n"
        "for i in range(3 * 1024):\n"
        "    w(('x' * 1023) + '\\n')\n"
        "    if i == 1500: w('METRIC middle=2\\n')\n"
        "sys.stderr.write('e' * (3 << 20))\n"
        "w('METRIC last=3')\n"
    )
    result = run_command(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={},
        timeout=60,
        capture_prefixes=("METRIC ",),
    )
    assert result.returncode == 0
    assert result.matched_lines == ("METRIC first=1", "METRIC middle=2", "METRIC last=3")
    assert result.stdout_truncated and result.stderr_truncated
    assert result.stdout.startswith("METRIC first=1\n")
    assert result.stdout.endswith("METRIC last=3")
    assert "METRIC middle=2" not in result.stdout
    assert "bytes truncated ...]" in result.stdout
    assert len(result.stdout.encode()) < (1 << 20) + 100
    assert len(result.stderr) < (1 << 20) + 100


def test_truncation_marker_counts_dropped_bytes(tmp_path: Path) -> None:
    result = run_command(
        [sys.executable, "-c", "print('a' * 50 + 'b' * 50, end='')"],
        cwd=tmp_path,
        env={},
        timeout=30,
        cap_bytes=20,
    )
    assert result.stdout == "a" * 10 + "\n[... 80 bytes truncated ...]\n" + "b" * 10
    untouched = run_command(
        ["printf", "12345"], cwd=tmp_path, env={"PATH": os.environ["PATH"]}, timeout=30, cap_bytes=5
    )
    assert untouched.stdout == "12345" and not untouched.stdout_truncated


def test_missing_program_is_exit_127(tmp_path: Path) -> None:
    result = run_command(["/no/such/program"], cwd=tmp_path, env={}, timeout=5)
    assert result.returncode == 127
    assert "/no/such/program" in result.stderr


def test_kill_process_group_and_alive(spawned: list[int]) -> None:
    proc = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    spawned.append(proc.pid)
    assert process_group_alive(proc.pid)
    assert kill_process_group(proc.pid)
    proc.wait()
    assert not process_group_alive(proc.pid)
    assert not kill_process_group(proc.pid)


def test_kill_process_group_checks_the_environment_marker(spawned: list[int]) -> None:
    env = {**os.environ, "CRUCIBLE_RUN_ID": "run-42"}
    proc = subprocess.Popen(["sleep", "1000"], start_new_session=True, env=env)
    spawned.append(proc.pid)

    assert not kill_process_group(proc.pid, require_env={"CRUCIBLE_RUN_ID": "run-7"})
    assert proc.poll() is None
    assert kill_process_group(proc.pid, require_env={"CRUCIBLE_RUN_ID": "run-42"})
    assert proc.wait() == -signal.SIGKILL


def test_refuses_to_signal_group_zero_or_one() -> None:
    with pytest.raises(ValueError):
        kill_process_group(0)
    with pytest.raises(ValueError):
        process_group_alive(1)


def test_a_process_that_left_the_session_does_not_outlive_the_command(tmp_path: Path) -> None:
    pidfile = tmp_path / "escapee.pid"
    script = (
        f"setsid sh -c 'echo $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; exec sleep 60' &"
        f" while [ ! -s {pidfile} ]; do sleep 0.01; done"
    )
    result = run_command(["/bin/sh", "-c", script], cwd=tmp_path, env=dict(os.environ), timeout=30)

    assert result.returncode == 0 and result.survivors == ()
    pid = int(pidfile.read_text())
    stat_file = Path(f"/proc/{pid}/stat")
    assert not stat_file.exists() or b") Z" in stat_file.read_bytes(), "the setsid daemon is still running"


def test_a_command_that_ends_while_another_scans_is_left_to_its_own_reap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server runs commands side by side: one that ends (its thread takes its session out of
    ``active_sessions`` and scans after) while another command's end is scanning must not look like
    that command's orphan. Its session leaves the set mid-scan here, as that thread would take it out."""
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a child in a session of its own
    real_stat = escapees._stat

    def ending_midway(pid: str) -> tuple[int, int, bytes, int] | None:
        escapees.active_sessions.discard(other.pid)  # the other command ended meanwhile
        return real_stat(pid)

    session = os.getpid() + 1_000_000  # the scanning command's (gone already: nothing of it is left)
    try:
        escapees.active_sessions.add(other.pid)
        monkeypatch.setattr(escapees, "_stat", ending_midway)
        live, _ = escapees._escapees(session, since=0)
        assert other.pid not in live
        monkeypatch.setattr(escapees, "_stat", real_stat)
        live, _ = escapees._escapees(session, since=0)
        assert other.pid in live, "once it has ended, what is left of its session is an escapee"
    finally:
        escapees.active_sessions.discard(other.pid)
        other.kill()
        other.wait()


def test_a_pass_over_proc_under_way_when_a_command_ends_is_not_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Commands that end while a pass is under way share the next one: a pass that began before a
    command ended may have missed what the command left, so it is never given to that command."""
    walks = escapees._SharedWalks()
    began, finish = [threading.Event(), threading.Event()], [threading.Event(), threading.Event()]
    passes: list[int] = []

    def one_pass() -> escapees._Walk:
        number = len(passes)
        passes.append(number)
        began[number].set()
        assert finish[number].wait(30)
        return escapees._Walk(frozenset(), ((number, 0, 0, b"S", 0),))

    monkeypatch.setattr(escapees, "_walk_proc", one_pass)
    got: dict[str, int] = {}

    def ask(name: str) -> None:
        got[name] = walks.walk().rows[0][0]

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    assert began[0].wait(30)
    later = [threading.Thread(target=ask, args=(name,)) for name in ("second", "third")]
    for thread in later:
        thread.start()
    wait_until(lambda: len(walks._changed._waiters) == 2, "both later callers waiting")  # type: ignore[attr-defined]
    finish[0].set()
    assert began[1].wait(30)  # one of them began the next pass; the other waits for it
    finish[1].set()
    for thread in (first, *later):
        thread.join(30)
    assert got == {"first": 0, "second": 1, "third": 1}
    assert passes == [0, 1]


# -- passes that skip what is proven outside (ADR-0050) -------------------------------------------

ME = 100


def row(pid: int, parent: int, started: int = 10, sid: int = 1) -> tuple[int, int, int, bytes, int]:
    return (pid, parent, sid, b"S", started)


def test_a_process_is_outside_when_its_parents_reach_the_root_without_this_one() -> None:
    rows = [
        row(1, 0, started=1),  # init
        row(50, 1, started=5),  # this process's parent, and its other child
        row(51, 50, started=6),
        row(200, ME),  # this process's child, its child, and an orphan of a daemon it reparented
        row(201, 200, started=11),
        row(300, ME, sid=300),
        row(400, 399),  # a parent that is gone from the pass: not proven
        row(500, 501, started=5),  # a parent that started after its child: a reused pid
        row(501, 1, started=9),
    ]
    assert escapees.outside_of(ME, rows, set()) == {1, 50, 51, 501}


def test_a_parent_proven_outside_by_an_earlier_pass_proves_its_new_children_outside() -> None:
    rows = [row(60, 50, started=20), row(61, 60, started=21), row(700, 60, started=20)]
    assert escapees.outside_of(ME, rows, {50}) == {60, 61, 700}
    assert escapees.outside_of(ME, rows, set()) == set()  # without it, 50's row is missing


def test_a_process_is_skipped_once_two_passes_found_it_outside_and_while_its_inode_holds() -> None:
    outside = escapees._Outside()
    outside.learn(set(), {1: 11, 50: 12})
    assert outside.known() == {}  # one pass is not enough: a dying parent may read as a root
    outside.learn(set(), {1: 11})
    assert outside.known() == {1: 11}
    outside.learn({1}, {50: 12})
    outside.learn({1}, {50: 12})
    assert outside.known() == {1: 11, 50: 12}
    outside.learn({1}, {50: 99})  # pid 50 is another process now (a new inode): judged again
    assert outside.known() == {1: 11}
    outside.learn(set(), {})  # gone from /proc (not skipped by the pass): forgotten
    assert outside.known() == {}


def test_a_warm_pass_reads_only_what_descends_from_this_process_and_escapees_are_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once two passes found a process outside this one (nearly all of a shared machine's), it is
    skipped; a child, and a daemon a running command left in a session of its own, are read by every
    pass however many saw them before, and the daemon is killed when its command ends."""
    real_stat = escapees._stat
    read: list[str] = []

    def counted(pid: str) -> tuple[int, int, bytes, int] | None:
        read.append(pid)
        return real_stat(pid)

    pidfile, go = tmp_path / "escapee.pid", tmp_path / "go"
    script = (
        f"setsid sh -c 'echo $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; exec sleep 60' &"
        f" while [ ! -f {go} ]; do sleep 0.01; done"
    )
    results: list[CommandResult] = []
    command = threading.Thread(
        target=lambda: results.append(
            run_command(["/bin/sh", "-c", script], cwd=tmp_path, env=dict(os.environ), timeout=30)
        )
    )
    with subprocess.Popen(["sleep", "60"], start_new_session=True) as child:
        try:
            command.start()
            wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", "the daemon")
            daemon = int(pidfile.read_text())
            for _ in range(3):
                escapees._walk_proc()
            monkeypatch.setattr(escapees, "_stat", counted)
            walk = escapees._walk_proc()
            monkeypatch.setattr(escapees, "_stat", real_stat)
            go.touch()
            command.join(30)
        finally:
            child.kill()
    seen = [pid for pid, *_ in walk.rows]
    assert child.pid in seen and daemon in seen
    listed = [name for name in os.listdir("/proc") if name.isdigit()]
    assert len(read) < len(listed) / 2, (len(read), len(listed))
    assert results and results[0].returncode == 0 and results[0].survivors == ()
    assert gone(daemon), "the setsid daemon is still running"

"""The executor's contract, for the real ``Executor`` and the round engine's fake (``ScriptedExecutor``).

What the turn path relies on when it runs a command: the protocol lines of its output are picked out,
its exit status is reported, a command past its timeout is reported timed out and one the run cancels
is reported cancelled (neither with an exit status), the protocol variables reach it and secrets of
the environment do not, a change it makes to a checkout's ``.git`` is undone and reported once, and its
log is written with the secrets redacted. Each program is written twice, as the shell command the real
executor runs and as the function the fake plays, and both executors must give the same answers; a
fake that drifted from the real one fails here, not in a unit test that trusted it.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.services.execution.execute import Executor
from controller.services.execution.pgroups import GroupRegistry
from controller.workspace.envscrub import scrub_env
from tests.support.scripted_executor import Call, Program, Reply, ScriptedExecutor
from tests.support.waiting import wait_until

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # looks like a GitHub token: scrubbed, redacted


@dataclass(frozen=True)
class Case:
    """One program in both forms: ``shell`` for the real executor, ``program`` for the fake."""

    shell: str
    program: Program


def _echo_protocol(call: Call) -> Reply:
    return Reply(stdout=f"hello\nMETRIC m=3\nturn {call.env['CRUCIBLE_TURN']}\nHYPOTHESIS: faster\n")


def _fail(call: Call) -> Reply:
    (call.cwd / "out.txt").write_text("partial\n")
    return Reply(returncode=4, stderr="boom\n")


def _leak(call: Call) -> Reply:
    return Reply(stdout=f"token={call.env.get('GITHUB_TOKEN', '')} {SECRET}\n")


def _tamper(call: Call) -> Reply:
    with (call.cwd / ".git" / "config").open("a") as config:
        config.write("[core]\n\tfsmonitor = evil\n")
    return Reply()


def _started(call: Call) -> Reply:
    (call.cwd / "started").touch()
    return Reply(blocks=True)


CASES = {
    "protocol": Case(
        'echo hello; echo "METRIC m=3"; echo "turn $CRUCIBLE_TURN"; echo "HYPOTHESIS: faster"', _echo_protocol
    ),
    "fail": Case("echo partial > out.txt; echo boom >&2; exit 4", _fail),
    "leak": Case(f'echo "token=$GITHUB_TOKEN {SECRET}"', _leak),
    "tamper": Case("printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config", _tamper),
    "overrun": Case("sleep 30", lambda _call: Reply(overruns=True)),
    "blocks": Case("touch started; sleep 30", _started),
}


@pytest.fixture(params=["real", "scripted"])
def executor(request: pytest.FixtureRequest, tmp_path: Path) -> Executor:
    environ = {"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": SECRET, "LANG": "C"}
    real = Executor(
        groups=GroupRegistry(tmp_path / "groups"),
        run_id="r1",
        scrubbed=scrub_env(environ),
        sandbox=False,
        network=True,
        sandbox_home=str(tmp_path / "sandbox-home"),
    )
    if request.param == "real":
        return real
    return ScriptedExecutor.replacing(real, {case.shell: case.program for case in CASES.values()})


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A git checkout for the commands to run in, its ``.git`` guarded as a run's checkouts are."""
    root = tmp_path / "work"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_the_protocol_lines_are_picked_out_and_the_protocol_variables_reach_the_command(
    executor: Executor, work: Path
) -> None:
    result = executor.run(
        CASES["protocol"].shell, cwd=work, timeout=10, writable=[work], protocol={"CRUCIBLE_TURN": "7"}
    )
    assert (result.returncode, result.timed_out, result.cancelled) == (0, False, False)
    assert result.matched_lines == ("METRIC m=3", "HYPOTHESIS: faster")
    assert "turn 7" in result.stdout.splitlines()


def test_a_failing_command_reports_its_status_and_what_it_wrote(executor: Executor, work: Path) -> None:
    result = executor.run(CASES["fail"].shell, cwd=work, timeout=10, writable=[work], protocol={})
    assert (result.returncode, result.stderr.strip(), result.matched_lines) == (4, "boom", ())
    assert (work / "out.txt").read_text() == "partial\n"


def test_secrets_never_reach_the_command_and_are_redacted_in_its_log(
    executor: Executor, work: Path, tmp_path: Path
) -> None:
    log = tmp_path / "logs" / "agent.log"
    result = executor.run(CASES["leak"].shell, cwd=work, timeout=10, writable=[work], protocol={}, log=log)
    assert result.stdout.startswith("token= "), "the scrubbed environment has no GITHUB_TOKEN"
    text = log.read_text()
    assert SECRET not in text and "exit 0" in text and executor.redact(SECRET) != SECRET


def test_a_change_to_a_guarded_git_directory_is_undone_and_reported_once(
    executor: Executor, work: Path
) -> None:
    executor.guarded.append(work / ".git")
    before = (work / ".git" / "config").read_text()
    executor.run(CASES["tamper"].shell, cwd=work, timeout=10, writable=[work], protocol={})
    assert (work / ".git" / "config").read_text() == before
    violations = executor.take_violations()
    assert len(violations) == 1 and ".git/config" in violations[0]
    assert executor.take_violations() == []


def test_a_command_past_its_timeout_is_reported_timed_out_without_a_status(
    executor: Executor, work: Path
) -> None:
    result = executor.run(CASES["overrun"].shell, cwd=work, timeout=0.3, writable=[work], protocol={})
    assert (result.timed_out, result.cancelled, result.returncode) == (True, False, None)


def test_a_command_the_run_cancels_is_reported_cancelled_without_a_status(
    executor: Executor, work: Path
) -> None:
    canceller = _cancel_when(executor, lambda: (work / "started").exists())
    result = executor.run(CASES["blocks"].shell, cwd=work, timeout=60, writable=[work], protocol={})
    canceller.join()
    assert (result.cancelled, result.timed_out, result.returncode) == (True, False, None)


def _cancel_when(executor: Executor, started: Callable[[], bool]) -> threading.Thread:
    def cancel() -> None:
        wait_until(started, what="the command to start")
        executor.cancel.set()

    thread = threading.Thread(target=cancel, daemon=True)
    thread.start()
    return thread

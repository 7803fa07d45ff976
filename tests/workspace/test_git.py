"""git plumbing: a clean environment, readable errors, ref queries."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from controller.domain.errors import GitError
from controller.workspace.git import git_env, is_ancestor, resolve_ref, run_git
from controller.workspace.process import CommandResult, run_command
from tests.conftest import git, make_repo
from tests.support.waiting import wait_until


def test_git_env_strips_repository_variables_and_keeps_transport_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE", "GIT_OBJECT_DIRECTORY", "GIT_AUTHOR_NAME"):
        monkeypatch.setenv(name, "/elsewhere")
    monkeypatch.setenv("GIT_SSH_COMMAND", "ssh -i key")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "http.proxy")
    monkeypatch.setenv("UNRELATED", "kept")

    env = git_env({"EXTRA": "1"})

    assert not {
        "GIT_DIR",
        "GIT_INDEX_FILE",
        "GIT_WORK_TREE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_AUTHOR_NAME",
    } & set(env)
    assert env["GIT_SSH_COMMAND"] == "ssh -i key"
    assert env["GIT_CONFIG_KEY_0"] == "http.proxy"
    assert env["UNRELATED"] == "kept"
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["LC_ALL"] == "C"
    assert env["EXTRA"] == "1"


def test_inherited_git_dir_cannot_redirect_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = make_repo(tmp_path / "mine", {"a": "1\n"})
    other = make_repo(tmp_path / "other", {"b": "2\n"})
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))

    assert resolve_ref(mine, "HEAD") == git(mine, "--git-dir", str(mine / ".git"), "rev-parse", "HEAD")
    assert run_git(["ls-files"], mine) == "a"


def test_run_git_strips_one_trailing_newline_only(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"f.txt": "line\n\n"})
    assert run_git(["show", "HEAD:f.txt"], repo) == "line\n"
    assert len(run_git(["hash-object", "--stdin"], repo, input=b"x")) == 40


def test_run_git_error_carries_command_and_stderr(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a": "1\n"})
    with pytest.raises(GitError) as caught:
        run_git(["checkout", "no-such-branch"], repo)
    assert caught.value.args_ == ["checkout", "no-such-branch"]
    assert caught.value.returncode != 0
    assert "no-such-branch" in caught.value.stderr
    assert "no-such-branch" in str(caught.value)
    assert run_git(["checkout", "no-such-branch"], repo, check=False) == ""


def test_resolve_ref_peels_tags_and_rejects_unknown(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a": "1\n"})
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "-a", "-m", "annotated", "v1")
    assert resolve_ref(repo, "v1") == head
    assert resolve_ref(repo, "main") == head
    assert len(head) == 40
    for bad in ("nope", "-q", "", "HEAD:a"):
        with pytest.raises(GitError):
            resolve_ref(repo, bad)


def test_is_ancestor(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a": "1\n"})
    first = git(repo, "rev-parse", "HEAD")
    (repo / "a").write_text("2\n")
    git(repo, "commit", "-qam", "second")
    second = git(repo, "rev-parse", "HEAD")
    assert is_ancestor(repo, first, second)
    assert is_ancestor(repo, first, first)
    assert not is_ancestor(repo, second, first)
    with pytest.raises(GitError):
        is_ancestor(repo, "0" * 40, second)


def test_a_git_command_past_its_cpu_bound_is_stopped_by_the_kernel(tmp_path: Path) -> None:
    """``cpu_s`` bounds the CPU a command (and what it starts) may use: a git alias that spins forever,
    as git's parsing of a hostile bundle might, is stopped at one second of CPU, long before its
    wall-clock timeout, with an error that says so."""
    repo = make_repo(tmp_path / "r", {"a": "1"})
    spin = ["-c", "alias.spin=!while :; do :; done", "spin"]
    with pytest.raises(GitError, match="stopped after 1 s of CPU"):
        run_git(spin, repo, timeout=600, cpu_s=1)


def test_what_git_starts_has_the_cpu_bound_from_its_first_instruction(tmp_path: Path) -> None:
    """The bound is in place before git starts, so a process git forks at once inherits it. It was set
    on git once started, and an alias's shell forked before that ran unbounded (a full CI run hung on
    the test above with its spinning shell at 'unlimited')."""
    repo = make_repo(tmp_path / "r", {"a": "1"})
    show = ["-c", "alias.limits=!grep 'Max cpu time' /proc/self/limits", "limits"]
    assert run_git(show, repo, cpu_s=3).split()[3:5] == ["3", "4"]


def test_a_timed_out_git_command_takes_what_it_started_with_it(tmp_path: Path) -> None:
    """A timeout kills git's whole session: a process git started holds the output pipes open, and
    with git alone killed the call waited for it (for good, for a process that never ends)."""
    repo = make_repo(tmp_path / "r", {"a": "1"})
    pid_file = tmp_path / "pid"
    hang = ["-c", f"alias.hang=!echo $$ > {pid_file}; exec sleep 600", "hang"]
    with pytest.raises(GitError, match="timed out after 1 s"):
        run_git(hang, repo, timeout=1)
    stat = Path(f"/proc/{pid_file.read_text().strip()}/stat")

    def ended() -> bool:
        # Gone, or a zombie until whoever adopted it (git died first) reaps it. The pipes close while
        # a killed process is still exiting, so the call may return while it shows as running.
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True

    wait_until(ended, "the child git started is killed with it", timeout=10)


def test_a_bounded_git_command_is_no_escapee_of_a_command_ending_meanwhile(tmp_path: Path) -> None:
    """In ``crucible serve`` a server thread runs bounded git over a worker's input, in a session of
    its own, while a local run's command ends in another thread. That command's escapee scan takes a
    child of this process in a foreign session, started after the command, for something the command
    left behind, and it killed git mid-call. A bounded git command's session is registered as ours."""
    repo = make_repo(tmp_path / "r", {"a": "1"})
    git_started = tmp_path / "git-started"
    spawned = threading.Event()
    ended: list[CommandResult] = []

    def command() -> None:
        script = f"while [ ! -e {git_started} ]; do sleep 0.01; done; sleep 0.2"
        env = {"PATH": os.environ["PATH"]}
        ended.append(
            run_command(
                ["sh", "-c", script], cwd=tmp_path, env=env, timeout=30, on_spawn=lambda _: spawned.set()
            )
        )

    thread = threading.Thread(target=command)
    thread.start()
    try:
        assert spawned.wait(10), "the command started"
        slow = ["-c", f"alias.slow=!touch {git_started}; sleep 1; echo still here", "slow"]
        assert run_git(slow, repo, timeout=30) == "still here"
    finally:
        git_started.touch()
        thread.join(30)
    assert ended and ended[0].returncode == 0, "the command ended while git ran"


def test_a_git_command_within_its_cpu_bound_runs_as_without_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a": "1"})
    assert run_git(["rev-parse", "HEAD"], repo, cpu_s=5) == git(repo, "rev-parse", "HEAD")
    blob = run_git(["hash-object", "--stdin"], repo, input=b"x\n", cpu_s=5)
    assert blob == "587be6b4c3f93f93c489c0111bba5596147a26cb", "input reaches it as before"

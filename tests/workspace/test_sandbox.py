"""The bubblewrap sandbox, with real bwrap and real processes: secrets, network, filesystem."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.domain.errors import CrucibleError, SpecError
from controller.workspace import process, sandbox, sandboxpaths
from controller.workspace.checkout import Checkout
from controller.workspace.envscrub import scrub_env
from controller.workspace.process import CommandResult, run_command
from controller.workspace.sandbox import resolve_sandbox, wrap_command
from tests.conftest import git, make_repo
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SECRET_HEAD, SECRET_TAIL = "hunter2-very", "-secret"  # never written out whole in any argv

SCANNER = """
import os, sys
needle = (sys.argv[1] + sys.argv[2]).encode()
hits, pids = [], [p for p in os.listdir("/proc") if p.isdigit()]
for pid in pids:
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as handle:
                if needle in handle.read():
                    hits.append(f"/proc/{pid}/{name}")
        except OSError:
            pass
hits += ["env:" + k for k, v in os.environ.items() if needle in f"{k}={v}".encode()]
for root in [os.environ["HOME"], *sys.argv[3:]]:
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                with open(os.path.join(folder, name), "rb") as handle:
                    if needle in handle.read():
                        hits.append(os.path.join(folder, name))
            except OSError:
                pass
print("PIDS", len(pids))
print("HOME", os.environ["HOME"], sorted(os.listdir(os.environ["HOME"])))
for hit in hits:
    print("HIT", hit)
"""


@pytest.fixture(autouse=True)
def _short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "KILL_GRACE_S", 0.3)


@pytest.fixture
def workspace(tmp_path: Path) -> Checkout:
    source = make_repo(tmp_path / "user-repo", {"README.md": "hello\n", "src/a.py": "A = 1\n"})
    home = Path(os.environ["CRUCIBLE_HOME"])
    return Checkout.create(source, home / "runs" / "r1" / "ws", git(source, "rev-parse", "HEAD"))


@pytest.fixture
def user_shell() -> Iterator[subprocess.Popen[bytes]]:
    """A process outside the sandbox whose environment and command line hold the secret."""
    secret = SECRET_HEAD + SECRET_TAIL
    proc = subprocess.Popen(
        ["sh", "-c", f"sleep 1000; : {secret}"],
        env={"PATH": os.environ["PATH"], "SECRET_X": secret},
        start_new_session=True,
    )
    yield proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def sandboxed(
    argv: list[str], ws: Checkout, env: dict[str, str], *, network: bool, **kwargs: object
) -> CommandResult:
    wrapped = wrap_command(
        argv,
        writable=[ws.path],
        readonly=ws.sandbox_readonly_paths(),
        network=network,
        home=os.environ["HOME"],
    )
    return run_command(wrapped, cwd=ws.path, env=env, **kwargs)  # type: ignore[arg-type]


def test_no_secret_is_visible_inside_the_sandbox(
    workspace: Checkout, user_shell: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = SECRET_HEAD + SECRET_TAIL
    monkeypatch.setenv("SECRET_X", secret)
    (Path(os.environ["HOME"]) / ".git-credentials").write_text(f"https://dev:{secret}@example.com\n")
    scrubbed = scrub_env(os.environ)
    assert "SECRET_X" not in scrubbed.env and secret in scrubbed.secrets
    argv = [sys.executable, "-c", SCANNER, SECRET_HEAD, SECRET_TAIL]

    # Outside, /tmp holds every other test's files: scanning $HOME is enough to prove the scanner.
    unsandboxed = run_command(argv, cwd=workspace.path, env=scrubbed.env, timeout=60)
    inside = sandboxed([*argv, "/tmp", "/run"], workspace, scrubbed.env, network=False, timeout=60)

    # The scanner works: outside the sandbox it finds the user's shell and the credentials file.
    assert f"HIT /proc/{user_shell.pid}/environ" in unsandboxed.stdout
    assert f"HIT /proc/{user_shell.pid}/cmdline" in unsandboxed.stdout
    assert "/.git-credentials" in unsandboxed.stdout
    # Inside: nothing, few processes, an empty home.
    assert inside.returncode == 0, inside.stderr
    assert "HIT" not in inside.stdout
    pids = int(inside.stdout.split("PIDS ")[1].split()[0])
    assert pids <= 3
    assert f"HOME {os.environ['HOME']} []" in inside.stdout


def test_network_is_off_unless_enabled(workspace: Checkout) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    port = listener.getsockname()[1]
    probe = (
        "import socket, sys\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).close(); print('connected')\n"
        "except OSError as e:\n"
        "    print('failed', e)\n"
    )
    env = {"PATH": os.environ["PATH"]}
    try:
        offline = sandboxed([sys.executable, "-c", probe], workspace, env, network=False, timeout=60)
        online = sandboxed([sys.executable, "-c", probe], workspace, env, network=True, timeout=60)
    finally:
        listener.close()
    assert offline.stdout.startswith("failed"), offline.stdout + offline.stderr
    assert online.stdout.strip() == "connected", online.stdout + online.stderr


def test_workspace_writable_everything_else_read_only(workspace: Checkout, tmp_path: Path) -> None:
    source_objects = workspace.sandbox_readonly_paths()[1]
    outside = Path("/var/tmp") / f"crucible-sandbox-{uuid.uuid4().hex}"
    script = f"""
set -u
pwd
echo changed > README.md && echo ws-modify-ok
mkdir -p new/dir && echo x > new/dir/f && echo ws-create-ok
git status --porcelain --untracked-files=all
touch {source_objects}/intruder 2>/dev/null || echo source-objects-readonly
echo x >> .git/config 2>/dev/null || echo git-config-readonly
touch {outside} 2>/dev/null || echo host-readonly
test -e "$SOURCE_README" || echo source-worktree-hidden
ls -A /run | grep -vx systemd | grep -q . || echo run-masked
umount "$HOME" 2>/dev/null || echo cannot-unmount
"""
    try:
        # The source is named through the environment: an absolute path the command names is
        # exposed read-only on purpose (issue 13), the rest of /tmp must stay hidden.
        env = {"PATH": os.environ["PATH"], "SOURCE_README": str(tmp_path / "user-repo" / "README.md")}
        result = sandboxed(["sh", "-c", script], workspace, env, network=False, timeout=60)
    finally:
        created = outside.exists()
        outside.unlink(missing_ok=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == str(workspace.path)
    for expected in (
        "ws-modify-ok",
        "ws-create-ok",
        " M README.md",
        "?? new/dir/f",
        "source-objects-readonly",
        "git-config-readonly",
        "host-readonly",
        "source-worktree-hidden",
        "cannot-unmount",
        "run-masked",
    ):
        assert expected in lines, result.stdout + result.stderr
    assert not created
    assert not (source_objects / "intruder").exists()
    assert workspace.status() == {"README.md": " M", "new/dir/f": "??"}


def test_explicit_chdir(workspace: Checkout, tmp_path: Path) -> None:
    (workspace.path / "src").mkdir(exist_ok=True)
    wrapped = wrap_command(
        ["pwd"], writable=[workspace.path], network=False, home=os.environ["HOME"], cwd=workspace.path / "src"
    )
    result = run_command(wrapped, cwd=tmp_path, env={"PATH": os.environ["PATH"]}, timeout=60)
    assert result.stdout.strip() == str(workspace.path / "src")


def _marked_processes(marker: bytes) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(int(pid))
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    found.remove(int(pid))
        except (OSError, ValueError):
            pass
    return found


def test_timeout_kills_everything_inside_the_sandbox(workspace: Checkout) -> None:
    marker = f"MARK_{uuid.uuid4().hex}"
    env = {"PATH": os.environ["PATH"], "TEST_MARK": marker}
    result = sandboxed(
        ["sh", "-c", "trap '' TERM; sleep 1000 & sleep 1000 & echo started; wait"],
        workspace,
        env,
        network=False,
        timeout=1.0,
    )
    assert result.timed_out and result.stdout == "started\n"
    # SIGKILL is asynchronous: the kernel finishes the exits a moment after the kill.
    wait_until(
        lambda: _marked_processes(f"TEST_MARK={marker}".encode()) == [], what="the sandbox's processes to go"
    )


def test_resolve_sandbox_modes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_sandbox("none") is False
    assert resolve_sandbox("auto") is True
    assert resolve_sandbox("bwrap") is True
    with pytest.raises(SpecError) as caught:
        resolve_sandbox("docker")
    assert caught.value.key == "sandbox.mode"

    sandbox._probe.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        assert sandbox.bwrap_path() is None
        assert resolve_sandbox("auto") is False
        with pytest.raises(CrucibleError, match="not installed"):
            resolve_sandbox("bwrap")
        with pytest.raises(CrucibleError):
            wrap_command(["true"], writable=[], network=False, home="/tmp")
        # network = false is a promise only a sandbox keeps (issue 11, section 2)
        with pytest.raises(SpecError) as network:
            sandbox.resolve_network("auto", network=False)
        assert network.value.key == "sandbox.network"
        assert sandbox.resolve_network("auto", network=True) == (False, None)
        sandboxed, warning = sandbox.resolve_network("none", network=False)
        assert sandboxed is False and warning is not None and "not blocked" in warning
    finally:
        sandbox._probe.cache_clear()


def test_wrap_command_order_and_options() -> None:
    argv = wrap_command(
        ["agent", "--flag"],
        writable=[Path("/w")],
        readonly=[Path("/w/.git")],
        network=True,
        home="/h",
        hide=[Path("/h2")],
    )
    assert argv[-3:] == ["--", "agent", "--flag"]
    assert "--unshare-net" not in argv
    assert argv.index("--tmpfs") < argv.index("--bind") < argv.index("/w/.git")
    assert argv[argv.index("/h2") - 1] == "--tmpfs"
    assert argv[argv.index("HOME") - 1 : argv.index("HOME") + 2] == ["--setenv", "HOME", "/h"]
    assert argv[argv.index("--cap-drop") : argv.index("--cap-drop") + 2] == ["--cap-drop", "ALL"]


@pytest.fixture
def venv_under_tmp(tmp_path: Path) -> Path:
    """A virtual environment under /tmp (pytest's tmp_path), as a throwaway clone or a CI runner has."""
    assert str(tmp_path).startswith("/tmp/"), "this test needs a temp dir under /tmp"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    tool = venv / "bin" / "venv-tool"
    tool.write_text(f"#!{venv}/bin/python\nimport sys\nprint('tool runs in', sys.prefix)\n")
    tool.chmod(0o755)
    (tmp_path / "unrelated-secret.txt").write_text("not for the sandbox\n")
    return venv


def test_programs_interpreters_and_venvs_under_tmp_are_visible_read_only(
    workspace: Checkout, venv_under_tmp: Path
) -> None:
    # issue 13: the tmpfs on /tmp hid every program, interpreter and virtualenv that lives there.
    env = {"PATH": f"{venv_under_tmp / 'bin'}:{os.environ['PATH']}"}
    script = f"venv-tool && {venv_under_tmp}/bin/python -c 'print(1 + 1)' && cd /tmp && find . -type f"
    with_path = wrap_command(
        ["/bin/sh", "-c", script],
        writable=[workspace.path],
        network=False,
        home=os.environ["HOME"],
        search_path=env["PATH"],
    )
    result = run_command(with_path, cwd=workspace.path, env=env, timeout=60)

    assert result.returncode == 0, result.stderr
    assert f"tool runs in {venv_under_tmp}" in result.stdout
    assert "\n2\n" in result.stdout
    assert "unrelated-secret.txt" not in result.stdout, "the private /tmp must stay empty otherwise"
    write = run_command(
        wrap_command(
            ["/bin/sh", "-c", f"touch {venv_under_tmp}/bin/planted"],
            writable=[workspace.path],
            network=False,
            home=os.environ["HOME"],
        ),
        cwd=workspace.path,
        env=env,
        timeout=60,
    )
    assert write.returncode != 0 and not (venv_under_tmp / "bin" / "planted").exists()


def test_a_program_the_sandbox_cannot_see_is_named(workspace: Checkout, venv_under_tmp: Path) -> None:
    # A path the command builds at run time cannot be read from it: the failure must name the path.
    tool = venv_under_tmp / "bin" / "venv-tool"
    env = {"PATH": os.environ["PATH"], "TOOL": str(tool)}
    argv = wrap_command(["/bin/sh", "-c", '"$TOOL"'], writable=[workspace.path], network=False, home="/tmp")
    result = run_command(argv, cwd=workspace.path, env=env, timeout=60)

    assert result.returncode == 127
    problem = sandboxpaths.start_problem(result.stderr)
    assert problem == (
        f"{tool} exists outside but is not visible inside the sandbox (bubblewrap, sandbox.mode); "
        "add it, or the directory of the toolchain that holds it, to sandbox.readonly"
    )


def test_the_private_tmp_is_capped(workspace: Checkout) -> None:
    # issue 11 §4: an uncapped tmpfs is half the RAM, outside the disk budget.
    script = "head -c 3000000 /dev/zero > /tmp/big && echo wrote || echo refused"
    argv = wrap_command(
        ["/bin/sh", "-c", script], writable=[workspace.path], network=False, home="/tmp", tmpfs_bytes=1 << 20
    )
    capped = run_command(argv, cwd=workspace.path, env={"PATH": os.environ["PATH"]}, timeout=60)
    argv = wrap_command(["/bin/sh", "-c", script], writable=[workspace.path], network=False, home="/tmp")
    uncapped = run_command(argv, cwd=workspace.path, env={"PATH": os.environ["PATH"]}, timeout=60)

    assert capped.stdout.strip() == "refused", capped.stdout + capped.stderr
    assert uncapped.stdout.strip() == "wrote"

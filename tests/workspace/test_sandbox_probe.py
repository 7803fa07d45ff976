"""``--dry-run``'s probe and the sentence a command that cannot start gets, with real bubblewrap."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from controller.workspace.sandbox import Sandbox
from controller.workspace.sandboxpaths import start_problem
from controller.workspace.sandboxprobe import preflight, starters
from tests import toolchainkit
from tests.toolchainkit import shell_path

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

FIX = "add it, or the directory of the toolchain that holds it, to sandbox.readonly"


@pytest.fixture
def home() -> Path:
    return Path(os.environ["HOME"])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """Where the probe runs (a component's repository, shown read-only); not a parent of HOME."""
    path = tmp_path / "repo"
    path.mkdir()
    return path


def unknown_manager(home: Path) -> Path:
    """A version manager no rule knows: ``~/.mytool/shims/python3`` execs ``~/.mytool/libexec/run``."""
    root = home / ".mytool"
    (root / "shims").mkdir(parents=True)
    (root / "libexec").mkdir()
    (root / "shims" / "python3").write_text(f'#!/bin/sh\nexec "{root}/libexec/run" "$@"\n')
    (root / "libexec" / "run").write_text("#!/bin/sh\nexit 0\n")
    for script in (root / "shims" / "python3", root / "libexec" / "run"):
        script.chmod(0o755)
    return root


def test_the_probe_names_what_a_shim_needs_and_the_fix(home: Path, repo: Path) -> None:
    root = unknown_manager(home)
    env = {"PATH": f"{root / 'shims'}:/usr/bin:/bin"}
    hidden = Sandbox(network=False, home="/tmp/crucible-home", homes=[home], environ=env)
    fixed = Sandbox(network=False, home="/tmp/crucible-home", homes=[home], environ=env, readonly=[root])

    problems = preflight("python3 bench.py", hidden, environ=env, cwd=repo)
    after = preflight("python3 bench.py", fixed, environ=env, cwd=repo)

    run = root / "libexec" / "run"
    assert (
        f"{run} exists outside but is not visible inside the sandbox (bubblewrap, sandbox.mode); {FIX}"
        in problems
    )
    assert any(
        p.startswith("python3 does not start inside the sandbox: ") and str(run) in p for p in problems
    )
    assert after == []


def test_a_known_toolchain_probes_clean_and_its_interpreter_is_started(home: Path, repo: Path) -> None:
    tool = toolchainkit.nvm(home)
    env = {"PATH": shell_path(tool)}
    sandbox = Sandbox(network=False, home="/tmp/crucible-home", homes=[home], environ=env)

    assert starters("fakecli --flag && python3 x.py | sed s/a/b/", env["PATH"], sandbox) == [
        ("fakecli", [str(tool.path[0] / "node"), "-e", "0"]),
        ("python3", ["python3", "-c", "pass"]),
    ]
    assert preflight("fakecli --flag", sandbox, environ=env, cwd=repo) == []


def test_missing_programs_and_credentials_are_named(home: Path, repo: Path) -> None:
    key = home / ".ssh" / "id_ed25519"
    key.parent.mkdir()
    key.write_text("private\n")
    env = {"PATH": "/usr/bin:/bin"}
    sandbox = Sandbox(network=False, home="/tmp/crucible-home", homes=[home], environ=env)

    problems = preflight(f"no-such-tool-xyz && cat {key}", sandbox, environ=env, cwd=repo)

    assert problems == [
        "no-such-tool-xyz: not found on PATH (outside the sandbox either)",
        f"{key} exists outside but stays hidden inside the sandbox (bubblewrap, sandbox.mode): "
        "it is on the sandbox's deny list of credentials",
    ]


def test_a_script_that_cannot_exec_its_manager_is_explained(home: Path) -> None:
    tool = toolchainkit.pyenv(home)
    shim = tool.path[0] / "python3"
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    argv = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        str(shim),
        str(shim),
    ]
    result = subprocess.run([*argv, "--", str(shim)], capture_output=True, text=True, timeout=60)

    problem = start_problem(result.stderr, "/usr/bin:/bin")

    assert result.returncode == 127
    libexec = home / ".pyenv" / "libexec" / "pyenv"
    assert (
        problem
        == f"{libexec} exists outside but is not visible inside the sandbox (bubblewrap, sandbox.mode); {FIX}"
    )
